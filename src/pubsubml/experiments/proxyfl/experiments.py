"""Data, models and runs of the ProxyFL experiments (proxyfl.txt §4.1–4.2) on offline data.

Data sets (nothing is downloaded):

* **mnist1d** — generated in memory by the ``mnist1d`` package (``make_dataset``, 40-sample 1-D
  signals, 10 classes, MNIST-like); 12,000 training and 2,000 test rows by default.
* **digits** — scikit-learn's bundled 8×8 digits (1,797 rows, 10 classes), pixel values scaled by
  their public maximum 16.  A stratified 30 % is the test set; the 1,257 training rows cannot give
  8 clients 1,000 *distinct* records each, so each client gets 120 (sampling with replacement would
  put one individual into several records and break the per-record DP accounting).

Non-IID split as in §4.1: each client gets a randomly chosen majority class (distinct classes while
clients ≤ classes, so that no class runs out) and a fraction ``p_major`` of its rows from it; the
rest are drawn IID from all other classes.  Rows are disjoint across clients.  Evaluation uses the
global IID test set (as the paper) and a per-client test set drawn from the test rows with the
client's own skew.

References
----------
proxyfl.txt §4.1 (data, baselines, settings) and §4.2 (ablations: p_major, heterogeneous private
models, DP versus non-DP).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, Protocol

import numpy as np
import torch
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from torch import nn

from pubsubml.data.synthetic import make_mnist1d
from pubsubml.errors import DataValidationError, PaperAccountingWarning
from pubsubml.methods.proxyfl.architectures import private_factory
from pubsubml.methods.proxyfl.baselines import create_method
from pubsubml.methods.proxyfl.local import client_seed
from pubsubml.methods.proxyfl.protocol import ClientCohort, DMLConfig, WeakPrivacyWarning
from pubsubml.privacy.accountants import create_accountant
from pubsubml.privacy.dpsgd import train_dp

__all__ = [
    "FederatedSplit",
    "MethodRun",
    "evaluate_split",
    "load_digits_split",
    "make_federated",
    "partition_majority",
    "run_method",
    "run_regular_models",
]

Array = np.ndarray


def load_digits_split(seed: int = 0, test_size: float = 0.3) -> tuple[Array, ...]:
    """scikit-learn digits scaled by the public pixel maximum 16, stratified train/test split."""
    digits = load_digits()
    X = (digits.data / 16.0).astype(np.float32)
    y = digits.target.astype(np.int64)
    X_tr, X_te, y_tr, y_te = train_test_split(
        X, y, test_size=test_size, stratify=y, random_state=seed
    )
    return X_tr, y_tr, X_te, y_te


def partition_majority(
    y: Array,
    *,
    n_clients: int,
    n_per_client: int,
    p_major: float,
    n_classes: int,
    rng: np.random.Generator,
) -> tuple[list[Array], list[int]]:
    """Disjoint non-IID client index sets: ``round(p_major·n)`` rows of a majority class each.

    Majority rows are allocated for every client first, then the others are drawn IID from the rows
    of all other classes that are left.

    Returns
    -------
    indices : list of ndarray of int
        Row positions of each client (shuffled).
    majority : list of int
        Each client's majority class.

    Raises
    ------
    DataValidationError
        When there are not enough distinct rows; no row is ever reused.
    """
    if not 0.0 <= p_major <= 1.0:
        raise DataValidationError(f"p_major must be in [0, 1], got {p_major}")
    order = rng.permutation(n_classes)
    majority = [int(order[k % n_classes]) for k in range(n_clients)]
    n_major = round(p_major * n_per_client)
    free = np.ones(len(y), dtype=bool)
    chosen: list[list[int]] = []
    for c in majority:
        pool = np.flatnonzero(free & (y == c))
        if len(pool) < n_major:
            raise DataValidationError(f"class {c} has {len(pool)} rows left, {n_major} needed")
        take = rng.choice(pool, n_major, replace=False)
        free[take] = False
        chosen.append(list(take))
    for k, c in enumerate(majority):
        pool = np.flatnonzero(free & (y != c))
        need = n_per_client - n_major
        if len(pool) < need:
            raise DataValidationError(f"only {len(pool)} rows left for client {k}, {need} needed")
        take = rng.choice(pool, need, replace=False)
        free[take] = False
        chosen[k].extend(take.tolist())
    return [rng.permutation(np.asarray(idx)) for idx in chosen], majority


@dataclass(frozen=True)
class FederatedSplit:
    """Client training sets, per-client test sets and the global IID test set."""

    name: str
    clients: list[tuple[Array, Array]]
    client_tests: list[tuple[Array, Array]]
    test: tuple[Array, Array]
    majority: list[int]
    n_classes: int
    input_shape: tuple[int, ...]


def make_federated(
    dataset: Literal["mnist1d", "digits"] = "mnist1d",
    *,
    n_clients: int = 8,
    n_per_client: int | None = None,
    p_major: float = 0.8,
    n_test_per_client: int | None = None,
    seed: int = 0,
    mnist1d_rows: tuple[int, int] = (12_000, 2_000),
) -> FederatedSplit:
    """The §4.1 setting on an offline data set (defaults: 1,000 rows per client for mnist1d, 120
    for digits; per-client test sets of 200 (mnist1d) or 40 (digits) rows).

    Raises
    ------
    DataValidationError
        Unknown data set or not enough rows.
    """
    shape: tuple[int, ...]
    if dataset == "mnist1d":
        X_tr, y_tr, X_te, y_te = make_mnist1d(*mnist1d_rows)
        shape, n_default, t_default = (1, 40), 1000, 200
    elif dataset == "digits":
        X_tr, y_tr, X_te, y_te = load_digits_split(seed)
        shape, n_default, t_default = (1, 8, 8), 120, 40
    else:
        raise DataValidationError(f"unknown data set {dataset!r}; use 'mnist1d' or 'digits'")
    rng = np.random.default_rng(seed)
    n = n_per_client or n_default
    idx, majority = partition_majority(
        y_tr, n_clients=n_clients, n_per_client=n, p_major=p_major, n_classes=10, rng=rng
    )
    n_t = n_test_per_client or t_default
    tests = []
    for c in majority:  # test rows may serve several clients: they are never trained on
        major = rng.choice(np.flatnonzero(y_te == c), round(p_major * n_t), replace=False)
        minor = rng.choice(np.flatnonzero(y_te != c), n_t - len(major), replace=False)
        rows = np.concatenate([major, minor])
        tests.append((X_te[rows], y_te[rows]))
    return FederatedSplit(
        name=dataset,
        clients=[(X_tr[i], y_tr[i]) for i in idx],
        client_tests=tests,
        test=(X_te, y_te),
        majority=majority,
        n_classes=10,
        input_shape=shape,
    )


# ---- evaluation and runs ---------------------------------------------------------------------------
def _scores(y_true: Array, y_pred: Array, n_classes: int) -> tuple[float, float]:
    acc = float((y_true == y_pred).mean())
    recalls = [
        float((y_pred[y_true == c] == c).mean()) for c in range(n_classes) if (y_true == c).any()
    ]
    return acc, float(np.mean(recalls))


class _Predictor(Protocol):
    def predict_proba(
        self, s: int, X: torch.Tensor, model: Literal["private", "proxy"]
    ) -> torch.Tensor: ...


def evaluate_split(
    cohort: _Predictor,
    split: FederatedSplit,
    model: Literal["private", "proxy"],
    joint: bool = False,
) -> list[dict[str, Any]]:
    """Accuracy and macro-accuracy of every client's model on the global and its own test set."""
    rows = []
    X_g, y_g = torch.as_tensor(split.test[0]), split.test[1]
    for k in range(len(split.clients)):
        s = 0 if joint else k
        for test, (X, y) in (("global", (X_g, y_g)), ("local", split.client_tests[k])):
            pred = cohort.predict_proba(s, torch.as_tensor(X), model).argmax(1).numpy()
            acc, macro = _scores(y, pred, split.n_classes)
            rows.append({"client": k, "test": test, "accuracy": acc, "macro_accuracy": macro})
    return rows


