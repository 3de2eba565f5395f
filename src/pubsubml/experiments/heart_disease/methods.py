"""The models of the ``heart-disease`` benchmark, one definition for both protocols.

Every shared model is FLamby's model class, a logistic regression (du Terrail et al. 2022: a
``Linear(13, 1)`` and a sigmoid), here on the public-bound encoding of the features:

* **a hospital's logistic model** (:func:`hospital_models`): 100 full-batch Adam steps at the
  learning rate of the package's DP-SGD rule for a linear model
  (:func:`~pubsubml.learners.dp_sgd_defaults`, from public inputs only: 0.2 here), trained with
  DP-SGD to (ε, δ) for a published model (the DP-SGD logistic learner of the PubSub-ML
  experiments, :data:`~pubsubml.experiments.pubsub.consortium.LEARNERS` ``"sgd_linear"``), or in
  the clear (FLamby's Local and Pooled rows, the publishers of PubSub-ML*);
* **federated** (:func:`fit_federated`): FedAvg, FedProx (μ = 0.01) and FedAdam (server η = 0.01,
  FLamby's tuned values) through our round loop (:mod:`pubsubml.methods.federated`), every
  hospital in every round, 20 rounds of 5 local full-batch steps, so that each client runs the
  same 100 steps at the same learning rate as a hospital's own model; with record-level DP-SGD
  at every client or none;
* **the subscriber's own model** (:func:`fit_own`): :class:`~pubsubml.methods.pubsub.own.OwnLearner`
  chosen by 5-fold cross-validation among a network, a random forest and a logistic model (the
  Own of the PubSub-ML experiments), and the same learner inside CUSTOMIZE (:func:`customize`,
  the :class:`~pubsubml.methods.pubsub.customizer.Customizer`'s defaults, its cross-fit reused).

A site whose training rows hold one class only (Switzerland under FLamby's split: 30 patients,
all with heart disease) cannot choose a model by cross-validation nor fit a fusion: its own
model is :class:`ConstantClassifier`, and its CUSTOMIZE falls back to it.

References
----------
pubsub-ml.txt §4 (CUSTOMIZE), §7.2–7.4 (models, baselines, protocol), §8 (ε, δ, DP-SGD).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.metrics import log_loss, roc_auc_score

from pubsubml.experiments.pubsub.consortium import FL_METHODS, LEARNERS
from pubsubml.learners.catalog import create_learner
from pubsubml.learners.dpsgd_defaults import dp_sgd_defaults
from pubsubml.learners.mlp import DPMLPClassifier
from pubsubml.methods.pubsub.customizer import Customizer
from pubsubml.methods.pubsub.own import OwnLearner, OwnModel
from pubsubml.methods.pubsub.own_crossfit import CrossFitStore
from pubsubml.privacy.accountants import DEFAULT_DELTA
from pubsubml.schema import FeatureSchema

__all__ = [
    "CLASSES",
    "DELTA",
    "FULL_BATCH",
    "SMOKE_TRAINING",
    "TRAINING",
    "ConstantClassifier",
    "Training",
    "customize",
    "fit_federated",
    "fit_own",
    "hospital_models",
    "logistic",
    "scores",
]

CLASSES: tuple[int, int] = (0, 1)
"""The public label set: no heart disease, heart disease."""

DELTA: float = DEFAULT_DELTA
"""δ of every DP release: the package's 1e-5, below 1/n of the smallest training set (30 rows)."""

FULL_BATCH = 1_000
"""A batch size above every training set of the benchmark (at most 920 patients): full batch."""

_LEARNER = LEARNERS["sgd_linear"]["classification"]


@dataclass(frozen=True)
class Training:
    """How the logistic models train (the DP-SGD linear rule: 100 full-batch Adam steps).

    Attributes
    ----------
    rounds : int
        Federated rounds.
    local_epochs : int
        Full-batch steps of a client per round.
    own_kind : str
        The :class:`~pubsubml.methods.pubsub.own.OwnLearner` kind of the own model (``"auto"``:
        chosen by cross-validation).
    fine_tune_epochs : int
        Full-batch steps of the (F) variants' non-private fine-tuning (pubsub-ml.txt §7.2: 30).
    """

    rounds: int = 20
    local_epochs: int = 5
    own_kind: str = "auto"
    fine_tune_epochs: int = 30

    @property
    def steps(self) -> int:
        """Full-batch steps of one client over a federated run (and of a hospital's own fit)."""
        return self.rounds * self.local_epochs

    def learning_rate(self, schema: FeatureSchema, n_rows: int) -> float:
        """The DP-SGD linear rule's learning rate for ``schema`` (public inputs only)."""
        rule = dp_sgd_defaults(n_rows, 1.0, DELTA, schema.n_encoded, model="linear")
        return float(rule.learning_rate)


TRAINING = Training()
"""The full run's training: 20 rounds × 5 local steps = 100 steps, the rule's count."""

SMOKE_TRAINING = Training(rounds=2, local_epochs=1, own_kind="logistic", fine_tune_epochs=2)
"""Seconds-long training for the smoke run (its numbers mean nothing)."""


