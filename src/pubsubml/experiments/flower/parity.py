"""``pubsubml bench flower-parity``: our federated loop and Flower's, on the same federation.

For FedAvg, FedProx and FedAdam with record-level DP at ε = 1, each seed runs the same
federation twice: through our :class:`~pubsubml.methods.federated.rounds.FederatedMLP` loop
(:class:`~pubsubml.methods.federated.baselines.DPFedAvg` and its siblings) and through Flower
1.42's Simulation Engine with Flower's own strategy and our DP client
(:mod:`pubsubml.methods.flower`).  Same partitions, initial model (drawn from the seed), rounds,
local epochs, batch, learning rate, clip C and σ (both calibrate σ to ε = 1 over the rounds with
the same call), all clients in every round (Flower samples clients with Python's ``random``; with
every client taking part both schedules are the same).  What differs is the orchestration and
the server's arithmetic: Flower averages NumPy arrays, and its FedAdam uses v₀ = 0 with a
bias-corrected step where ours (Reddi et al., Algorithm 2) starts at v₀ = τ² without correction.

A fourth method, client-level DP by the server (Flower's
``DifferentialPrivacyServerSideFixedClipping`` with its RDP accountant; our
:class:`~pubsubml.methods.federated.dp.CentralDP`), compares the ε both accountants give for the
same releases: σ = 1, C = 1, all clients each round (no amplification), at δ = 1e-5.

Two federations: Hyperplane (10 sites of 200 rows, one river stream; 1,000 test rows of the same
concept) and Fed-Heart-Disease (FLamby's four hospitals and split, the rows encoded by the public
:data:`~pubsubml.data.heart_disease_schema.HEART_SCHEMA` on the 10 columns FLamby keeps; the test set is
the four test sets pooled, 254 rows).  Wall time per round: ours is the fit's time over its
rounds; Flower's is the time between its server's round ends (messages, Ray actors, training),
after its Ray instance has started (that start, about ten seconds, is reported apart).
"""

from __future__ import annotations

import functools
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pubsubml.data.heart_disease import flamby_split
from pubsubml.data.heart_disease_schema import HEART_SCHEMA
from pubsubml.data.partition import iid
from pubsubml.data.synthetic import hyperplane
from pubsubml.experiments.base import Experiment, Param, RunOptions
from pubsubml.experiments.heart_disease.splits import flamby_frame
from pubsubml.experiments.reports import markdown_table, mean_se, write_results
from pubsubml.experiments.runner import Record
from pubsubml.privacy.accountants import compute_epsilon
from pubsubml.schema import FeatureSchema

__all__ = [
    "EXPERIMENTS",
    "FEDERATIONS",
    "Federation",
    "check",
    "federation",
    "parity_fold",
    "parity_table",
    "report",
    "settings",
]

STRATEGIES = ("fedavg", "fedprox", "fedadam")
#: The shared training setup (both paths): a small MLP, Adam, ε = 1 per site, δ = 1e-5.
SETUP: dict[str, Any] = {
    "hidden_layer_sizes": (32,),
    "batch_size": 50,
    "lr": 0.01,
    "local_epochs": 1,
    "max_grad_norm": 1.0,
    "epsilon": 1.0,
    "delta": 1e-5,
    "proximal_mu": 0.01,  # both FedProx defaults (Li et al. suggest {0.001, 0.01, 0.1, 1})
    "server_lr": 0.01,  # FedAdam's η, ours and Flower's set alike
    "central_sigma": 1.0,
}
FLAMBY_COLUMNS = ("age", "sex", "cp", "trestbps", "chol", "fbs", "restecg", "thalach", "exang",
                  "oldpeak")  # fmt: skip


class Federation:
    """Sites' (frame, labels), a pooled test set and the public schema."""

    def __init__(
        self,
        name: str,
        sites: list[tuple[pd.DataFrame, np.ndarray]],
        test: tuple[pd.DataFrame, np.ndarray],
        schema: FeatureSchema,
    ) -> None:
        self.name, self.sites, self.test, self.schema = name, sites, test, schema


def federation(name: str) -> Federation:
    """``"hyperplane"`` or ``"heart"`` (see the module notes)."""
    if name == "hyperplane":
        data = hyperplane(3000, seed=0)
        parts = iid(2000, 10, seed=0)
        sites = [(data.X.iloc[p].reset_index(drop=True), data.y[p]) for p in parts]
        test = (data.X.iloc[2000:].reset_index(drop=True), data.y[2000:])
        return Federation(name, sites, test, data.schema)
    if name == "heart":
        splits = list(flamby_split().values())
        sites = [(flamby_frame(s.X_train, s.columns), s.y_train) for s in splits]
        X_test = pd.concat([flamby_frame(s.X_test, s.columns) for s in splits], ignore_index=True)
        y_test = np.concatenate([s.y_test for s in splits])
        return Federation(name, sites, (X_test, y_test), HEART_SCHEMA.subset(FLAMBY_COLUMNS))
    raise ValueError(f"unknown federation {name!r}; known: {', '.join(FEDERATIONS)}")


