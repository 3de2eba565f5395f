"""FLamby's Fed-Heart-Disease protocol: one fixed split, accuracy per hospital and pooled.

FLamby (du Terrail et al., NeurIPS 2022) trains a logistic regression on each hospital alone
(Local 0–3), on the four training sets pooled, and with seven federated strategies, and scores
each on the four hospitals' test sets and on their union (the pooled test, 254 patients).  This
module measures the same rows for our methods on the same split (:func:`flamby_task`, one call per
seed) and through Flower (:func:`flower_task`), and sets FLamby's published numbers beside them
(:func:`~pubsubml.experiments.heart_disease.flamby_summary.summarize_flamby`):

* **Local 0–3, Pooled**: the logistic model of
  :func:`~pubsubml.experiments.heart_disease.methods.logistic` on the public-bound encoding,
  non-private; **Local (own hospital)**: each Local model on its own hospital's test set;
* **Local / Pooled, FLamby's normalisation**: a non-private replication of FLamby's own training
  (per-centre z-scores, :func:`~pubsubml.data.heart_disease.flamby_normalize`; Adam, learning
  rate 1e-3, batches of 4, 50 epochs, binary cross-entropy), to see what the encoding changes;
* **Own**: the subscriber's CV-chosen own model, each hospital on its own test set;
* **FedAvg, FedProx, FedAdam**: our round loop without DP, and at ε = 1 with DP-SGD at every
  client (**DP-… (V)**) and fine-tuned by each hospital without DP (**DP-… (F)**);
* **PubSub-ML**: each hospital subscribes to the other three hospitals' DP logistic models
  (ε = 1) and customizes on its training set; **PubSub-ML***: the same with the other three's
  non-private Local models;
* **… via Flower**: FedAvg, FedProx and FedAdam as Flower's own strategies over our DP clients
  (:mod:`pubsubml.methods.flower`), with the same model, rounds, steps and learning rate.

A method that gives every hospital its own model (Local (own hospital), Own, (F), PubSub-ML) has
its pooled-test accuracy from each hospital's model on that hospital's test patients.

References
----------
du Terrail et al. 2022 (protocol, published results: :mod:`.flamby_reference`); pubsub-ml.txt
§7.3 (baselines), §8 (ε = 1).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
import torch

from pubsubml.data.heart_disease import (
    HOSPITALS,
    FlambySplit,
    flamby_normalize,
    flamby_split,
)
from pubsubml.experiments.heart_disease.flamby_reference import (
    FLAMBY_HYPERPARAMETERS,
)
from pubsubml.experiments.heart_disease.methods import (
    CLASSES,
    DELTA,
    FULL_BATCH,
    SMOKE_TRAINING,
    TRAINING,
    Training,
    customize,
    fit_federated,
    fit_own,
    hospital_models,
    logistic,
    scores,
)
from pubsubml.experiments.heart_disease.splits import FLAMBY_SCHEMA, HospitalSplit, flamby_frames
from pubsubml.experiments.runner import Record
from pubsubml.methods.pubsub.own_crossfit import CrossFitStore
from pubsubml.privacy.dpsgd import init_mlp

__all__ = [
    "EPSILON",
    "FLAMBY_FL",
    "FLOWER_STRATEGIES",
    "FL_NAMES",
    "POOLED",
    "TESTS",
    "flamby_task",
    "flower_task",
    "replication",
]

EPSILON = 1.0
"""ε of every DP row."""

FL_NAMES = ("FedAvg", "FedProx", "FedAdam")
"""The federated strategies run through our loop and through Flower."""

FLOWER_STRATEGIES = {"FedAvg": "fedavg", "FedProx": "fedprox", "FedAdam": "fedadam"}
"""Our name → Flower's strategy of :func:`~pubsubml.methods.flower.dp_server_app`."""

FLAMBY_FL = (
    "FedAvg100",
    "FedProx100",
    "Scaffold100",
    "Cyclic100",
    "FedAdam100",
    "FedAdagrad100",
    "FedYogi100",
)
"""FLamby's published federated strategies (100 local updates per round)."""

POOLED = "pooled"
"""The name of the pooled test set (the four test sets together) in the records."""

TESTS = (*HOSPITALS, POOLED)
"""The test sets of every record, in FLamby's order."""