@dataclass(frozen=True)
class MethodRun:
    """One method's run: the metric rows (per round, client, model, test set), final ε, and what
    that ε covers (``"dp"``, ``"paper accounting"`` or ``"none"``, see
    :attr:`~pubsubml.methods.proxyfl.local.ClientCohort.privacy_guarantee`)."""

    rows: list[dict[str, Any]]
    epsilons: list[float]
    seconds: float
    guarantee: str = "dp"


def run_method(
    name: str,
    split: FederatedSplit,
    *,
    rounds: int,
    config: DMLConfig,
    seed: int = 0,
    private: str | Sequence[str] = "mlp",
    eval_every: int = 1,
    tags: dict[str, Any] | None = None,
) -> MethodRun:
    """Run a method of :data:`~pubsubml.methods.proxyfl.baselines.METHODS` on ``split``.

    Private models (ProxyFL, FML) come from :data:`ARCHITECTURES` (one name, or one per client);
    ProxyFL and FML are evaluated with both their private models and their proxies.
    """
    import time

    archs = [private] * len(split.clients) if isinstance(private, str) else list(private)
    factories = [private_factory(a, split.input_shape) for a in archs]
    method = create_method(
        name,
        n_classes=split.n_classes,
        rounds=rounds,
        config=config,
        seed=seed,
        private_model=factories,
    )
    models: list[Literal["private", "proxy"]] = (
        ["private", "proxy"] if method.uses_private else ["proxy"]
    )
    rows: list[dict[str, Any]] = []
    base = {"method": name, "dataset": split.name, **(tags or {})}

    def callback(t: int, cohort: ClientCohort) -> None:
        if (t + 1) % eval_every and t + 1 != rounds:
            return
        for model in models:
            for row in evaluate_split(cohort, split, model, joint=name == "Joint"):
                arch = archs[row["client"]] if model == "private" else "mlp"
                rows.append({**base, "round": t + 1, "model": model, "arch": arch, **row})

    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", WeakPrivacyWarning)  # ε is reported in the ε table
        warnings.simplefilter("ignore", PaperAccountingWarning)  # ... with what it covers
        method.fit(split.clients, callback=callback)
    seconds = time.perf_counter() - start
    return MethodRun(rows, list(method.epsilons_), seconds, method.privacy_guarantee_)


