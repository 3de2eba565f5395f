"""Estimators a site trains: DP learners to publish, non-private ones to keep.

DP classifiers over diffprivlib (:class:`DPLogisticRegression`, :class:`DPGaussianNB`,
:class:`DPRandomForestClassifier`), the DP-SGD networks (:class:`DPMLPClassifier`,
:class:`DPMLPRegressor`), the non-private :class:`LocalModel`, and the learner registry
(pubsub-ml.txt §3.2: each site picks its own model type).
"""

from __future__ import annotations

from pubsubml.learners.base import SchemaInputMixin, check_labels, check_regression_targets
from pubsubml.learners.diffprivlib_models import DiffprivlibClassifier, to_sklearn_base
from pubsubml.learners.forest import DPRandomForestClassifier
from pubsubml.learners.local import LocalModel, PrivacyGuarantee, as_learner, privacy_guarantee
from pubsubml.learners.logistic import DPLogisticRegression
from pubsubml.learners.mlp import DPMLPClassifier, DPMLPRegressor, fit_many
from pubsubml.learners.naive_bayes import DPGaussianNB
from pubsubml.learners.registry import (
    LearnerSpec,
    available_learners,
    create_learner,
    get_learner_spec,
    register_learner,
    unregister_learner,
)

__all__ = [
    "DPGaussianNB",
    "DPLogisticRegression",
    "DPMLPClassifier",
    "DPMLPRegressor",
    "DPRandomForestClassifier",
    "DiffprivlibClassifier",
    "LearnerSpec",
    "LocalModel",
    "PrivacyGuarantee",
    "SchemaInputMixin",
    "as_learner",
    "available_learners",
    "check_labels",
    "check_regression_targets",
    "create_learner",
    "fit_many",
    "get_learner_spec",
    "privacy_guarantee",
    "register_learner",
    "to_sklearn_base",
    "unregister_learner",
]