def _accuracy(model: Any, fed: Federation) -> float:
    X, y = fed.test
    return float(np.mean(model.predict(X) == y))


def _ours(
    fed: Federation, strategy: str, rounds: int, seed: int, *, flower_step: bool = False
) -> Record:
    from pubsubml.methods.federated import DPFedAdam, DPFedAvg, DPFedProx

    common: dict[str, Any] = {
        "schema": fed.schema,
        "classes": [0, 1],
        "hidden_layer_sizes": SETUP["hidden_layer_sizes"],
        "rounds": rounds,
        "local_epochs": SETUP["local_epochs"],
        "batch_size": SETUP["batch_size"],
        "client_fraction": 1.0,
        "lr": SETUP["lr"],
        "max_grad_norm": SETUP["max_grad_norm"],
        "target_delta": SETUP["delta"],
        "random_state": seed,
    }
    if strategy == "central":
        model: Any = DPFedAvg(
            **common, dp="central", noise_multiplier=SETUP["central_sigma"], accountant="rdp"
        )
    elif strategy == "fedprox":
        model = DPFedProx(**common, target_epsilon=SETUP["epsilon"], mu=SETUP["proximal_mu"])
    elif strategy == "fedadam":
        model = DPFedAdam(
            **common,
            target_epsilon=SETUP["epsilon"],
            server_lr=SETUP["server_lr"],
            bias_correction=flower_step,
        )
    else:
        model = DPFedAvg(**common, target_epsilon=SETUP["epsilon"])
    start = time.perf_counter()
    model.fit(fed.sites)
    seconds = time.perf_counter() - start
    pld = np.nan
    if strategy == "central":  # the same releases under the tight PLD accountant, for reference
        pld = compute_epsilon(model.client_events_[0], SETUP["delta"], backend="pld")
    return {
        "accuracy": _accuracy(model, fed),
        "epsilon_max": float(model.epsilon_),
        "epsilon_pld": pld,
        "epsilon_flower": np.nan,
        "round_seconds": seconds / rounds,
        "start_seconds": 0.0,
    }


def _flower(fed: Federation, strategy: str, rounds: int, seed: int) -> Record:
    from pubsubml.methods.flower import (
        CentralDPConfig,
        DPClientConfig,
        dp_client_app,
        dp_server_app,
        run_local_simulation,
    )

    central = strategy == "central"
    config = DPClientConfig(
        schema=fed.schema,
        classes=[0, 1],
        hidden_layer_sizes=SETUP["hidden_layer_sizes"],
        local_epochs=SETUP["local_epochs"],
        batch_size=SETUP["batch_size"],
        lr=SETUP["lr"],
        max_grad_norm=SETUP["max_grad_norm"],
        dp=not central,
        epsilon_budget=SETUP["epsilon"],
        delta=SETUP["delta"],
        planned_rounds=rounds,
        noise_seed=seed,
    )
    sites = fed.sites

    def load(context: Any) -> tuple[pd.DataFrame, np.ndarray]:
        return sites[int(context.node_config["partition-id"])]

    server, run = dp_server_app(
        config,
        n_clients=len(sites),
        rounds=rounds,
        strategy="fedavg" if central else strategy,  # type: ignore[arg-type]
        proximal_mu=SETUP["proximal_mu"],
        server_lr=SETUP["server_lr"],
        central_dp=CentralDPConfig(
            noise_multiplier=SETUP["central_sigma"],
            clipping_norm=SETUP["max_grad_norm"],
            delta=SETUP["delta"],
        )
        if central
        else None,
        seed=seed,
    )
    start = time.perf_counter()
    run_local_simulation(server, dp_client_app(config, load), len(sites))
    total = time.perf_counter() - start
    assert run.model is not None
    per_round = float(np.mean(run.round_seconds))
    return {
        "accuracy": _accuracy(run.model, fed),
        "epsilon_max": max(run.epsilons.values()) if not central else np.nan,
        "epsilon_pld": np.nan,
        "epsilon_flower": np.nan if run.flower_epsilon is None else run.flower_epsilon,
        "round_seconds": per_round,
        "start_seconds": total - per_round * rounds,
    }


