"""Shared machinery of the DP classifiers trained by diffprivlib, and their export to scikit-learn.

A publisher runs "the DP version of its machine learning algorithm" and publishes the model
(pubsub-ml.txt §3.2, Algorithm 1); besides DP neural networks the paper names DP random forest,
DP naive Bayes and DP logistic regression (§3.2, §8.2.2), which it takes from diffprivlib.  The
estimators built on :class:`DiffprivlibClassifier` train a diffprivlib model on the matrix that the
public :class:`~pubsubml.schema.FeatureSchema` encodes, so every bound handed to diffprivlib is
public and diffprivlib never computes one from the data.

:func:`to_sklearn_base` copies a fitted diffprivlib model into its scikit-learn base class, which
skl2onnx can convert to ONNX.
"""

from __future__ import annotations

import copy
from abc import ABCMeta, abstractmethod
from collections.abc import Sequence
from typing import Any, Self

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin

from pubsubml.errors import InvalidPrivacyParameterError, LabelError
from pubsubml.learners.base import SchemaInputMixin, check_labels
from pubsubml.privacy.accountants import check_epsilon
from pubsubml.privacy.events import DPEvent
from pubsubml.privacy.noise import check_noise_seed
from pubsubml.schema import FeatureSchema

__all__ = [
    "DiffprivlibClassifier",
    "resolve_public_bounds",
    "to_sklearn_base",
]


def resolve_public_bounds(
    bounds: tuple[Any, Any] | None, schema: FeatureSchema | None, n_encoded: int
) -> tuple[np.ndarray, np.ndarray]:
    """The public per-column bounds of the encoded matrix handed to diffprivlib.

    Parameters
    ----------
    bounds : (lower, upper) or None
        Explicit public bounds of the encoded columns (scalars or arrays of shape (n_encoded,)).
        ``None`` takes [0, 1] for every column, which holds by construction when a schema encodes
        the input.
    schema : FeatureSchema or None
    n_encoded : int
        Number of encoded columns.

    Returns
    -------
    lower, upper : ndarray of shape (n_encoded,)

    Raises
    ------
    InvalidPrivacyParameterError
        When neither a schema nor bounds are given (diffprivlib would read the bounds off the
        private data), or on malformed bounds.

    Examples
    --------
    >>> lo, hi = resolve_public_bounds(None, FeatureSchema.numeric(["a", "b"]), 2)
    >>> lo.tolist(), hi.tolist()
    ([0.0, 0.0], [1.0, 1.0])
    """
    if bounds is None:
        if schema is None:
            raise InvalidPrivacyParameterError(
                "without a schema, give the public bounds=(lower, upper) of the input columns: "
                "bounds computed from the training data would leak it"
            )
        return np.zeros(n_encoded), np.ones(n_encoded)
    try:
        lower_raw, upper_raw = bounds
        lower = np.broadcast_to(np.asarray(lower_raw, dtype=np.float64), (n_encoded,)).copy()
        upper = np.broadcast_to(np.asarray(upper_raw, dtype=np.float64), (n_encoded,)).copy()
    except (TypeError, ValueError) as exc:
        raise InvalidPrivacyParameterError(
            f"bounds must be (lower, upper) with scalars or arrays of length {n_encoded}: {exc}"
        ) from exc
    if not (np.all(np.isfinite(lower)) and np.all(np.isfinite(upper)) and np.all(lower < upper)):
        raise InvalidPrivacyParameterError(
            "bounds must be finite with lower < upper in every column"
        )
    return lower, upper


