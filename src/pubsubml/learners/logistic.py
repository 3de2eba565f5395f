"""DP logistic regression (objective perturbation, diffprivlib) over the public label set."""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any, Self

import numpy as np
from diffprivlib.accountant import BudgetAccountant
from diffprivlib.models import LogisticRegression
from diffprivlib.models.logistic_regression import _logistic_regression_path
from diffprivlib.utils import check_random_state

from pubsubml.errors import InvalidPrivacyParameterError
from pubsubml.learners.diffprivlib_models import DiffprivlibClassifier
from pubsubml.schema import FeatureSchema

__all__ = ["DPLogisticRegression", "fit_one_vs_rest"]


class DPLogisticRegression(DiffprivlibClassifier):
    """ε-DP logistic regression (one-vs-rest objective perturbation, via diffprivlib).

    One of the DP model types a publisher may run (pubsub-ml.txt §3.2, Algorithm 1; the
    DP-Logistic Regression publisher of §8.2.2).

    Parameters
    ----------
    schema : FeatureSchema, optional
        Public schema; inputs are encoded into [0, 1] per numeric feature and one-hot per
        categorical one (exactly one 1), so the L2 norm of an encoded row is at most
        ``sqrt(len(schema))``, the square root of the number of features, however many one-hot
        columns the categorical features have.
    classes : sequence
        Public label set, required: ``predict_proba`` has one column per declared class, in this
        order, whether or not a class occurs in the training labels.
    epsilon : float, default=1.0
        Privacy budget ε of the whole model, split evenly over the one-vs-rest problems (one for
        two classes, K otherwise).
    data_norm : float, optional
        Public bound on the L2 norm of an encoded row; rows beyond it are clipped.  Defaults to
        ``sqrt(len(schema))`` (the exact bound above); required without a schema.  The rows are
        divided by it before training, so diffprivlib sees rows of norm at most 1.
    C : float, default=1.0
        Inverse regularization strength.
    fit_intercept : bool, default=True
        Add an intercept, fitted as the weight of a constant public feature and regularised
        like every other weight (objective perturbation's guarantee needs a strongly convex
        regulariser on all parameters: see Notes).
    max_iter : int, default=100
    tol : float, default=1e-4
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
    estimator_ : diffprivlib.models.LogisticRegression
        Fitted model that predicts on the encoded matrix; ``classes_`` are the declared labels.
        It was trained on the encoded rows divided by ``data_norm_`` (its ``data_norm`` is 1) and
        that scale is folded into ``coef_``, so it, its scikit-learn copy and its ONNX export
        predict on the encoded matrix unchanged.
    data_norm_ : float
        The public row-norm bound the encoded rows were divided by.
    n_iter_ : ndarray of shape (1,) or (n_classes,)
        L-BFGS iterations of each one-vs-rest problem.
    classes_, epsilon_, delta_, privacy_events_, schema_, n_features_in_
        See :class:`~pubsubml.learners.diffprivlib_models.DiffprivlibClassifier`.

    Raises
    ------
    InvalidPrivacyParameterError
        From ``fit``: ε ≤ 0, or no ``data_norm`` without a schema.
    LabelError
        From ``fit``: no declared ``classes``, or labels outside them.

    Notes
    -----
    diffprivlib's objective perturbation adds noise and slack that grow with its ``data_norm``:
    with ``sqrt(n_encoded)`` a schema with many one-hot columns drowned the model (below the
    majority rate at ε = 1).  Dividing the rows by the exact public bound and training at
    ``data_norm=1`` keeps the guarantee (every row still has norm ≤ 1, from public bounds only)
    and the model useful.

    Chaudhuri, Monteleoni & Sarwate's proof (Theorem 6; also Kifer, Smith & Thakurta 2012)
    needs the regulariser to be strongly convex in *every* parameter.  diffprivlib's
    ``fit_intercept=True`` leaves the intercept out of scikit-learn's L2 term (it only widens
    the row-norm bound to ``sqrt(data_norm² + 1)``), so that objective is flat along the
    intercept and the stated ε is not covered by the proof.  Here diffprivlib always runs with
    ``fit_intercept=False`` on rows ``[z, 1] / sqrt(bound² + 1)`` (norm ≤ 1): the intercept is
    the constant feature's weight, inside the regulariser, and the guarantee applies as proved.

    Each one-vs-rest problem is solved by diffprivlib's ``_logistic_regression_path`` exactly
    as ``diffprivlib.models.LogisticRegression.fit`` does, but over the declared classes rather
    than the labels present in ``y``: a class absent from the training data still gets its
    (noisy) model, so the shape of the output does not reveal which labels occur.  diffprivlib's
    objective perturbation treats the number of rows as public: the guarantee is ε-DP for data
    sets of equal size that differ in one record.

    References
    ----------
    pubsub-ml.txt §3.1 (DP), §3.2 (Algorithm 1, publishing phase), §8.2.2 (model heterogeneity);
    Chaudhuri, Monteleoni & Sarwate, "Differentially private empirical risk minimization", JMLR
    2011 (objective perturbation assumes rows of norm at most 1).

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[0.1, 0.9], [0.2, 0.8], [0.9, 0.1], [0.8, 0.2]])
    >>> clf = DPLogisticRegression(classes=[0, 1], data_norm=1.5, random_state=0).fit(X, [0, 0, 1, 1])
    >>> clf.predict_proba(X).shape, clf.epsilon_, clf.data_norm_, clf.estimator_.data_norm
    ((4, 2), 1.0, 1.5, 1.0)
    """

    def __init__(
        self,
        *,
        schema: FeatureSchema | None = None,
        classes: Sequence[Any] | None = None,
        epsilon: float = 1.0,
        data_norm: float | None = None,
        C: float = 1.0,
        fit_intercept: bool = True,
        max_iter: int = 100,
        tol: float = 1e-4,
        random_state: Any = None,
        noise_seed: int | None = None,
    ) -> None:
        self.schema = schema
        self.classes = classes
        self.epsilon = epsilon
        self.data_norm = data_norm
        self.C = C
        self.fit_intercept = fit_intercept
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state
        self.noise_seed = noise_seed

    def _public_data_norm(self) -> float:
        if self.data_norm is None:
            if self.schema is None:
                raise InvalidPrivacyParameterError(
                    "without a schema, give the public data_norm (max L2 norm of a row): a norm "
                    "computed from the training data would leak it"
                )
            # Each numeric feature encodes into [0, 1] and each categorical one into a one-hot
            # block with a single 1, so ‖z‖² ≤ the number of features.
            return math.sqrt(len(self.schema))
        norm = self.data_norm
        if isinstance(norm, bool) or not isinstance(norm, (int, float)) or not 0 < norm < math.inf:
            raise InvalidPrivacyParameterError(
                f"data_norm must be a finite number > 0, got {norm!r}"
            )
        return float(norm)

    def _train(self, Z: np.ndarray, codes: np.ndarray, n_classes: int, epsilon: float) -> Any:
        Z = np.asarray(Z, dtype=np.float64)
        bound = self._public_data_norm()
        # The intercept is the weight of a constant public feature, regularised like the others:
        # rows [z, 1] of norm ≤ sqrt(bound² + 1), scaled to norm ≤ 1 (see Notes).
        scale = 1.0 / (math.hypot(bound, 1.0) if self.fit_intercept else bound)
        X = Z * scale
        if self.fit_intercept:
            X = np.hstack([X, np.full((len(Z), 1), scale)])
        model = LogisticRegression(
            epsilon=epsilon,
            data_norm=1.0,
            tol=self.tol,
            C=self.C,
            fit_intercept=False,
            max_iter=self.max_iter,
            random_state=self.noise_seed,
            accountant=BudgetAccountant(),
        )
        model = fit_one_vs_rest(model, X, codes, n_classes)
        w = model.coef_ * scale  # w·(s·z) = (s·w)·z: predicts on the encoded rows
        if self.fit_intercept:
            model.coef_, model.intercept_ = w[:, :-1], w[:, -1]
            model.set_params(fit_intercept=True)  # the fitted function has an intercept
        else:
            model.coef_ = w
        model.n_features_in_ = Z.shape[1]
        return model

    def fit(self, X: Any, y: Any) -> Self:
        """Train the DP model (see :meth:`DiffprivlibClassifier.fit`); also sets ``data_norm_``
        and ``n_iter_``, the L-BFGS iterations of each one-vs-rest problem, shape (1,) or
        (n_classes,)."""
        super().fit(X, y)
        self.data_norm_ = self._public_data_norm()
        self.n_iter_ = self.estimator_.n_iter_
        return self