def _floor(fed: Federation, rounds: int) -> Record:
    """Flower's round time with sites that train nothing (they send the weights back): the cost
    of the messages, the SuperLink and the Ray actors alone."""
    from flwr.app import Error, Message, MetricRecord, RecordDict
    from flwr.clientapp import ClientApp

    from pubsubml.methods.flower import DPClientConfig, dp_server_app, run_local_simulation

    app = ClientApp()

    @app.train()
    def train(msg: Message, context: Any) -> Message:
        metrics = MetricRecord({"num-examples": 1, "unit-weight": 1, "epsilon": 0.0, "rounds": 1})
        return Message(
            RecordDict({"arrays": msg.content["arrays"], "metrics": metrics}), reply_to=msg
        )

    @app.query("pubsubml_privacy")
    def privacy(msg: Message, context: Any) -> Message:  # nothing private ran: nothing to report
        return Message(Error(code=0, reason="no DP events: the site trains nothing"), reply_to=msg)

    config = DPClientConfig(
        schema=fed.schema, classes=[0, 1], hidden_layer_sizes=SETUP["hidden_layer_sizes"], dp=False
    )
    server, run = dp_server_app(config, n_clients=len(fed.sites), rounds=rounds)
    run_local_simulation(server, app, len(fed.sites))
    return {
        "accuracy": np.nan,
        "epsilon_max": np.nan,
        "epsilon_pld": np.nan,
        "epsilon_flower": np.nan,
        "round_seconds": float(np.mean(run.round_seconds)),
        "start_seconds": np.nan,
    }


def settings(options: RunOptions) -> list[dict[str, Any]]:
    """One setting per (federation, method): the experiment's grid."""
    p = options.params
    feds = ["hyperplane"] if options.smoke else list(p["federations"].split(","))
    methods = ["fedavg"] if options.smoke else [*STRATEGIES, "central"]
    rounds = 2 if options.smoke else int(p["rounds"])
    return [
        {"federation": f, "method": m, "rounds": rounds, "flower": bool(p["flower"])}
        for f in feds
        for m in methods
    ]


def parity_fold(
    seed: int, fold: int, *, federation: str, method: str, rounds: int, flower: bool
) -> list[Record]:
    """One seed of one setting on every path (ours; Flower's; for FedAdam, ours with Flower's
    server step)."""
    fed = _federation(federation)
    paths = ["ours", "flower"] if flower else ["ours"]
    extra = ["ours, Flower's step"] if method == "fedadam" else []
    rows: list[Record] = []
    for path in [*paths, *extra]:
        if path == "flower":
            record = _flower(fed, method, rounds, seed)
        else:
            record = _ours(fed, method, rounds, seed, flower_step=path != "ours")
        rows.append({"path": path, "sites": len(fed.sites), **record})
    return rows


def parity_table(options: RunOptions) -> pd.DataFrame:
    """Every (federation, method, path, seed) run: accuracy, ε, seconds per round, one run at a
    time (Flower's runs each start Ray), and Flower's no-op round time per federation."""
    rows = []
    floors: set[str] = set()
    for setting in settings(options):
        name = setting["federation"]
        if setting["flower"] and name not in floors:
            floors.add(name)
            fed = _federation(name)
            rows.append({"federation": name, "method": "no-op sites", "rounds": setting["rounds"],
                         "flower": True, "seed": 0, "fold": 0, "path": "flower",
                         "sites": len(fed.sites), **_floor(fed, setting["rounds"])})  # fmt: skip
        for seed in range(options.seeds):
            for record in parity_fold(seed, 0, **setting):
                rows.append({**setting, "seed": seed, "fold": 0, **record})
    return pd.DataFrame(rows)


_federation = functools.lru_cache(maxsize=4)(lambda name: federation(name))


def _mean_se(values: pd.Series) -> tuple[float, float]:
    mean, se, _ = mean_se(values)
    return mean, se


