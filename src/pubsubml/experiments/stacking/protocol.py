"""The evaluation protocol of personalization by stacking (pfl-stacking.txt §4).

Every client trains its public model on *all* its data and publishes it with a set of default
feature values.  Each client then splits its data into ``Train`` / ``Meta Train`` / ``Test``
(0.6 / 0.2 / 0.2, stratified by label) and, once per repeat:

* trains its private model on ``Train`` and stacks it with the *other* clients' public models under
  a meta-model trained on ``Meta Train`` ("held-out");
* trains its private model on ``Train ∪ Meta Train`` and the meta-model on the same rows
  ("pooled", BaggingWrapper);
* scores both personalized models and the private-only baseline on the same ``Test`` rows.

As in the paper's source code, the private-only baseline is the private model trained on
``Train ∪ Meta Train``, and a client stacks its private model in place of its own public model
(which was trained on all its rows, ``Test`` included), so nothing a client fits ever saw its
``Test`` rows.  Scores are balanced accuracy and ROC AUC from predicted probabilities (the
paper's code computed the AUC from hard labels).  Contribution scores are the normalized mean
decrease in impurity of the meta-model per stacked model; the private model's share is the
client's self-importance, and the scores it gives the others form the contribution graph.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from sklearn.ensemble import RandomForestClassifier
from sklearn.model_selection import train_test_split

from pubsubml.experiments.metrics import score
from pubsubml.experiments.runner import Record
from pubsubml.experiments.stacking.client_models import (
    PUBLIC_KINDS,
    ClientData,
    Factory,
    PublicKind,
    PublicModel,
    forest,
    train_public_models,
)
from pubsubml.methods.pubsub.contributions import contribution_graph, contribution_scores
from pubsubml.methods.pubsub.own import OwnModel
from pubsubml.methods.stacking.personalizer import StackingPersonalizer

__all__ = [
    "PRIVATE_ID",
    "VARIANTS",
    "ClientSplit",
    "client_seed",
    "evaluate_federation",
    "normalized_graph",
    "score_predictions",
    "split_client",
]

PRIVATE_ID = "private"
VARIANTS = ("held_out", "pooled")


@dataclass(frozen=True)
class ClientSplit:
    """Row positions of ``Train``, ``Meta Train`` and ``Test`` (pfl-stacking.txt §4)."""

    train: np.ndarray
    meta: np.ndarray
    test: np.ndarray

    @property
    def pooled(self) -> np.ndarray:
        """``Train ∪ Meta Train``, sorted."""
        return np.sort(np.concatenate([self.train, self.meta]))


def split_client(
    y: np.ndarray, seed: int, *, meta_size: float = 0.2, test_size: float = 0.2
) -> ClientSplit:
    """Stratified ``Train`` / ``Meta Train`` / ``Test`` split (0.6 / 0.2 / 0.2 by default).

    Falls back to an unstratified split when a class is too rare to stratify.

    Examples
    --------
    >>> s = split_client(np.array([0, 1] * 50), seed=0)
    >>> len(s.train), len(s.meta), len(s.test)
    (60, 20, 20)
    """
    index = np.arange(len(y))

    def cut(rows: np.ndarray, size: float) -> tuple[np.ndarray, np.ndarray]:
        try:
            a, b = train_test_split(rows, test_size=size, stratify=y[rows], random_state=seed)
        except ValueError:
            a, b = train_test_split(rows, test_size=size, random_state=seed)
        return np.sort(a), np.sort(b)

    rest, test = cut(index, test_size)
    train, meta = cut(rest, meta_size / (1.0 - test_size))
    return ClientSplit(train=train, meta=meta, test=test)


def _meta_forest(n_estimators: int, seed: int) -> RandomForestClassifier:
    return RandomForestClassifier(n_estimators=n_estimators, random_state=seed, n_jobs=1)


class _CachedRunner:
    """Runner of the public models on one client's rows, each computed once for all its rows."""

    def __init__(self, X: pd.DataFrame) -> None:
        self.X = X
        self.cache: dict[int, np.ndarray] = {}

    def __call__(self, models: Sequence[Any], frame: pd.DataFrame, method: str) -> list[np.ndarray]:
        rows = frame.index.to_numpy()
        out = []
        for m in models:
            if id(m) not in self.cache:
                self.cache[id(m)] = np.asarray(getattr(m, method)(self.X))
            out.append(self.cache[id(m)][rows])
        return out