class DiffprivlibClassifier(SchemaInputMixin, ClassifierMixin, BaseEstimator, metaclass=ABCMeta):
    """Base of the classifiers trained by diffprivlib on the schema-encoded matrix.

    Subclasses store their parameters in a keyword-only ``__init__`` (at least ``schema``,
    ``classes``, ``epsilon`` and ``random_state``) and implement :meth:`_train`.

    Attributes
    ----------
    estimator_ : diffprivlib estimator
        The fitted diffprivlib model, trained on the encoded matrix; its ``classes_`` are the
        declared labels, so it predicts them directly.  :func:`to_sklearn_base` copies it into its
        scikit-learn base class for export.
    classes_ : ndarray of shape (n_classes,)
        The declared public classes, in the declared order (the columns of ``predict_proba``).
    epsilon_, delta_ : float
        The (ε, 0) guarantee of the model (diffprivlib's mechanisms are pure ε-DP).
    privacy_events_ : list of DPEvent
        One ``DPEvent(mechanism="approx_dp", epsilon=ε, delta=0, neighbouring="replace_one")``
        per diffprivlib mechanism: the guarantee for data sets that differ in one record's value,
        label included (replace-one neighbours).
    noise_ : {"secure", "seeded"}
        ``"seeded"`` when ``noise_seed`` was set (a simulation), else ``"secure"``.
    schema_ : FeatureSchema or None
    n_features_in_ : int

    Notes
    -----
    Some diffprivlib mechanisms are calibrated for add/remove neighbours: a noisy histogram of
    class counts (naive Bayes) or a permute-and-flip choice of a leaf's label with a *monotonic*
    utility (random forest).  Replacing a record's label moves two counts at once, so their
    replace-one guarantee is 2ε.  Such subclasses set :attr:`_replace_one_factor` = 2: diffprivlib
    runs at ε/2 and the model's replace-one ε is twice what diffprivlib recorded.  A privacy
    audit with replace-one neighbours (:func:`pubsubml.audit.diffprivlib.audit_diffprivlib`)
    measured the forest's leaves above ε before this correction.
    """

    schema: FeatureSchema | None
    classes: Sequence[Any] | None
    epsilon: float
    random_state: Any
    noise_seed: int | None
    #: Replace-one ε per unit of ε diffprivlib records (2 for add/remove-calibrated mechanisms).
    _replace_one_factor: float = 1.0

    @abstractmethod
    def _train(self, Z: np.ndarray, codes: np.ndarray, n_classes: int, epsilon: float) -> Any:
        """Fit and return the diffprivlib model on encoded ``Z`` and label codes 0..K-1."""

    def fit(self, X: Any, y: Any) -> Self:
        """Train the DP model; nothing changes if any check fails.

        Parameters
        ----------
        X : DataFrame or array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,), labels among ``classes``

        Returns
        -------
        self

        Raises
        ------
        InvalidPrivacyParameterError
            ε ≤ 0 or not finite, or public bounds missing without a schema.
        LabelError
            ``classes`` not declared, or labels outside them.
        DataValidationError
            NaN or infinite values, or input that does not match the schema.
        """
        check_epsilon(self.epsilon)
        epsilon = float(self.epsilon)
        noise = check_noise_seed(getattr(self, "noise_seed", None))
        if self.classes is None:
            raise LabelError(
                f"{type(self).__name__} needs the public label set, e.g. classes=[0, 1]: reading "
                "it from the training labels would leak which labels occur"
            )
        Z = self._encode_new(X)
        classes_, codes = check_labels(y, self.classes, Z.shape[0])
        factor = self._replace_one_factor
        model = self._train(Z, codes, len(classes_), epsilon / factor)
        # What the mechanisms spent, as diffprivlib's own accountant for this fit recorded it,
        # in replace-one ε.
        spent = [(factor * float(e), float(d)) for e, d in model.accountant.spent_budget]
        total_epsilon, total_delta = (float(v) for v in model.accountant.total())
        total_epsilon *= factor
        if not spent or total_epsilon > epsilon * (1 + 1e-9) or total_delta > 0:
            raise InvalidPrivacyParameterError(
                f"{type(self).__name__}: diffprivlib recorded spends {spent} for a requested "
                f"pure ε = {epsilon}; refusing to report a guarantee that did not run"
            )
        model.classes_ = classes_
        self._commit_input(X, Z)
        self.estimator_ = model
        self.classes_ = classes_
        self.epsilon_ = total_epsilon
        self.delta_ = 0.0
        self.privacy_events_ = [
            DPEvent(mechanism="approx_dp", epsilon=e, delta=0.0, neighbouring="replace_one")
            for e, _ in spent
        ]
        self.noise_ = noise
        return self

    def planned_privacy_events(self, n_samples: int, n_features: int) -> list[DPEvent]:
        """An upper bound of what a ``fit`` will spend, for a budget check before training.

        The same interface as the DP-SGD learners' (``n_samples`` and ``n_features`` do not
        change the bound: diffprivlib's mechanisms spend the model's ε whatever the data).

        One pure ``approx_dp`` event at the model's ε (replace-one): the fit records one event per
        diffprivlib mechanism, whose ε add up to at most this one, and composes no worse.

        Raises
        ------
        InvalidPrivacyParameterError
            ε ≤ 0 or not finite.
        """
        check_epsilon(self.epsilon)
        return [
            DPEvent(
                mechanism="approx_dp",
                epsilon=float(self.epsilon),
                delta=0.0,
                neighbouring="replace_one",
            )
        ]

    def predict_proba(self, X: Any) -> np.ndarray:
        """Class probabilities, shape (n_samples, n_classes), columns in ``classes_`` order."""
        Z = self._encode_predict(X)
        return np.asarray(self.estimator_.predict_proba(Z), dtype=np.float64)

    def predict(self, X: Any) -> np.ndarray:
        """Predicted labels, shape (n_samples,)."""
        Z = self._encode_predict(X)
        return np.asarray(self.estimator_.predict(Z))