_Model = Any


def _records(method: str, results: Mapping[str, dict[str, float]], **extra: Any) -> list[Record]:
    return [{"method": method, "test": test, **values, **extra} for test, values in results.items()]


def _pooled(
    parts: list[tuple[np.ndarray, np.ndarray]],
) -> dict[str, float]:
    """Scores on the union of test sets from each part's (probabilities, labels)."""
    proba = np.concatenate([p for p, _ in parts])
    y = np.concatenate([t for _, t in parts])
    return scores(_Fixed(proba), pd.DataFrame(index=range(len(y))), y)


class _Fixed:
    """Probabilities already computed, as a model for :func:`scores`."""

    def __init__(self, proba: np.ndarray) -> None:
        self.proba = proba

    def predict_proba(self, X: pd.DataFrame) -> np.ndarray:
        return np.column_stack([1.0 - self.proba, self.proba])


def _proba(model: _Model, X: pd.DataFrame) -> np.ndarray:
    return np.asarray(model.predict_proba(X), dtype=float)[:, 1]


def on_every_test(
    model: _Model, frames: Mapping[str, HospitalSplit]
) -> dict[str, dict[str, float]]:
    """One model's scores on each hospital's test set and on the pooled test."""
    out = {h: scores(model, s.X_test, s.y_test) for h, s in frames.items()}
    out[POOLED] = _pooled([(_proba(model, s.X_test), s.y_test) for s in frames.values()])
    return out


def on_own_tests(
    models: Mapping[str, _Model], frames: Mapping[str, HospitalSplit]
) -> dict[str, dict[str, float]]:
    """Each hospital's model on its own test set; pooled: the four predictions together."""
    out = {h: scores(models[h], s.X_test, s.y_test) for h, s in frames.items()}
    out[POOLED] = _pooled([(_proba(models[h], s.X_test), s.y_test) for h, s in frames.items()])
    return out


def flamby_task(seed: int, *, smoke: bool = False) -> list[Record]:
    """Every method of the FLamby protocol except Flower's, for one model seed.

    The split is FLamby's and does not depend on ``seed``: the seed draws the models'
    initialisation, the DP noise (seeded: a simulation) and the own model's folds.

    Returns
    -------
    list of dict
        One record per method and test set (:data:`TESTS`): ``method``, ``test``, ``accuracy``,
        ``correct``, ``auc``, ``log_loss``, ``epsilon`` (``inf`` without DP), ``seconds``
        (training); PubSub-ML rows add ``fallback``.
    """
    training = SMOKE_TRAINING if smoke else TRAINING
    frames = flamby_frames()
    data = {h: (s.X_train, s.y_train) for h, s in frames.items()}
    rows: list[Record] = []
    # FLamby's single-site baselines, on the public encoding
    local = hospital_models(data, FLAMBY_SCHEMA, epsilon=None, seed=seed, training=training)
    for i, h in enumerate(HOSPITALS):
        rows += _records(f"Local {i}", on_every_test(local[h], frames), epsilon=math.inf)
    rows += _records("Local (own hospital)", on_own_tests(local, frames), epsilon=math.inf)
    X_pool = pd.concat([s.X_train for s in frames.values()], ignore_index=True)
    y_pool = np.concatenate([s.y_train for s in frames.values()])
    t0 = time.perf_counter()
    pooled = logistic(
        FLAMBY_SCHEMA, epsilon=None, seed=seed, training=training, n_rows=len(y_pool)
    ).fit(X_pool, y_pool)
    secs = time.perf_counter() - t0
    rows += _records("Pooled", on_every_test(pooled, frames), epsilon=math.inf, seconds=secs)
    # the subscriber's own model, and CUSTOMIZE over the others' models
    stores = {h: CrossFitStore() for h in HOSPITALS}
    own = {}
    for h, (X, y) in data.items():
        own[h] = fit_own(X, y, FLAMBY_SCHEMA, seed=seed, kind=training.own_kind, store=stores[h])
    rows += _records("Own", on_own_tests(own, frames), epsilon=math.inf)
    published = hospital_models(data, FLAMBY_SCHEMA, epsilon=EPSILON, seed=seed, training=training)
    for label, models in (("PubSub-ML", published), ("PubSub-ML*", local)):
        eps = max(float(getattr(m.estimator, "epsilon_", math.inf)) for m in models.values())
        subscribed, fallbacks = {}, {}
        for h, (X, y) in data.items():
            others = [models[o] for o in HOSPITALS if o != h]
            subscribed[h], fallbacks[h] = customize(
                others, X, y, FLAMBY_SCHEMA, seed=seed, store=stores[h], kind=training.own_kind
            )
        results = on_own_tests(subscribed, frames)
        for test, values in results.items():
            # the share of hospitals whose CUSTOMIZE kept the own model alone (0 or 1 for one)
            fb = float(np.mean([fallbacks[h] for h in HOSPITALS if test in (h, POOLED)]))
            rows.append({"method": label, "test": test, **values, "epsilon": eps, "fallback": fb})
    # federated, through our loop
    clients = list(data.values())
    for name in FL_NAMES:
        for target in (None, EPSILON):
            t0 = time.perf_counter()
            fl = fit_federated(
                name, clients, FLAMBY_SCHEMA, epsilon=target, seed=seed, training=training
            )
            secs = time.perf_counter() - t0
            if target is None:
                rows += _records(name, on_every_test(fl, frames), epsilon=math.inf, seconds=secs)
                continue
            eps = float(fl.epsilon_)
            rows += _records(f"DP-{name} (V)", on_every_test(fl, frames), epsilon=eps, seconds=secs)
            tuned = {h: _fine_tune(fl, X, y, training, seed) for h, (X, y) in data.items()}
            rows += _records(f"DP-{name} (F)", on_own_tests(tuned, frames), epsilon=eps)
    rows += replication(seed, smoke=smoke)
    return rows