def normalized_graph(reports: dict[str, dict[str, float]]) -> Any:
    """Contribution graph whose out-weights per subscriber sum to 1 (0 if it gave no weight).

    Each report is a subscriber's normalized scores of the *other* clients' models; they are
    renormalized without the private model's share (the self-importance), then aggregated with
    :func:`~pubsubml.methods.pubsub.contributions.contribution_graph`.

    Examples
    --------
    >>> g = normalized_graph({"a": {"b": 0.2, "c": 0.2}, "b": {"a": 0.5, "c": 0.0}})
    >>> sorted(g.edges(data="weight"))
    [('a', 'b', 0.5), ('a', 'c', 0.5), ('b', 'a', 1.0), ('b', 'c', 0.0)]
    """
    normalized = {}
    for sub, scores in reports.items():
        total = sum(scores.values())
        normalized[sub] = {k: (v / total if total > 0 else 0.0) for k, v in scores.items()}
    return contribution_graph(normalized, lambda model_id: model_id)


def client_seed(seed: int, repeat: int, index: int) -> int:
    """Seed of the split (and private and meta-models) of client ``index`` in one repeat.

    Examples
    --------
    >>> client_seed(0, 1, 2) == client_seed(0, 1, 2) != client_seed(0, 2, 2)
    True
    """
    return int(np.random.SeedSequence([seed, repeat, index]).generate_state(1)[0] % (2**31))


def score_predictions(
    y: np.ndarray, proba: np.ndarray, classes: Sequence[Any]
) -> tuple[float, float]:
    """Balanced accuracy of the most probable class and ROC AUC of the probabilities.

    The AUC is NaN when ``y`` holds a single class.

    Examples
    --------
    >>> y = np.array([0, 0, 1, 1])
    >>> proba = np.array([[0.9, 0.1], [0.4, 0.6], [0.6, 0.4], [0.2, 0.8]])
    >>> score_predictions(y, proba, [0, 1])
    (0.5, 0.75)
    """
    pred = np.asarray(classes)[np.argmax(proba, axis=1)]
    with warnings.catch_warnings():  # a label-skewed client's Test rows may hold one class
        warnings.simplefilter("ignore", UserWarning)
        bacc = score("balanced_accuracy", y, pred)
    auc = score("roc_auc", y, proba=proba, classes=classes) if len(np.unique(y)) > 1 else math.nan
    return bacc, auc


def evaluate_federation(
    clients: Sequence[ClientData],
    classes: Sequence[Any],
    *,
    seed: int,
    repeat: int,
    kinds: Sequence[PublicKind] = (PUBLIC_KINDS["rf"],),
    private_model: Factory | None = None,
    meta_trees: int = 100,
    meta_model: Callable[[int], Any] | None = None,
    publics: Mapping[str, Sequence[PublicModel]] | None = None,
) -> list[Record]:
    """One repeat of the §4 protocol for every client and kind of public model.

    Parameters
    ----------
    clients : sequence of ClientData
    classes : sequence
        The public label set.
    seed, repeat : int
        Public models depend on ``seed`` only; the splits on ``(seed, repeat, client)``.
    kinds : sequence of PublicKind
        The public models to evaluate (each one a full federation); the private models and
        splits are shared between kinds.
    private_model : factory, optional
        ``f(schema, classes, seed)``; default a random forest (:func:`forest`).
    meta_trees : int, default=100
        Trees of the default random-forest meta-model.
    meta_model : callable, optional
        ``f(seed)`` → unfitted meta-model with ``feature_importances_`` (overrides ``meta_trees``).
    publics : mapping of kind name to public models, optional
        Already trained public models (:func:`train_public_models` with this ``seed``), e.g. shared
        between the repeats of one seed; missing kinds are trained here.

    Returns
    -------
    list of Record
        ``record="client"`` rows (one per client, kind and variant): ``bacc``, ``auc``, the
        baseline's ``private_bacc``/``private_auc``, ``gain``/``gain_auc`` (personalized − private
        on ``Train ∪ Meta Train``), ``self_importance``, ``importance`` (the client's normalized
        in-strength in the contribution graph), ``epsilon`` (largest ε of the stacked public
        models, from their accountants); and ``record="edge"`` rows: the normalized score
        ``weight`` that ``client`` gave ``publisher``.

    References
    ----------
    pfl-stacking.txt §4 (protocol, metric, MDI contribution scores, importance).
    """
    private_model = private_model or forest()
    make_meta = meta_model or (lambda s: _meta_forest(meta_trees, s))
    published = _published(clients, kinds, classes, seed, publics or {})
    total = sum(len(c.y) for c in clients)
    records: list[Record] = []
    reports: dict[tuple[str, str], dict[str, dict[str, float]]] = {}
    for i, client in enumerate(clients):
        s = client_seed(seed, repeat, i)
        split = split_client(client.y, s)
        fitted = _private_models(client, split, private_model, classes, s)
        X_test, y_test = client.X.iloc[split.test], client.y[split.test]
        base = score_predictions(y_test, fitted["pooled"].predict_proba(X_test), classes)
        info = _client_info(client, classes, total)
        for kind in kinds:
            others = [m for j, m in enumerate(published[kind.name]) if j != i]
            runner = _CachedRunner(client.X)
            for variant, rows in (("held_out", split.meta), ("pooled", split.pooled)):
                models = [fitted[variant], *others]
                pers = _personalizer(variant, models, make_meta(s), runner, classes=classes, seed=s)
                pers.fit(client.X.iloc[rows], client.y[rows])
                scores = score_predictions(y_test, pers.predict_proba(X_test), classes)
                contrib = contribution_scores(pers, method="impurity")
                given = {k: v for k, v in contrib.items() if k != PRIVATE_ID}
                reports.setdefault((kind.name, variant), {})[client.name] = given
                where = {"public": kind.name, "variant": variant}
                epsilon = max((m.epsilon for m in others), default=math.inf)
                records.append(
                    _client_record(info | where, epsilon, scores, base, contrib[PRIVATE_ID])
                )
                records.extend(_edge_records(client.name, where, given))
    _set_importance(records, reports)
    return records