def with_dp(config: DMLConfig, dp: bool) -> DMLConfig:
    """``config`` with DP-SGD switched on or off (the §4.2 ablation)."""
    return replace(config, dp=dp)


class _Modules:
    """Independent per-client modules, with the cohort's ``predict_proba`` signature."""

    def __init__(self, modules: list[nn.Module]) -> None:
        self.modules = modules

    def predict_proba(
        self, s: int, X: torch.Tensor, model: Literal["private", "proxy"] = "proxy"
    ) -> torch.Tensor:
        module = self.modules[s]
        module.eval()
        with torch.no_grad():
            out = torch.softmax(module(X), -1)
        module.train()
        return out


def run_regular_models(
    split: FederatedSplit,
    archs: Sequence[str],
    *,
    rounds: int,
    config: DMLConfig,
    seed: int = 0,
    tags: dict[str, Any] | None = None,
) -> MethodRun:
    """Regular training of any architecture with DP-SGD (the engine's generic torch.func path).

    Client ``k`` trains ``archs[k]`` alone, one epoch per round with a persistent Adam (weight
    decay as in §4.1), as the Regular baseline of the heterogeneous-architecture ablation (§4.2).
    """
    import time

    start = time.perf_counter()
    modules, optims, gens, accountants = [], [], [], []
    for k, arch in enumerate(archs):
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(client_seed(seed, k) ^ 0x5EED)
            module = private_factory(arch, split.input_shape)(0, split.n_classes)
        modules.append(module)
        optims.append(
            torch.optim.Adam(module.parameters(), lr=config.lr, weight_decay=config.weight_decay)
        )
        gens.append(torch.Generator().manual_seed(client_seed(seed, k)))
        accountants.append(create_accountant("pld"))
    predictor, rows = _Modules(modules), []
    base = {"method": "Regular", "dataset": split.name, **(tags or {})}
    for t in range(rounds):
        for k, (X, y) in enumerate(split.clients):
            result = train_dp(
                modules[k],
                torch.as_tensor(X),
                torch.as_tensor(y),
                config=config.dpsgd(),
                generator=gens[k],
                optimizer=optims[k],
            )
            for event in result.events:
                accountants[k].record(event)
        for row in evaluate_split(predictor, split, "proxy"):
            rows.append(
                {**base, "round": t + 1, "model": "proxy", "arch": archs[row["client"]], **row}
            )
    eps = [acc.get_epsilon(config.delta) for acc in accountants]
    return MethodRun(rows, eps, time.perf_counter() - start, "dp" if config.dp else "none")