def _fine_tune(model: _Model, X: pd.DataFrame, y: np.ndarray, training: Training, seed: int) -> Any:
    """The (F) variant: a hospital fine-tunes the global model on its rows without DP (§7.3)."""
    from pubsubml.methods.federated import fine_tune

    return fine_tune(model, X, y, epochs=training.fine_tune_epochs, random_state=seed)


# ---- FLamby's own training, replicated without DP ---------------------------------------------
def _flamby_logistic(X: np.ndarray, y: np.ndarray, *, seed: int, epochs: int) -> torch.nn.Module:
    """FLamby's baseline training: Linear(13, 1), BCE on the sigmoid, Adam 1e-3, batches of 4."""
    generator = torch.Generator().manual_seed(seed)
    model = init_mlp((X.shape[1], 1), "tanh", generator)
    lr = float(FLAMBY_HYPERPARAMETERS["learning_rate"])
    batch = int(FLAMBY_HYPERPARAMETERS["batch_size"])
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    loss = torch.nn.BCEWithLogitsLoss()
    Xt = torch.as_tensor(X, dtype=torch.float32)
    yt = torch.as_tensor(y, dtype=torch.float32)
    for _ in range(epochs):
        for idx in torch.randperm(len(yt), generator=generator).split(batch):
            optimizer.zero_grad()
            loss(model(Xt[idx]).squeeze(1), yt[idx]).backward()
            optimizer.step()
    return model


def _pooled_split(splits: Mapping[str, FlambySplit]) -> FlambySplit:
    parts = list(splits.values())
    return FlambySplit(
        X_train=np.concatenate([s.X_train for s in parts]),
        y_train=np.concatenate([s.y_train for s in parts]),
        X_test=np.concatenate([s.X_test for s in parts]),
        y_test=np.concatenate([s.y_test for s in parts]),
        columns=parts[0].columns,
    )