def _is_sklearn_class(cls: type) -> bool:
    return cls.__module__.split(".")[0] == "sklearn"


def _is_diffprivlib_estimator(value: Any) -> bool:
    return (
        isinstance(value, BaseEstimator) and type(value).__module__.split(".")[0] == "diffprivlib"
    )


def _copy_value(value: Any) -> Any:
    if _is_diffprivlib_estimator(value):
        return to_sklearn_base(value)
    if isinstance(value, list):
        return [_copy_value(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_copy_value(v) for v in value)
    return copy.deepcopy(value)


def to_sklearn_base(estimator: Any) -> Any:
    """Copy a (fitted) diffprivlib estimator into its scikit-learn base class.

    The copy has the scikit-learn class's parameters and every public fitted attribute (names
    ending in ``_``), including nested diffprivlib estimators such as a forest's trees, so it
    predicts exactly as the original and skl2onnx can convert it.  diffprivlib-only parameters
    (``epsilon``, ``bounds``, ``accountant``, ...) are dropped.  Any other estimator, e.g. a
    plain scikit-learn one, is returned unchanged.

    Parameters
    ----------
    estimator : estimator
        Typically the ``estimator_`` of a pubsubml DP classifier or of a
        :class:`~pubsubml.learners.local.LocalModel`.

    Returns
    -------
    estimator of the first scikit-learn class in ``type(estimator).__mro__``

    Examples
    --------
    >>> from diffprivlib.models import GaussianNB
    >>> type(to_sklearn_base(GaussianNB(epsilon=1.0)))
    <class 'sklearn.naive_bayes.GaussianNB'>
    """
    if not _is_diffprivlib_estimator(estimator):
        return estimator
    base = next(c for c in type(estimator).__mro__ if _is_sklearn_class(c))
    param_names = list(base().get_params(deep=False))
    params = {k: _copy_value(getattr(estimator, k)) for k in param_names if hasattr(estimator, k)}
    out = base(**params)
    private_params = set(estimator.get_params(deep=False)) - set(param_names)
    for key, value in vars(estimator).items():
        if key.endswith("_") and not key.startswith("_") and key not in private_params:
            setattr(out, key, _copy_value(value))
    return out
