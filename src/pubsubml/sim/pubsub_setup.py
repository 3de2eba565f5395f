"""Sites, scenarios and method settings of the PubSub-ML evaluation (pubsub-ml.txt §7).

The data classes :class:`Site`, :class:`Scenario` and :class:`MethodConfig` describe one experiment;
:mod:`pubsubml.sim.pubsub_methods` runs the methods on them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd

from pubsubml.schema import FeatureSchema

__all__ = ["FL_METHODS", "LEARNERS", "METHODS", "MethodConfig", "Scenario", "Site"]

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
#: Publisher model types of the model-heterogeneity experiment (pubsub-ml.txt §8.2.2).
LEARNERS = {
    "mlp": "dp_mlp_classifier",
    "logistic": "dp_logistic_regression",
    "naive_bayes": "dp_gaussian_nb",
    "forest": "dp_random_forest",
}


@dataclass(frozen=True)
class Site:
    """One site's full data set (before the fold split) and its choices.

    Attributes
    ----------
    X : DataFrame
        The site's columns (a subset of the scenario's schema).
    y : ndarray of shape (n,)
    epsilon : float, default=1.0
        The site's own budget; a publisher's DP model is trained to it.
    learner : {"mlp", "logistic", "naive_bayes", "forest"}, default="mlp"
        The publisher's model type.
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
    publishers : sequence of Site
    subscriber : Site
    schema : FeatureSchema
        The consortium schema: every column of every site, with public bounds and defaults.
    task : {"classification", "regression"}
    classes : tuple or None
    metric : str
        A :func:`pubsubml.sim.metrics.score` metric.
    delta : float, default=1e-4
        δ of every DP release (pubsub-ml.txt §7.4).
    minority : label, optional
        The class whose F1 the ``"f1_minority"`` metric scores, known publicly (the rare outcome,
        e.g. death); ``None``: the least frequent label of each test part.
    """

    publishers: Sequence[Site]
    subscriber: Site
    schema: FeatureSchema
    task: Literal["classification", "regression"]
    classes: tuple[Any, ...] | None
    metric: str
    delta: float = 1e-4
    minority: Any = None


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