def _summary(table: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for (fed, method), sub in table.groupby(["federation", "method"], sort=False):
        stats = {
            str(path): _mean_se(group["accuracy"])
            for path, group in sub.groupby("path", sort=False)
        }
        secs = {str(k): float(v) for k, v in sub.groupby("path")["round_seconds"].mean().items()}
        eps = {str(k): float(v) for k, v in sub.groupby("path")["epsilon_max"].max().items()}
        flower_eps = float(sub.loc[sub["path"] == "flower", "epsilon_flower"].max())
        if method == "no-op sites":
            epsilon = ""
        elif method == "central":
            pld = float(sub["epsilon_pld"].max())
            epsilon = (
                f"ours RDP {eps.get('ours', np.nan):.6g} (PLD {pld:.4g}), Flower RDP "
                f"{flower_eps:.6g}"
            )
        else:
            epsilon = f"ours {eps.get('ours', np.nan):.6g}, Flower {eps.get('flower', np.nan):.6g}"
        for path in [p for p in stats if p != "flower"] or ["ours"]:
            ours, flower = stats.get(path), stats.get("flower")
            label = method if path == "ours" else f"{method} ({path})"
            gap = np.nan
            if ours is not None and flower is not None and np.hypot(ours[1], flower[1]) > 0:
                gap = round(abs(ours[0] - flower[0]) / float(np.hypot(ours[1], flower[1])), 2)
            rows.append(
                {
                    "federation": fed,
                    "method": label,
                    "accuracy (ours)": "" if ours is None else f"{ours[0]:.3f} ± {ours[1]:.3f}",
                    "accuracy (Flower)": ""
                    if flower is None or np.isnan(flower[0])
                    else f"{flower[0]:.3f} ± {flower[1]:.3f}",
                    "|Δ| / SE": gap,
                    "ε (largest site)": epsilon,
                    "s / round (ours)": round(secs.get(path, np.nan), 4),
                    "s / round (Flower)": round(secs.get("flower", np.nan), 3),
                    "ratio": round(secs.get("flower", np.nan) / secs.get(path, np.nan), 1),
                }
            )
    return pd.DataFrame(rows)


def report(table: pd.DataFrame, out_dir: Path, options: RunOptions) -> list[Path]:
    """``flower-parity.md`` / ``.csv``: accuracy per path, ε, wall time per round."""
    summary = _summary(table)
    start = table.loc[table.path == "flower", "start_seconds"]
    notes = NOTES.format(
        seeds=options.seeds,
        rounds=int(table["rounds"].iloc[0]),
        start=f"{start.mean():.1f}" if len(start) else "NA",
    )
    return write_results(
        "flower-parity",
        out_dir,
        table=table,
        notes=markdown_table(summary, None) + "\n\n" + notes,
        title="Our federated loop and Flower's, on the same federations",
    )


NOTES = """\
{seeds} seeds, {rounds} rounds, every site in every round; record-level DP-SGD at ε = 1 per site
(δ = 1e-5, σ calibrated by the PLD accountant to the rounds, Poisson sampling, C = 1) for fedavg,
fedprox and fedadam; client-level DP by the server (σ = 1, C = 1, no amplification) for central.
Network: one hidden layer of 32 tanh units, Adam at 0.01, batch 50, one local epoch per round.
Accuracy on the federation's test set, mean ± SE over the seeds; |Δ| / SE is the gap between the
paths over the SE of the difference (parity: below 2).  "fedadam (ours, Flower's step)" is our
FedAdam with Flower's bias-corrected server step and v₀ = 0 (``bias_correction=True``), scored
against the same Flower runs.  ε: the largest site's composed ε on each
path (ours: its accountant over every round's events; Flower path: our client's accountant kept
in ``context.state``); for central, ours with the RDP accountant and Flower's ``RdpAccountant``
(and, for reference, our PLD accountant on the same releases, which is tighter).
Seconds per round: our loop trains the sites together on the stacked engine in this process;
Flower passes messages through its in-memory SuperLink to Ray actors, one per CPU.  Flower's Ray
start (mean {start} s a run) is not counted in its rounds.  "no-op sites" is one Flower run whose
sites send the weights back without training: the round time of Flower's messaging alone.
"""


FEDERATIONS = ("hyperplane", "heart")


def check(options: RunOptions) -> None:
    """Refuse an unknown federation before anything runs."""
    names = str(options.params["federations"]).split(",")
    unknown = [n for n in names if n not in FEDERATIONS]
    if unknown or not names:
        raise ValueError(f"--federations takes {', '.join(FEDERATIONS)}; got {unknown}")


EXPERIMENTS = (
    Experiment(
        "flower-parity",
        "Our DP FedAvg/FedProx/FedAdam loop against Flower 1.42's strategies with our DP client.",
        grid=settings,
        run_fold=parity_fold,
        report=report,
        seeds=10,
        smoke_seeds=1,
        folds=1,
        min_folds=1,
        max_folds=1,
        folds_help="one run per seed",
        params=(
            Param("rounds", 10, "Federated rounds per run.", minimum=1),
            Param(
                "federations",
                "hyperplane,heart",
                "Comma-separated: hyperplane, heart (Fed-Heart-Disease).",
            ),
            Param("flower", True, "Run the Flower path too (starts Ray once per run)."),
        ),
        check=check,
        run_table=parity_table,
    ),
)
