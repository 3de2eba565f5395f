"""DP random forest (random splits, noisy leaf labels, via diffprivlib) with public bounds."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from diffprivlib.accountant import BudgetAccountant
from diffprivlib.models import RandomForestClassifier

from pubsubml.learners.diffprivlib_models import DiffprivlibClassifier, resolve_public_bounds
from pubsubml.schema import FeatureSchema

__all__ = ["DPRandomForestClassifier"]


class DPRandomForestClassifier(DiffprivlibClassifier):
    """ε-DP random forest classifier (diffprivlib's forest of random trees).

    The DP random forest of pubsub-ml.txt §3.2 (reference [36]).  Trees split on random features
    at random thresholds drawn within the public bounds, so only the leaf labels touch the data;
    each tree sees a disjoint part of the rows and spends the full ε on its leaves (parallel
    composition, pubsub-ml.txt §3.1 Theorem 1).

    Parameters
    ----------
    schema : FeatureSchema, optional
        Public schema; encoded columns lie in [0, 1], which become diffprivlib's bounds.
    classes : sequence
        Public label set, required; classes without training examples are allowed.
    epsilon : float, default=1.0
        Privacy budget ε of the model.
    n_estimators : int, default=10
    max_depth : int, default=5
    bounds : (lower, upper), optional
        Public bounds of the encoded columns; default [0, 1] with a schema, required without one.
    shuffle : bool, default=True
        Assign rows to trees at random (data-independent, so free of privacy cost); with
        ``False`` rows go to trees in input order, which starves trees of classes when the rows
        are sorted by label.
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
    estimator_ : diffprivlib.models.RandomForestClassifier
        Fitted model on the encoded matrix; ``classes_`` are the declared labels.
    classes_, epsilon_, delta_, privacy_events_, schema_, n_features_in_
        See :class:`~pubsubml.learners.diffprivlib_models.DiffprivlibClassifier`.

    Raises
    ------
    InvalidPrivacyParameterError
        From ``fit``: ε ≤ 0, or no ``bounds`` without a schema.
    LabelError
        From ``fit``: no declared ``classes``, or labels outside them.

    Notes
    -----
    The split of rows over trees depends on the number of rows, which diffprivlib treats as
    public: the guarantee is ε-DP for data sets of equal size that differ in one record.
    ``predict_proba`` is the fraction of trees voting for each class.

    References
    ----------
    pubsub-ml.txt §3.1 (DP, parallel composition), §3.2 (Algorithm 1 and reference [36]).

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[0.1, 0.9], [0.2, 0.8], [0.9, 0.1], [0.8, 0.2]])
    >>> clf = DPRandomForestClassifier(classes=[0, 1, 2], bounds=(0, 1), n_estimators=2,
    ...                                random_state=0).fit(X, [0, 0, 1, 1])
    >>> clf.predict_proba(X).shape
    (4, 3)
    """

    _replace_one_factor = 2.0  # add/remove-calibrated counts (see DiffprivlibClassifier)

    def __init__(
        self,
        *,
        schema: FeatureSchema | None = None,
        classes: Sequence[Any] | None = None,
        epsilon: float = 1.0,
        n_estimators: int = 10,
        max_depth: int = 5,
        bounds: tuple[Any, Any] | None = None,
        shuffle: bool = True,
        random_state: Any = None,
        noise_seed: int | None = None,
    ) -> None:
        self.schema = schema
        self.classes = classes
        self.epsilon = epsilon
        self.n_estimators = n_estimators
        self.max_depth = max_depth
        self.bounds = bounds
        self.shuffle = shuffle
        self.random_state = random_state
        self.noise_seed = noise_seed

    def _train(self, Z: np.ndarray, codes: np.ndarray, n_classes: int, epsilon: float) -> Any:
        model = RandomForestClassifier(
            n_estimators=self.n_estimators,
            epsilon=epsilon,
            bounds=resolve_public_bounds(self.bounds, self.schema, Z.shape[1]),
            classes=np.arange(n_classes),
            max_depth=self.max_depth,
            shuffle=self.shuffle,
            random_state=self.noise_seed,
            accountant=BudgetAccountant(),
        )
        return model.fit(Z, codes)
