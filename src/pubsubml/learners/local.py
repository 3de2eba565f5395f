"""Non-private local models: any scikit-learn estimator behind the public schema encoding.

A subscriber combines the models it receives with its own local model M^s, trained on its own
data and never released, so it needs no privacy (pubsub-ml.txt §3.2, §4); the non-private
variant PubSub-ML* trains every model this way (§8.3.4).  :class:`LocalModel` gives any
scikit-learn estimator the same input handling as the DP learners, and :func:`privacy_guarantee`
reads the guarantee of any learner, wrapped or plain.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, NamedTuple, Self

import numpy as np
from sklearn.base import BaseEstimator, clone, is_classifier
from sklearn.metrics import accuracy_score, r2_score
from sklearn.utils import get_tags
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

from pubsubml.errors import LabelError
from pubsubml.learners.base import SchemaInputMixin, check_labels, check_regression_targets
from pubsubml.privacy.events import DPEvent
from pubsubml.schema import FeatureSchema

__all__ = ["LocalModel", "PrivacyGuarantee", "as_learner", "privacy_guarantee"]


def _estimator_has(method: str) -> Any:
    def check(self: LocalModel) -> bool:
        return hasattr(self.estimator, method)

    return check


class LocalModel(SchemaInputMixin, BaseEstimator):
    """A non-private model: a scikit-learn estimator trained on the schema-encoded input.

    Classifier or regressor according to the wrapped estimator.  Follows the convention of the
    non-private learners of pubsubml (``DPMLPClassifier(dp=False)``): ``epsilon_`` is infinite,
    ``delta_`` is 0 and ``privacy_events_`` is empty, so a ledger refuses to release it as DP.

    Parameters
    ----------
    estimator : scikit-learn estimator
        Cloned at ``fit``; the original is never modified.
    schema : FeatureSchema, optional
        Public schema encoding the input; without it ``X`` must be a numeric matrix.
    classes : sequence, optional
        Classifiers only: the label set.  With it, labels outside it raise and ``predict_proba``
        has one column per declared class (zero for classes absent from the training labels),
        which keeps the outputs aligned with other sites' models (pubsub-ml.txt §4, m(x)).

    Attributes
    ----------
    estimator_ : estimator
        The fitted clone, trained on the encoded matrix and the original labels.
    classes_ : ndarray of shape (n_classes,)
        Classifiers only: declared classes, or the sorted labels of ``y``.
    epsilon_ : float
        ``math.inf``: no DP guarantee.
    delta_ : float
        0.0.
    privacy_events_ : list
        Empty.
    schema_ : FeatureSchema or None
    n_features_in_ : int

    Raises
    ------
    TypeError
        From ``fit``: ``estimator`` is not an estimator.
    LabelError
        From ``fit``: labels outside ``classes``, or ``classes`` given for a regressor.
    DataValidationError
        From ``fit``/``predict``: NaN or infinite values, input not matching the schema.

    References
    ----------
    pubsub-ml.txt §3.2 (local models M^s), §4 (CUSTOMIZE), §8.3.4 (non-private scenario).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import LinearRegression
    >>> m = LocalModel(estimator=LinearRegression()).fit(np.eye(3), [1.0, 2.0, 3.0])
    >>> m.predict(np.eye(3)).round(6).tolist(), m.epsilon_, m.privacy_events_
    ([1.0, 2.0, 3.0], inf, [])
    """

    def __init__(
        self,
        *,
        estimator: Any = None,
        schema: FeatureSchema | None = None,
        classes: Sequence[Any] | None = None,
    ) -> None:
        self.estimator = estimator
        self.schema = schema
        self.classes = classes

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        if self.estimator is not None:
            inner = get_tags(self.estimator)
            tags.estimator_type = inner.estimator_type
            tags.regressor_tags = inner.regressor_tags
            # One label or one value per row: the schema input handling takes a 1-D y only.
            tags.target_tags = replace(inner.target_tags, multi_output=False, single_output=True)
            if inner.classifier_tags is not None:
                tags.classifier_tags = replace(inner.classifier_tags, multi_label=False)
        return tags

    def fit(self, X: Any, y: Any) -> Self:
        """Fit a clone of ``estimator`` on the encoded ``X``; nothing changes if a check fails.

        Parameters
        ----------
        X : DataFrame or array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)

        Returns
        -------
        self
        """
        if not (hasattr(self.estimator, "fit") and hasattr(self.estimator, "get_params")):
            raise TypeError(f"estimator must be a scikit-learn estimator, got {self.estimator!r}")
        # scikit-learn estimators compute in float64; float32 input makes their outputs depend
        # on the row's position in the batch (BLAS kernels), not only on the row.
        Z = self._encode_new(X).astype(np.float64)
        inner = clone(self.estimator)
        classes_: np.ndarray | None = None
        if is_classifier(self.estimator):
            classes_, codes = check_labels(y, self.classes, Z.shape[0])
            inner.fit(Z, classes_[codes])
        else:
            if self.classes is not None:
                raise LabelError("classes applies only to classifiers; this estimator is not one")
            inner.fit(Z, check_regression_targets(y, Z.shape[0]))
        self._commit_input(X, Z)
        self.estimator_ = inner
        if classes_ is not None:
            self.classes_ = classes_
        elif hasattr(self, "classes_"):
            del self.classes_
        self.epsilon_ = math.inf
        self.delta_ = 0.0
        self.privacy_events_: list[DPEvent] = []
        return self

    def predict(self, X: Any) -> np.ndarray:
        """Predicted labels or values, shape (n_samples,)."""
        Z = self._encode_predict(X).astype(np.float64)
        out = np.asarray(self.estimator_.predict(Z))
        return out if is_classifier(self) else out.astype(np.float64).reshape(-1)

    @available_if(_estimator_has("predict_proba"))
    def predict_proba(self, X: Any) -> np.ndarray:
        """Class probabilities, shape (n_samples, n_classes), columns in ``classes_`` order."""
        Z = self._encode_predict(X).astype(np.float64)
        inner_proba = np.asarray(self.estimator_.predict_proba(Z), dtype=np.float64)
        index = {c: i for i, c in enumerate(self.classes_.tolist())}
        columns = [index[c] for c in np.asarray(self.estimator_.classes_).tolist()]
        proba = np.zeros((Z.shape[0], len(self.classes_)), dtype=np.float64)
        proba[:, columns] = inner_proba
        return proba

    def score(self, X: Any, y: Any, sample_weight: Any = None) -> float:
        """Accuracy for a classifier, R² for a regressor."""
        if is_classifier(self):
            return float(accuracy_score(y, self.predict(X), sample_weight=sample_weight))
        return float(r2_score(y, self.predict(X), sample_weight=sample_weight))


class PrivacyGuarantee(NamedTuple):
    """The DP guarantee of a fitted learner: (ε, δ) and the events it was accounted from."""

    epsilon: float
    delta: float
    events: list[DPEvent]


def privacy_guarantee(estimator: Any) -> PrivacyGuarantee:
    """Read ``epsilon_``, ``delta_`` and ``privacy_events_`` of any fitted learner.

    A plain scikit-learn estimator, which carries no guarantee, reads as ``(inf, 0.0, [])``,
    the same as :class:`LocalModel`.

    Raises
    ------
    sklearn.exceptions.NotFittedError
        When the estimator is not fitted.

    Examples
    --------
    >>> from sklearn.linear_model import LinearRegression
    >>> privacy_guarantee(LinearRegression().fit([[0.0], [1.0]], [0.0, 1.0]))
    PrivacyGuarantee(epsilon=inf, delta=0.0, events=[])
    """
    check_is_fitted(estimator)
    return PrivacyGuarantee(
        epsilon=float(getattr(estimator, "epsilon_", math.inf)),
        delta=float(getattr(estimator, "delta_", 0.0)),
        events=list(getattr(estimator, "privacy_events_", [])),
    )


def as_learner(estimator: Any, *, schema: FeatureSchema | None = None) -> Any:
    """Return a pubsubml learner: pubsubml learners unchanged, plain estimators in a LocalModel.

    Parameters
    ----------
    estimator : estimator
        A pubsubml learner (anything with the schema input handling) or any scikit-learn
        estimator.
    schema : FeatureSchema, optional
        Schema for a wrapped plain estimator (ignored for pubsubml learners).

    Examples
    --------
    >>> from sklearn.linear_model import LinearRegression
    >>> type(as_learner(LinearRegression())).__name__
    'LocalModel'
    """
    if isinstance(estimator, SchemaInputMixin):
        return estimator
    if not isinstance(estimator, BaseEstimator):
        raise TypeError(f"expected a scikit-learn estimator, got {type(estimator).__name__}")
    return LocalModel(estimator=estimator, schema=schema)