class ConstantClassifier(ClassifierMixin, BaseEstimator):
    """Predicts the class shares of its training labels: the model of a one-class site.

    Parameters
    ----------
    classes : sequence, default=(0, 1)
        The public label set.

    Examples
    --------
    >>> m = ConstantClassifier().fit(pd.DataFrame({"a": [1.0, 2.0]}), [1, 1])
    >>> m.predict_proba(pd.DataFrame({"a": [3.0]})).tolist(), m.predict(pd.DataFrame({"a": [0]}))
    ([[0.0, 1.0]], array([1]))
    """

    def __init__(self, classes: Sequence[Any] = CLASSES) -> None:
        self.classes = classes

    def fit(self, X: pd.DataFrame, y: Any) -> ConstantClassifier:
        """Store the share of every public class in ``y``."""
        labels = np.asarray(y)
        self.classes_ = np.asarray(list(self.classes))
        self.shares_ = np.array([np.mean(labels == c) for c in self.classes_], dtype=float)
        self.n_features_in_ = X.shape[1]
        return self

    def predict_proba(self, X: pd.DataFrame) -> np.ndarray:
        """The training shares, for every row."""
        return np.tile(self.shares_, (len(X), 1))

    def predict(self, X: pd.DataFrame) -> np.ndarray:
        """The most frequent training class, for every row."""
        return np.full(len(X), self.classes_[int(np.argmax(self.shares_))])


def _one_class(y: Any) -> bool:
    return len(np.unique(np.asarray(y))) < 2


def logistic(
    schema: FeatureSchema,
    *,
    epsilon: float | None,
    seed: int,
    training: Training = TRAINING,
    n_rows: int = 100,
) -> Any:
    """A hospital's logistic model, unfitted: DP-SGD at ``epsilon``, or non-private (``None``).

    Parameters
    ----------
    schema : FeatureSchema
        The public schema of the columns it trains on.
    epsilon : float or None
        The DP budget (δ = :data:`DELTA`); ``None`` trains in the clear with the same steps and
        learning rate.
    seed : int
        Seeds the initialisation and, with DP, the noise (a simulation: reproducible noise).
    training : Training
    n_rows : int
        Rows it will train on (public: checks δ < 1/n for the rule; the rate does not depend on
        it).
    """
    if epsilon is not None:
        # The same learner as the DP-SGD linear publishers of the PubSub-ML experiments: full
        # batch, 100 steps and the rule's learning rate, chosen from public inputs.
        return create_learner(
            _LEARNER,
            schema=schema,
            classes=CLASSES,
            epsilon=epsilon,
            delta=DELTA,
            random_state=seed,
            noise_seed=seed,
        )
    return DPMLPClassifier(
        schema=schema,
        classes=CLASSES,
        hidden_layer_sizes=(),
        epochs=training.steps,
        batch_size=FULL_BATCH,
        learning_rate=training.learning_rate(schema, n_rows),
        dp=False,
        random_state=seed,
    )


def hospital_models(
    data: Mapping[str, tuple[pd.DataFrame, np.ndarray]],
    schema: FeatureSchema,
    *,
    epsilon: float | None,
    seed: int,
    training: Training = TRAINING,
) -> dict[str, OwnModel]:
    """Each hospital's logistic model on its own rows, as a black box over its own columns.

    Parameters
    ----------
    data : mapping of hospital to (DataFrame, labels)
        Each hospital's training rows (its columns: a subset of ``schema``).
    schema : FeatureSchema
        The consortium schema.
    epsilon : float or None
        DP budget of every model (``None``: non-private).
    seed : int
        Each hospital's model takes its own seed from ``seed`` and its position.
    training : Training

    Returns
    -------
    dict of str to OwnModel
        Fitted models with their ``input_features``, ready to publish or to subscribe to.
    """
    out: dict[str, OwnModel] = {}
    for index, (hospital, (X, y)) in enumerate(data.items()):
        columns = list(X.columns)
        model = logistic(
            schema.subset(columns),
            epsilon=epsilon,
            seed=seed * 7919 + index,
            training=training,
            n_rows=len(y),
        )
        out[hospital] = OwnModel(model.fit(X, y), columns)
    return out


def fit_own(
    X: pd.DataFrame,
    y: np.ndarray,
    schema: FeatureSchema,
    *,
    seed: int,
    kind: str = "auto",
    store: CrossFitStore | None = None,
) -> Any:
    """The subscriber's own model M^s on its rows: OwnLearner, or a constant on one class.

    Parameters
    ----------
    X, y
        The subscriber's training rows.
    schema : FeatureSchema
        The consortium schema (the learner takes its subset of the subscriber's columns).
    seed : int
        The learner's seed (the same as CUSTOMIZE's, so the cross-fit is shared).
    kind : str, default="auto"
        The OwnLearner kind.
    store : CrossFitStore, optional
        Where the learner's cross-fit is kept for :func:`customize` to reuse.
    """
    if _one_class(y):
        return ConstantClassifier().fit(X, y)
    learner = OwnLearner(
        task="classification",
        kind=kind,
        schema=schema.subset(list(X.columns)),
        classes=CLASSES,
        random_state=seed,
        cross_fits=store,
    )
    return learner.fit(X, y)


