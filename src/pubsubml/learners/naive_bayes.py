"""DP Gaussian naive Bayes (Vaidya et al. 2013, via diffprivlib) with public bounds."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from diffprivlib.accountant import BudgetAccountant
from diffprivlib.models import GaussianNB

from pubsubml.errors import LabelError
from pubsubml.learners.diffprivlib_models import DiffprivlibClassifier, resolve_public_bounds
from pubsubml.schema import FeatureSchema

__all__ = ["DPGaussianNB"]


class DPGaussianNB(DiffprivlibClassifier):
    """ε-DP Gaussian naive Bayes (noisy class counts, means and variances, via diffprivlib).

    The DP naive Bayes of pubsub-ml.txt §3.2 (reference [44]) and the DP-Gaussian Naive Bayes
    publisher of §8.2.2.  ε is split in thirds: class counts, means, variances; the mean and
    variance budgets are split again over the encoded columns.

    Parameters
    ----------
    schema : FeatureSchema, optional
        Public schema; encoded columns lie in [0, 1], which become diffprivlib's bounds.
    classes : sequence
        Public label set, required; every declared class must occur in the training labels
        (see Notes).
    epsilon : float, default=1.0
        Privacy budget ε of the model.
    bounds : (lower, upper), optional
        Public bounds of the encoded columns (scalars or arrays); default [0, 1] with a schema,
        required without one.
    priors : array-like of shape (n_classes,), optional
        Public class priors; by default the priors are the noisy class frequencies.
    var_smoothing : float, default=1e-9
        Added to the variances for numerical stability.
    random_state : int, RandomState or None
        Kept for scikit-learn's conventions; diffprivlib draws everything it randomises (noise
        included) from one source, which ``noise_seed`` sets.
    noise_seed : int, optional
        Seeds diffprivlib's randomness, noise included, for simulations only (the model is then
        marked ``noise_ = "seeded"``; see :mod:`pubsubml.privacy.noise`).  ``None`` (the
        default): diffprivlib's mechanisms draw from ``secrets.SystemRandom``, the operating
        system's secure source.

    Attributes
    ----------
    estimator_ : diffprivlib.models.GaussianNB
        Fitted model on the encoded matrix; ``classes_`` are the declared labels.
    classes_, epsilon_, delta_, privacy_events_, schema_, n_features_in_
        See :class:`~pubsubml.learners.diffprivlib_models.DiffprivlibClassifier`.

    Raises
    ------
    InvalidPrivacyParameterError
        From ``fit``: ε ≤ 0, or no ``bounds`` without a schema.
    LabelError
        From ``fit``: no declared ``classes``, labels outside them, or a declared class that does
        not occur in ``y``.

    Notes
    -----
    diffprivlib draws noisy counts only for the labels present in ``y``; a declared class without
    training examples would keep a count of exactly zero, which reveals that no record has that
    label.  Such a fit is therefore refused with :class:`~pubsubml.errors.LabelError` (an error
    seen only by the data owner, nothing is released).  diffprivlib also fixes the sum of the
    noisy counts to the number of rows, which it treats as public: the guarantee is ε-DP for data
    sets of equal size that differ in one record.

    References
    ----------
    pubsub-ml.txt §3.1 (DP), §3.2 (Algorithm 1 and reference [44]), §8.2.2.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[0.1, 0.9], [0.2, 0.8], [0.9, 0.1], [0.8, 0.2]])
    >>> clf = DPGaussianNB(classes=["a", "b"], bounds=(0, 1), random_state=0).fit(X, list("aabb"))
    >>> clf.predict_proba(X).shape, clf.classes_.tolist()
    ((4, 2), ['a', 'b'])
    """

    _replace_one_factor = 2.0  # add/remove-calibrated counts (see DiffprivlibClassifier)

    def __init__(
        self,
        *,
        schema: FeatureSchema | None = None,
        classes: Sequence[Any] | None = None,
        epsilon: float = 1.0,
        bounds: tuple[Any, Any] | None = None,
        priors: Sequence[float] | None = None,
        var_smoothing: float = 1e-9,
        random_state: Any = None,
        noise_seed: int | None = None,
    ) -> None:
        self.schema = schema
        self.classes = classes
        self.epsilon = epsilon
        self.bounds = bounds
        self.priors = priors
        self.var_smoothing = var_smoothing
        self.random_state = random_state
        self.noise_seed = noise_seed

    def _train(self, Z: np.ndarray, codes: np.ndarray, n_classes: int, epsilon: float) -> Any:
        bounds = resolve_public_bounds(self.bounds, self.schema, Z.shape[1])
        absent = sorted(set(range(n_classes)) - set(np.unique(codes).tolist()))
        if absent:
            missing = [np.asarray(list(self.classes or ()))[i].item() for i in absent]
            raise LabelError(
                f"declared classes {missing} do not occur in y: diffprivlib's naive Bayes cannot "
                "hide the absence of a class; drop them from classes or use another learner"
            )
        model = GaussianNB(
            epsilon=epsilon,
            bounds=bounds,
            priors=None if self.priors is None else np.asarray(self.priors, dtype=np.float64),
            var_smoothing=self.var_smoothing,
            random_state=self.noise_seed,
            accountant=BudgetAccountant(),
        )
        return model.fit(np.asarray(Z, dtype=np.float64), codes)
