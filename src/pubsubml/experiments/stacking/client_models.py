"""Clients and their models in the stacking evaluation (pfl-stacking.txt §4).

A :class:`ClientData` is one client's private table and the public schema it publishes (bounds and
the default values others use for the features they lack).  :data:`PUBLIC_KINDS` are the public
models a client may publish — the paper's non-private random forest and DP learners of the learner
registry — and :class:`PublicModel` is a published model as subscribers see it.  :func:`forest` is
the paper's private model.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from sklearn.ensemble import RandomForestClassifier

from pubsubml.learners.catalog import create_learner
from pubsubml.learners.local import LocalModel
from pubsubml.learners.mlp import DPMLPClassifier, fit_many
from pubsubml.methods.stacking.personalizer import vertical_partition
from pubsubml.privacy.events import Neighbouring
from pubsubml.privacy.ledger import PrivacyLedger, Release
from pubsubml.schema import Feature, FeatureSchema

__all__ = [
    "PUBLIC_KINDS",
    "ClientData",
    "Factory",
    "PublicKind",
    "PublicModel",
    "client_features",
    "forest",
    "noisy_defaults",
    "publication_ledger",
    "train_public_models",
    "with_defaults",
]

Factory = Callable[[FeatureSchema, Sequence[Any], int], Any]
"""``f(schema, classes, seed)`` → an unfitted private model."""


@dataclass(frozen=True)
class ClientData:
    """One client's private data and the schema it publishes with its model.

    Attributes
    ----------
    name : str
    X : DataFrame of shape (n, d_c)
        The client's columns; its index must be ``0 … n-1`` (row positions).
    y : ndarray of shape (n,)
    schema : FeatureSchema
        Public bounds of the client's columns and the default values it publishes (used by others
        for the features they lack, pfl-stacking.txt §3).
    """

    name: str
    X: pd.DataFrame
    y: np.ndarray
    schema: FeatureSchema

    def __post_init__(self) -> None:
        n = len(self.X)
        if len(self.y) != n:
            raise ValueError(f"client {self.name!r}: {n} rows in X but {len(self.y)} labels")
        if not self.X.index.equals(pd.RangeIndex(n)):
            raise ValueError(
                f"client {self.name!r}: X must be indexed by row position 0 … n-1 "
                "(use reset_index(drop=True))"
            )
        missing = [c for c in self.schema.names if c not in self.X.columns]
        if missing:
            raise ValueError(f"client {self.name!r}: schema features {missing} are not in X")


def with_defaults(schema: FeatureSchema, defaults: dict[str, Any]) -> FeatureSchema:
    """``schema`` with some features' defaults replaced (numeric ones clipped to the bounds)."""
    features = []
    for f in schema:
        value = defaults.get(f.name, f.default)
        if f.kind == "numeric":
            assert f.lower is not None and f.upper is not None
            value = float(np.clip(float(value), f.lower, f.upper))
        features.append(Feature(**{**f.model_dump(), "default": value}))
    return FeatureSchema(features=tuple(features))