def _personalizer(
    variant: str,
    models: Sequence[Any],
    meta: Any,
    runner: _CachedRunner,
    *,
    classes: Sequence[Any],
    seed: int,
) -> StackingPersonalizer:
    """The client's private model (``models[0]``) stacked with the others' public models
    (``models[1:]``) under the meta-model ``meta``, unfitted."""
    return StackingPersonalizer(
        stacking=variant,  # type: ignore[arg-type]
        models=list(models),
        model_ids=[PRIVATE_ID, *(m.model_id for m in models[1:])],
        own_model=None,
        fusion_model=meta,
        classes=list(classes),
        runner=runner,
        random_state=seed,
    )


def _published(
    clients: Sequence[ClientData],
    kinds: Sequence[PublicKind],
    classes: Sequence[Any],
    seed: int,
    trained: Mapping[str, Sequence[PublicModel]],
) -> dict[str, Sequence[PublicModel]]:
    """Every client's public model of each kind: the ``trained`` ones, the missing kinds trained."""
    return {
        k.name: trained[k.name]
        if k.name in trained
        else train_public_models(clients, k, classes, seed)
        for k in kinds
    }


def _private_models(
    client: ClientData,
    split: ClientSplit,
    private_model: Factory,
    classes: Sequence[Any],
    seed: int,
) -> dict[str, OwnModel]:
    """The client's private model per variant: on ``Train`` (held-out), on ``Train ∪ Meta Train``
    (pooled, also the private-only baseline)."""
    features = list(client.X.columns)
    fitted: dict[str, OwnModel] = {}
    for variant, rows in (("held_out", split.train), ("pooled", split.pooled)):
        est = private_model(client.schema, classes, seed).fit(client.X.iloc[rows], client.y[rows])
        fitted[variant] = OwnModel(est, features)
    return fitted


def _client_info(client: ClientData, classes: Sequence[Any], total: int) -> dict[str, Any]:
    """The columns describing a client in each of its records."""
    return {
        "client": client.name,
        "n": len(client.y),
        "share": len(client.y) / total,
        "balance": float(np.mean(client.y == classes[-1])),
        "n_features": len(client.X.columns),
    }


def _client_record(
    info: dict[str, Any],
    epsilon: float,
    scores: tuple[float, float],
    base: tuple[float, float],
    self_importance: float,
) -> Record:
    """A ``record="client"`` row: the personalized and the private-only scores and their gain."""
    (bacc, auc), (base_bacc, base_auc) = scores, base
    return {
        "record": "client",
        **info,
        "epsilon": epsilon,
        "bacc": bacc,
        "auc": auc,
        "private_bacc": base_bacc,
        "private_auc": base_auc,
        "gain": bacc - base_bacc,
        "gain_auc": auc - base_auc,
        "self_importance": self_importance,
    }


def _edge_records(client: str, where: dict[str, str], given: dict[str, float]) -> list[Record]:
    """The ``record="edge"`` rows: the normalized score ``client`` gave each publisher."""
    return [
        {"record": "edge", "client": client, "publisher": pub, **where, "weight": w}
        for pub, w in given.items()
    ]


def _set_importance(
    records: list[Record], reports: dict[tuple[str, str], dict[str, dict[str, float]]]
) -> None:
    """Add each client's ``importance`` (its normalized in-strength, §4) to its client rows."""
    importance = {key: _in_strength(rep) for key, rep in reports.items()}
    for r in records:
        if r["record"] == "client":
            r["importance"] = importance[(r["public"], r["variant"])].get(r["client"], 0.0)


def _in_strength(reports: dict[str, dict[str, float]]) -> dict[str, float]:
    """Sum of the (raw, normalized-with-self) scores others gave each client, normalized (§4)."""
    got: dict[str, float] = {}
    for scores in reports.values():
        for pub, v in scores.items():
            got[pub] = got.get(pub, 0.0) + v
    total = sum(got.values())
    return {k: (v / total if total > 0 else 0.0) for k, v in got.items()}
