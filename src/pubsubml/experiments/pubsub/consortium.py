"""Sites, scenarios and method settings of the PubSub-ML evaluation (pubsub-ml.txt §7).

The data classes :class:`SimSite`, :class:`Scenario` and :class:`MethodConfig` describe one experiment;
:mod:`pubsubml.experiments.pubsub.compared` runs the methods on them.  :func:`with_budgets` and
:func:`with_learners` change the publishers of a scenario; :data:`FL_DP` is the ``--fl-dp`` option of
the experiments with DP FL baselines.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np
import pandas as pd

from pubsubml.experiments.base import Param
from pubsubml.schema import FeatureSchema

__all__ = [
    "APPROXIMATE_DP",
    "FL_DP",
    "FL_METHODS",
    "LEARNERS",
    "METHODS",
    "NONPRIVATE_LEARNERS",
    "NONPRIVATE_PARAMS",
    "OWN_MODELS",
    "MethodConfig",
    "Scenario",
    "SimSite",
    "with_budgets",
    "with_learners",
]

METHODS = (
    "PubSub-ML",
    "PubSub-ML*",
    "Own",
    "FedAvg(V)",
    "FedAvg(F)",
    "FedProx(V)",
    "FedProx(F)",
    "FedAdam(V)",
    "FedAdam(F)",
    "Joint",
)
FL_METHODS = {"FedAvg": "DPFedAvg", "FedProx": "DPFedProx", "FedAdam": "DPFedAdam"}
#: Publisher model types → registered DP learner per task (pubsub-ml.txt §8.2.2: model
#: heterogeneity).  ``"mlp"`` is Table 4's network trained by DP-SGD; ``"logistic"``,
#: ``"naive_bayes"`` and ``"forest"`` are diffprivlib's models; ``"sgd_linear"`` is a logistic
#: (classification) or linear (regression) model trained by DP-SGD.
LEARNERS: dict[str, dict[str, str]] = {
    "mlp": {"classification": "dp_mlp_classifier", "regression": "dp_mlp_regressor"},
    "logistic": {"classification": "dp_logistic_regression"},
    "naive_bayes": {"classification": "dp_gaussian_nb"},
    "forest": {"classification": "dp_random_forest"},
    "sgd_linear": {"classification": "dp_sgd_logistic", "regression": "dp_sgd_linear"},
}
#: The same model type without DP, for PubSub-ML* (§8.3.4); a type not listed here falls back to
#: Table 4's network without DP, as in the paper, whose publishers are all networks.
NONPRIVATE_LEARNERS: dict[str, dict[str, str]] = {
    "sgd_linear": {"classification": "logistic_regression", "regression": "linear_regression"},
}
#: Parameters of those non-private learners: lbfgs run to convergence (its default of 100
#: iterations stops short on 10 classes).
NONPRIVATE_PARAMS: dict[str, dict[str, Any]] = {"logistic_regression": {"max_iter": 1000}}
#: Learners whose DP guarantee is approximate, (ε, δ): they take the scenario's δ.
APPROXIMATE_DP = frozenset({"dp_sgd_logistic", "dp_sgd_linear"})
#: The subscriber's own model M^s: an :class:`~pubsubml.methods.pubsub.own.OwnLearner` kind, or
#: ``"paper"``, Table 4's network trained for ``epochs`` without DP (the Own of pubsub-ml.txt §7.3).
OWN_MODELS = ("auto", "mlp", "forest", "logistic", "paper")


@dataclass(frozen=True)
class SimSite:
    """One site's full data set (before the fold split) and its choices.

    Attributes
    ----------
    X : DataFrame
        The site's columns (a subset of the scenario's schema).
    y : ndarray of shape (n,)
    epsilon : float, default=1.0
        The site's own budget; a publisher's DP model is trained to it.
    learner : {"mlp", "logistic", "naive_bayes", "forest", "sgd_linear"}, default="mlp"
        The publisher's model type (a key of :data:`LEARNERS`).
    ids : ndarray of shape (n,), optional
        Ids of the rows in a population that several sites share (Scenario 3: the same patients,
        different columns, pubsub-ml.txt §8.1.3).  When the subscriber has ids, folds are drawn
        over ids, so a row in the subscriber's test part is in no site's training part.
    """

    X: pd.DataFrame
    y: np.ndarray
    epsilon: float = 1.0
    learner: str = "mlp"
    ids: np.ndarray | None = None


@dataclass(frozen=True)
class Scenario:
    """Publishers, one subscriber and the consortium's public metadata.

    Attributes
    ----------
    publishers : sequence of SimSite
    subscriber : SimSite
    schema : FeatureSchema
        The consortium schema: every column of every site, with public bounds and defaults.
    task : {"classification", "regression"}
    classes : tuple or None
    metric : str
        A :func:`pubsubml.experiments.metrics.score` metric.
    delta : float, default=1e-4
        δ of every DP release (pubsub-ml.txt §7.4).
    minority : label, optional
        The class whose F1 the ``"f1_minority"`` metric scores, known publicly (the rare outcome,
        e.g. death); ``None``: the least frequent label of each test part.
    test : SimSite, optional
        An external test set: fresh rows of the subscriber's distribution that no site holds.
        With it, every site trains on all of its rows and every method is scored on ``test``;
        the fold index of :func:`~pubsubml.experiments.pubsub.compared.evaluate_fold` then only seeds the
        models (a repeat).  Without it (the paper's protocol, §7.4), the subscriber's rows are
        split into folds.
    """

    publishers: Sequence[SimSite]
    subscriber: SimSite
    schema: FeatureSchema
    task: Literal["classification", "regression"]
    classes: tuple[Any, ...] | None
    metric: str
    delta: float = 1e-4
    minority: Any = None
    test: SimSite | None = None


@dataclass(frozen=True)
class MethodConfig:
    """Model and training settings shared by all methods (pubsub-ml.txt Table 4 and §7.4).

    Attributes
    ----------
    hidden_layer_sizes : tuple, default=(100, 50)
    epochs : int, default=30
    batch_size : int, default=100
    lr : float, default=1e-3
    fl_rounds : int, default=30
    fl_client_fraction : float, default=1.0
        All clients take part in every round when sites are few (§7.3); 0.1 with many (§8.2.3).
    fl_local_epochs : int, default=1
    fine_tune_epochs : int, default=30
    top_m : int, optional
        Model selection of the subscriber (§8.2.3); ``None`` fuses all.
    dp : bool, default=True
        ``False`` runs every method without DP (the non-private comparison, §8.3.4).
    fl_dp : {"local", "central"}, default="local"
        Where the FL baselines add noise when ``dp``: DP-SGD at every client (the paper's
        setting: clients need not trust the server) or at the server (clients train without
        noise; the server clips each client's update, adds Gaussian noise and samples clients by
        Poisson; the unit of privacy is the client).
    fl_options : dict
        Extra keyword arguments per FL class name (e.g. ``{"DPFedProx": {"mu": 0.01}}``); they
        override the ones built from the fields above.
    dp_defaults : bool, default=False
        ``True``: the DP publishers' networks take the DP-SGD defaults of
        :class:`~pubsubml.learners.mlp.DPMLPClassifier` (batch size and learning rate ``"auto"``,
        chosen from public inputs) instead of ``batch_size`` and ``lr``, which the paper uses for
        every model (§7.2), and the DP FL baselines take the learning rate of the same rule
        (their batch size stays ``batch_size``).  Non-private training keeps ``batch_size`` and
        ``lr``.
    own_model : {"auto", "mlp", "forest", "logistic", "paper"}, default="auto"
        The subscriber's own model, the same for the Own baseline and inside CUSTOMIZE: an
        :class:`~pubsubml.methods.pubsub.own.OwnLearner` of this kind (``"auto"`` chooses by
        cross-validation on the subscriber's rows), or ``"paper"``: Table 4's network trained for
        ``epochs`` without DP, the Own of the paper (§7.3).
    customizer : {"default", "paper"}, default="default"
        ``"default"``: the :class:`~pubsubml.methods.pubsub.customizer.Customizer`'s own defaults
        (cross-fitted own model and fusion).  ``"paper"``: the paper's protocol (§4, §7.4): M^s on
        ``Tra`` (75 % of the subscriber's training part, 60 % of all its rows), the fully
        connected fusion layer on ``Cus`` (the other 25 %), candidates ranked by the scenario's
        metric.
    """

    hidden_layer_sizes: tuple[int, ...] = (100, 50)
    epochs: int = 30
    batch_size: int = 100
    lr: float = 1e-3
    fl_rounds: int = 30
    fl_client_fraction: float = 1.0
    fl_local_epochs: int = 1
    fine_tune_epochs: int = 30
    top_m: int | None = None
    dp: bool = True
    fl_dp: Literal["local", "central"] = "local"
    fl_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    dp_defaults: bool = False
    own_model: str = "auto"
    customizer: Literal["default", "paper"] = "default"


FL_DP = Param(
    "fl_dp",
    "local",
    "Where the FL baselines add noise: 'local' (DP-SGD at every client, the paper) or "
    "'central' (at the server, per client).",
    choices=("local", "central"),
)
"""The ``--fl-dp`` option of every experiment that runs DP FL baselines (:attr:`MethodConfig.fl_dp`)."""


def with_budgets(scenario: Scenario, epsilons: Sequence[float]) -> Scenario:
    """The scenario with publisher ``i`` at budget ``epsilons[i]`` (pubsub-ml.txt §8.2.1)."""
    if len(epsilons) != len(scenario.publishers):
        raise ValueError("need one budget per publisher")
    pubs = [
        replace(s, epsilon=float(e)) for s, e in zip(scenario.publishers, epsilons, strict=True)
    ]
    return replace(scenario, publishers=pubs)


def with_learners(scenario: Scenario, learners: Sequence[str]) -> Scenario:
    """The scenario with publisher ``i`` training a ``learners[i % len(learners)]`` model (§8.2.2)."""
    pubs = [
        replace(s, learner=learners[i % len(learners)]) for i, s in enumerate(scenario.publishers)
    ]
    return replace(scenario, publishers=pubs)