# ---- public models ---------------------------------------------------------------------------
@dataclass(frozen=True)
class PublicKind:
    """A kind of public model: a registered learner, with DP at ``epsilon`` or none."""

    name: str
    learner: str
    epsilon: float | None = None
    params: tuple[tuple[str, Any], ...] = ()

    @property
    def private(self) -> bool:
        """Whether the model is differentially private."""
        return self.epsilon is not None

    @property
    def neighbouring(self) -> Neighbouring:
        """The relation the model's ε holds for: DP-SGD add/remove, diffprivlib replace-one."""
        return "add_remove" if self.learner == "dp_mlp_classifier" else "replace_one"

    def build(self, schema: FeatureSchema, classes: Sequence[Any], seed: int, n: int) -> Any:
        """An unfitted estimator for a client with ``n`` rows."""
        params: dict[str, Any] = dict(self.params)
        if self.learner == "dp_mlp_classifier":
            params |= {"epsilon": self.epsilon, "batch_size": max(8, min(64, n // 4))}
        elif self.epsilon is not None:
            params["epsilon"] = self.epsilon
        if self.private:
            params["noise_seed"] = seed  # a simulation: reproducible noise
        return create_learner(
            self.learner, schema=schema, classes=list(classes), random_state=seed, **params
        )


_MLP: tuple[tuple[str, Any], ...] = (
    ("hidden_layer_sizes", (32,)),
    ("epochs", 10),
    ("learning_rate", 1e-2),
    ("delta", 1e-5),
    ("accountant", "pld"),
)
PUBLIC_KINDS: dict[str, PublicKind] = {
    "rf": PublicKind("rf", "random_forest"),
    **{
        f"dp_{short}_e{e:g}": PublicKind(f"dp_{short}_e{e:g}", learner, float(e), params)
        for short, learner, params in (
            ("rf", "dp_random_forest", ()),
            ("lr", "dp_logistic_regression", ()),
            ("mlp", "dp_mlp_classifier", _MLP),
        )
        for e in (1, 4)
    },
}
"""``rf``: the paper's non-private random forest (reference); ``dp_*_e{ε}``: DP learners."""


class PublicModel:
    """A published model seen by others: its input features, classes and published defaults.

    ``predict_proba`` fills the features a subscriber lacks with the publisher's defaults
    (pfl-stacking.txt §3) before calling the estimator.  ``ledger`` is the publisher's ledger with
    this model charged (``None`` for a non-private model); ``total_epsilon`` is what that ledger
    has spent on the whole publication (DP defaults included), ``inf`` if it is not DP.
    """

    def __init__(
        self,
        estimator: Any,
        schema: FeatureSchema,
        publisher: str,
        ledger: PrivacyLedger | None = None,
    ) -> None:
        self.estimator = estimator
        self.schema = schema
        self.model_id = publisher
        self.input_features = schema.names
        self.classes = list(np.asarray(estimator.classes_).tolist())
        self.epsilon = float(getattr(estimator, "epsilon_", math.inf))
        self.ledger = ledger
        self.total_epsilon = ledger.spent_epsilon() if ledger is not None else math.inf

    def predict_proba(self, X: pd.DataFrame) -> np.ndarray:
        """Class probabilities on ``X`` extended with the published defaults."""
        return np.asarray(self.estimator.predict_proba(self.schema.extend(X)), dtype=np.float64)


def publication_ledger(
    client: str, kind: PublicKind, base: PrivacyLedger | None = None, delta: float = 1e-5
) -> PrivacyLedger:
    """The ledger a client charges its public model of ``kind`` to.

    The client's budget is what it has already planned (``base``: e.g. its DP defaults) plus the
    model's ε.  When the model's neighbouring relation differs from that of ``base``'s releases,
    the ledger's ε holds for replace-one neighbours, where an add/remove ε counts twice (group
    privacy), so the add/remove part is planned twice.  ``base`` is copied, not changed: the
    kinds are alternative federations, each publication composed on its own copy.

    Examples
    --------
    >>> publication_ledger("c0", PUBLIC_KINDS["dp_lr_e1"]).epsilon_budget
    1.0
    """
    if kind.epsilon is None:
        raise ValueError(f"public kind {kind.name!r} is not DP: it has no ledger to charge")
    if base is None:
        return PrivacyLedger(site=client, epsilon_budget=kind.epsilon, delta=delta)
    ledger = base.model_copy(deep=True)
    mixed = bool(base.releases) and base.neighbouring() != kind.neighbouring
    planned = base.epsilon_budget * (2.0 if mixed and base.neighbouring() == "add_remove" else 1.0)
    model = kind.epsilon * (2.0 if mixed and kind.neighbouring == "add_remove" else 1.0)
    ledger.epsilon_budget = planned + model
    return ledger


def train_public_models(
    clients: Sequence[ClientData],
    kind: PublicKind,
    classes: Sequence[Any],
    seed: int,
    ledgers: Mapping[str, PrivacyLedger] | None = None,
) -> list[PublicModel]:
    """Each client's public model, trained on all its rows (pfl-stacking.txt §4).

    DP MLPs of clients with the same columns (and defaults) are trained together with
    :func:`~pubsubml.learners.mlp.fit_many`; each model's ε is its own accountant's.  A DP model is
    charged to its client's :func:`publication_ledger` (built on ``ledgers[client]`` when given)
    before it is published.

    Raises
    ------
    PrivacyBudgetExceededError
        A client's ledger refuses its model; no model is returned.
    """
    seeds = [seed * 1000 + i for i in range(len(clients))]
    fitted: list[Any] = [None] * len(clients)
    if kind.learner == "dp_mlp_classifier":
        groups: dict[tuple[str, int], list[int]] = {}
        for i, c in enumerate(clients):
            batch = kind.build(c.schema, classes, 0, len(c.y)).batch_size
            groups.setdefault((c.schema.model_dump_json(), batch), []).append(i)
        for members in groups.values():
            first = clients[members[0]]
            est = kind.build(first.schema, classes, seeds[members[0]], len(first.y))
            assert isinstance(est, DPMLPClassifier)
            models = fit_many(est, [clients[i].X for i in members], [clients[i].y for i in members])
            for i, m in zip(members, models, strict=True):
                fitted[i] = m
    else:
        for i, c in enumerate(clients):
            fitted[i] = kind.build(c.schema, classes, seeds[i], len(c.y)).fit(c.X, c.y)
    charged: list[PrivacyLedger | None] = [None] * len(clients)
    if kind.private:
        for i, (m, c) in enumerate(zip(fitted, clients, strict=True)):
            events = tuple(getattr(m, "privacy_events_", ()))
            if not events:
                raise ValueError(f"DP public model {kind.name!r} of {c.name!r} records no events")
            ledger = publication_ledger(c.name, kind, (ledgers or {}).get(c.name))
            ledger.charge(Release(release_id=f"public-{kind.name}", events=events))
            charged[i] = ledger
    return [
        PublicModel(m, c.schema, c.name, ledger)
        for m, c, ledger in zip(fitted, clients, charged, strict=True)
    ]


# ---- private and meta-models -----------------------------------------------------------------
def forest(n_estimators: int = 100) -> Factory:
    """Factory of the paper's random forest (scikit-learn defaults) on the public encoding."""

    def make(schema: FeatureSchema, classes: Sequence[Any], seed: int) -> Any:
        rf = RandomForestClassifier(n_estimators=n_estimators, random_state=seed, n_jobs=1)
        return LocalModel(estimator=rf, schema=schema, classes=list(classes))

    return make


# ---- vertical partitions (pfl-stacking.txt §4.3) ---------------------------------------------
def client_features(columns: Sequence[str], n_clients: int, p: float, seed: int) -> list[list[str]]:
    """Each client's predictors: ``max(1, round(p·d))`` distinct columns drawn at random.

    The paper's text says "with replacement"; its source code draws each client's columns without
    replacement (``int(p·d)`` of them), so every client holds exactly a proportion ≈ ``p``; that is
    done here, with :func:`~pubsubml.methods.stacking.personalizer.vertical_partition` (``replace=False``).
    Columns are the original (not one-hot encoded) features, as in the source code.

    Examples
    --------
    >>> [len(c) for c in client_features(list("abcdefgh"), 3, 0.5, seed=0)]
    [4, 4, 4]
    """
    if not 0 < p <= 1:
        raise ValueError(f"p must be in (0, 1], got {p}")
    state = int(np.random.SeedSequence([seed, 11]).generate_state(1)[0])
    return vertical_partition(list(columns), n_clients, p, replace=False, random_state=state)


def noisy_defaults(
    X: pd.DataFrame, schema: FeatureSchema, noise: float, rng: np.random.Generator
) -> FeatureSchema:
    """The paper's simulated public defaults (pfl-stacking.txt §4.3), computed from ``X``.

    Categorical: the most frequent value; numeric: ``median + N(0, s·noise)`` with ``s`` the sample
    standard deviation, clipped to the public bounds.  Not differentially private — the private-safe
    variant is :func:`~pubsubml.methods.stacking.personalizer.release_dp_defaults`.
    """
    if not (math.isfinite(noise) and noise >= 0):
        raise ValueError(f"noise must be finite and >= 0, got {noise}")
    if len(X) < 2:
        raise ValueError("noisy defaults need at least 2 rows (the noise scale is a sample std)")
    values: dict[str, Any] = {}
    for f in schema:
        col = X[f.name]
        if f.kind == "numeric":
            x = col.to_numpy(dtype=np.float64)
            values[f.name] = float(np.median(x) + rng.normal(0.0, float(np.std(x, ddof=1)) * noise))
        else:
            values[f.name] = col.mode().iloc[0]
    return with_defaults(schema, values)