def fit_one_vs_rest(model: Any, Z: np.ndarray, codes: np.ndarray, n_classes: int) -> Any:
    """Fit a diffprivlib ``LogisticRegression`` on codes 0..K-1 over all K declared classes.

    Mirrors ``diffprivlib.models.LogisticRegression.fit`` (diffprivlib 0.6.6) step for step,
    with ``classes_ = arange(K)`` in place of ``np.unique(y)``; when every class occurs in
    ``codes`` the result is identical to diffprivlib's own ``fit`` with the same seed.

    Parameters
    ----------
    model : diffprivlib.models.LogisticRegression
        Unfitted, with a public ``data_norm``.
    Z : ndarray of shape (n_samples, n_features)
    codes : ndarray of shape (n_samples,), int labels in [0, n_classes)
    n_classes : int, at least 2

    Returns
    -------
    model, fitted
    """
    model._validate_params()
    model.accountant.check(model.epsilon, 0)
    X = np.ascontiguousarray(Z, dtype=np.float64)
    X = model._clip_to_norm(X, model.data_norm)
    random_state = check_random_state(model.random_state)
    positives = [1] if n_classes == 2 else list(range(n_classes))
    rows = []
    n_iter = []
    for pos_class in positives:
        with warnings.catch_warnings():
            # diffprivlib 0.6.6 passes L-BFGS-B's `iprint`, deprecated in SciPy 1.17 (harmless).
            warnings.filterwarnings("ignore", message=".*`iprint`", category=DeprecationWarning)
            coefs, _, iters = _logistic_regression_path(
                X,
                codes,
                epsilon=model.epsilon / len(positives),
                data_norm=model.data_norm,
                pos_class=pos_class,
                Cs=[model.C],
                fit_intercept=model.fit_intercept,
                max_iter=model.max_iter,
                tol=model.tol,
                verbose=0,
                coef=None,
                random_state=random_state,
                check_input=False,
            )
        rows.append(coefs[0])
        n_iter.append(iters[0])
    weights = np.asarray(rows)
    if model.fit_intercept:
        model.coef_ = weights[:, :-1]
        model.intercept_ = weights[:, -1]
    else:
        model.coef_ = weights
        model.intercept_ = np.zeros(len(positives))
    model.n_iter_ = np.asarray(n_iter, dtype=np.int32)
    model.classes_ = np.arange(n_classes)
    model.n_features_in_ = X.shape[1]
    model.accountant.spend(model.epsilon, 0)
    return model