def customize(
    models: Sequence[Any],
    X: pd.DataFrame,
    y: np.ndarray,
    schema: FeatureSchema,
    *,
    seed: int,
    store: CrossFitStore,
    kind: str = "auto",
) -> tuple[Any, bool]:
    """CUSTOMIZE (pubsub-ml.txt §4): the subscriber fuses ``models`` with its own model.

    The :class:`~pubsubml.methods.pubsub.customizer.Customizer`'s defaults, as the PubSub-ML
    experiments run it (cross-fitted own model and stacked fusion), its own model the OwnLearner
    of :func:`fit_own` (the cross-fit is taken from ``store`` when Own ran first).  A subscriber
    with one class falls back to :class:`ConstantClassifier`.

    Returns
    -------
    (model, fallback)
        The fitted subscriber model, and whether it is the own model alone.
    """
    if _one_class(y):
        return ConstantClassifier().fit(X, y), True
    cust = Customizer(
        models=list(models),
        task="classification",
        own_model=kind,
        schema=schema,
        classes=CLASSES,
        random_state=seed,
        cross_fits=store,
    ).fit(X, y)
    return cust, bool(cust.fallback_)


def fit_federated(
    name: str,
    clients: Sequence[tuple[pd.DataFrame, np.ndarray]],
    schema: FeatureSchema,
    *,
    epsilon: float | None,
    seed: int,
    training: Training = TRAINING,
) -> Any:
    """FedAvg, FedProx or FedAdam over ``clients`` with our round loop; the fitted global model.

    Every client trains in every round (pubsub-ml.txt §7.3: few sites); the model is the
    logistic regression of :func:`logistic` (no hidden layer), full batch, ``training.rounds``
    rounds of ``training.local_epochs`` steps at the linear rule's learning rate.  FedProx's
    μ = 0.01 and FedAdam's server η = 0.01 are FLamby's tuned values; FedAdam's β1 = 0.9,
    β2 = 0.99 and τ = 1e-9 are Flower's defaults, so that the two implementations run one
    algorithm.

    Parameters
    ----------
    name : {"FedAvg", "FedProx", "FedAdam"}
    clients : sequence of (DataFrame, labels)
    schema : FeatureSchema
        The consortium schema; a client's missing features take its public defaults.
    epsilon : float or None
        Record-level DP-SGD at every client to (ε, :data:`DELTA`); ``None``: no DP.
    seed : int
    training : Training
    """
    from pubsubml.methods import federated

    if name not in FL_METHODS:
        raise ValueError(f"unknown federated method {name!r}; choose from {list(FL_METHODS)}")
    options: dict[str, Any] = {
        "FedProx": {"mu": 0.01},
        "FedAdam": {"server_lr": 0.01, "beta1": 0.9, "beta2": 0.99, "tau": 1e-9},
    }.get(name, {})
    cls = getattr(federated, FL_METHODS[name])
    fl = cls(
        schema=schema,
        classes=list(CLASSES),
        hidden_layer_sizes=(),
        rounds=training.rounds,
        local_epochs=training.local_epochs,
        batch_size=FULL_BATCH,
        client_fraction=1.0,
        lr=training.learning_rate(schema, min(len(y) for _, y in clients)),
        dp=epsilon is not None,
        target_epsilon=1.0 if epsilon is None else epsilon,
        target_delta=DELTA,
        random_state=seed,
        **options,
    )
    return fl.fit(clients)


def scores(model: Any, X: pd.DataFrame, y: np.ndarray) -> dict[str, float]:
    """Accuracy (probability of disease > 0.5), correct count, ROC AUC and log-loss on ``(X, y)``.

    The predicted label is "disease" when its probability is above 0.5 (FLamby's metric); ROC AUC
    is NaN on a one-class test set; probabilities are clipped to [1e-7, 1 − 1e-7] for the
    log-loss.

    Examples
    --------
    >>> m = ConstantClassifier().fit(pd.DataFrame({"a": [0, 0, 0]}), [0, 1, 1])
    >>> s = scores(m, pd.DataFrame({"a": [0, 0]}), np.array([1, 0]))
    >>> s["accuracy"], s["correct"], s["auc"]
    (0.5, 1, 0.5)
    """
    proba = np.asarray(model.predict_proba(X), dtype=float)[:, 1]
    y = np.asarray(y)
    predicted = (proba > 0.5).astype(int)
    correct = int((predicted == y).sum())
    auc = float(roc_auc_score(y, proba)) if len(np.unique(y)) == 2 else math.nan
    clipped = np.clip(proba, 1e-7, 1 - 1e-7)
    loss = float(log_loss(y, clipped, labels=list(CLASSES)))
    return {"accuracy": correct / len(y), "correct": correct, "auc": auc, "log_loss": loss}
