"""Estimators a site trains: DP learners to publish, non-private ones to keep.

DP classifiers over diffprivlib (:class:`DPLogisticRegression`, :class:`DPGaussianNB`,
:class:`DPRandomForestClassifier`), the DP-SGD networks (:class:`DPMLPClassifier`,
:class:`DPMLPRegressor`) and linear models (:class:`DPSGDLogisticRegression`,
:class:`DPSGDLinearRegression`) with hyperparameters chosen from public inputs
(:func:`dp_sgd_defaults`; the paper's :data:`TABLE4_HYPERPARAMETERS`), accounted private
hyperparameter selection (:class:`PrivateHyperparameterSearch`), the non-private
:class:`LocalModel`, and the learner catalog (pubsub-ml.txt §3.2: each site picks its own model
type).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pubsubml.lazy import attach

if TYPE_CHECKING:
    from pubsubml.learners.base import SchemaInputMixin, check_labels, check_regression_targets
    from pubsubml.learners.catalog import (
        LearnerSpec,
        available_learners,
        create_learner,
        get_learner_spec,
        register_learner,
        unregister_learner,
    )
    from pubsubml.learners.diffprivlib_models import DiffprivlibClassifier, to_sklearn_base
    from pubsubml.learners.dpsgd_defaults import (
        TABLE4_HYPERPARAMETERS,
        DPSGDDefaults,
        dp_sgd_defaults,
    )
    from pubsubml.learners.dpsgd_linear import DPSGDLinearRegression, DPSGDLogisticRegression
    from pubsubml.learners.forest import DPRandomForestClassifier
    from pubsubml.learners.hyperparameter_search import (
        PrivateHyperparameterSearch,
        select_hyperparameters,
    )
    from pubsubml.learners.local import LocalModel, PrivacyGuarantee, as_learner, privacy_guarantee
    from pubsubml.learners.logistic import DPLogisticRegression
    from pubsubml.learners.mlp import DPMLPClassifier, DPMLPRegressor, fit_many
    from pubsubml.learners.naive_bayes import DPGaussianNB

__all__ = [
    "TABLE4_HYPERPARAMETERS",
    "DPGaussianNB",
    "DPLogisticRegression",
    "DPMLPClassifier",
    "DPMLPRegressor",
    "DPRandomForestClassifier",
    "DPSGDDefaults",
    "DPSGDLinearRegression",
    "DPSGDLogisticRegression",
    "DiffprivlibClassifier",
    "LearnerSpec",
    "LocalModel",
    "PrivacyGuarantee",
    "PrivateHyperparameterSearch",
    "SchemaInputMixin",
    "as_learner",
    "available_learners",
    "check_labels",
    "check_regression_targets",
    "create_learner",
    "dp_sgd_defaults",
    "fit_many",
    "get_learner_spec",
    "privacy_guarantee",
    "register_learner",
    "select_hyperparameters",
    "to_sklearn_base",
    "unregister_learner",
]

__getattr__, __dir__ = attach(__name__, __file__)