def replication(seed: int, *, smoke: bool = False) -> list[Record]:
    """Local 0–3 and Pooled trained as FLamby trains them, on FLamby's normalisation.

    Each hospital's train and test sets are standardised with the mean and standard deviation of
    its own training set (:func:`~pubsubml.data.heart_disease.flamby_normalize`); the pooled
    model and the pooled test set with those of the four training sets together.  Training: 50
    epochs (1 with ``smoke``) of Adam at 1e-3 on batches of 4, binary cross-entropy (FLamby's
    ``common.py``).  Non-private, and data-dependent scaling: a replication row only.
    """
    epochs = 1 if smoke else int(FLAMBY_HYPERPARAMETERS["num_epochs_pooled"])
    raw = flamby_split()
    local = {h: flamby_normalize(s) for h, s in raw.items()}
    pooled = flamby_normalize(_pooled_split(raw))

    def evaluate(model: torch.nn.Module) -> dict[str, dict[str, float]]:
        with torch.no_grad():
            parts = {
                h: torch.sigmoid(model(torch.as_tensor(s.X_test, dtype=torch.float32)))
                .squeeze(1)
                .numpy()
                .astype(float)
                for h, s in local.items()
            }
            pool = torch.sigmoid(model(torch.as_tensor(pooled.X_test, dtype=torch.float32)))
        out = {
            h: scores(_Fixed(p), pd.DataFrame(index=range(len(p))), local[h].y_test)
            for h, p in parts.items()
        }
        out[POOLED] = _pooled([(pool.squeeze(1).numpy().astype(float), pooled.y_test)])
        return out

    rows: list[Record] = []
    for i, s in enumerate(local.values()):
        model = _flamby_logistic(s.X_train, s.y_train, seed=seed * 31 + i, epochs=epochs)
        rows += _records(f"Local {i}, FLamby's normalisation", evaluate(model), epsilon=math.inf)
    model = _flamby_logistic(pooled.X_train, pooled.y_train, seed=seed * 31 + 4, epochs=epochs)
    rows += _records("Pooled, FLamby's normalisation", evaluate(model), epsilon=math.inf)
    return rows


# ---- Flower -----------------------------------------------------------------------------------
def flower_task(seed: int, name: str, *, dp: bool, training: Training = TRAINING) -> list[Record]:
    """One Flower run of strategy ``name`` over the four hospitals (local Ray), scored.

    The sites are :func:`~pubsubml.methods.flower.dp_client_app` clients on FLamby's training
    sets, encoded by :data:`~pubsubml.experiments.heart_disease.splits.FLAMBY_SCHEMA`; the model,
    rounds, local steps and learning rate are those of our loop
    (:func:`~pubsubml.experiments.heart_disease.methods.fit_federated`).  With ``dp`` every site
    runs DP-SGD calibrated to spend ε = 1 over the planned rounds (δ = 1e-5, seeded noise: a
    simulation).

    Returns
    -------
    list of dict
        As :func:`flamby_task`'s, with ``seconds`` the run's wall time (Ray start included) and
        ``round_seconds`` the mean time of a round.
    """
    from pubsubml.methods.flower import (
        DPClientConfig,
        dp_client_app,
        dp_server_app,
        run_local_simulation,
    )

    frames = flamby_frames()
    data = [(s.X_train, s.y_train) for s in frames.values()]
    config = DPClientConfig(
        schema=FLAMBY_SCHEMA,
        classes=list(CLASSES),
        hidden_layer_sizes=(),
        local_epochs=training.local_epochs,
        batch_size=FULL_BATCH,
        lr=training.learning_rate(FLAMBY_SCHEMA, min(len(y) for _, y in data)),
        dp=dp,
        epsilon_budget=EPSILON,
        delta=DELTA,
        planned_rounds=training.rounds,
        noise_seed=seed,
    )

    def load(context: Any) -> tuple[pd.DataFrame, np.ndarray]:
        return data[int(context.node_config["partition-id"])]

    t0 = time.perf_counter()
    server, run = dp_server_app(
        config,
        n_clients=len(data),
        rounds=training.rounds,
        strategy=FLOWER_STRATEGIES[name],  # type: ignore[arg-type]
        proximal_mu=0.01,
        server_lr=0.01,
        seed=seed,
    )
    run_local_simulation(server, dp_client_app(config, load), len(data))
    seconds = time.perf_counter() - t0
    if run.model is None:
        raise RuntimeError(f"the Flower run of {name} ended without a global model")
    eps = max(run.epsilons.values()) if dp else math.inf
    method = f"DP-{name} (V), Flower" if dp else f"{name}, Flower"
    rounds = float(np.mean(run.round_seconds)) if run.round_seconds else math.nan
    return _records(
        method,
        on_every_test(run.model, frames),
        epsilon=eps,
        seconds=seconds,
        round_seconds=rounds,
    )
