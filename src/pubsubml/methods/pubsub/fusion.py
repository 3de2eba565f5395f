"""Step 4 of CUSTOMIZE: the fusion model f_c, trained on O^s (pubsub-ml.txt §4 Step 4).

pubsub-ml.txt Eq. 3 trains f_c on O^s = {(m(x), y)}; §7.2 makes f_c the input layer fully connected
to the output layer (``fusion_model="linear"``; ``"forest"`` is pfl-stacking.txt §4's meta-model;
:func:`make_fusion` builds f_c).  On DP publishers that design loses to the own model: a DP model's
probabilities are compressed towards the prior, a fully connected layer on probabilities with a
fixed penalty cannot amplify them, and with a few hundred rows it can also over-weight a model
that carries nothing.  :class:`StackedFusion` is a weighted logarithmic opinion pool of the
models' log-odds (Genest & Zidek 1986; stacked generalisation, Wolpert 1992; Breiman 1996, whose
stacked regressions constrain weights the same way):

    logit_k(x) = a · z_own,k(x) + Σ_j w_j · z_j,k(x) + b_k        (classification)
    ŷ(x)       = a · o_own(x)   + Σ_j w_j · o_j(x)   + b          (regression, scaled targets)

with z the centred log-probabilities of each model, one weight per model shared by all classes,
``a ≥ 0`` unpenalised and ``(w, b)`` L2-penalised.  The penalty λ is chosen by internal K-fold CV
on log-loss (squared error) over a grid that contains λ = ∞, which is the own model itself
(a = 1, w = 0, b = 0).  Publishers that carry nothing are therefore shrunk to zero or, when even a
small weight does not pay on held-out rows, dropped altogether: the customized model falls back to
Own by construction, and ``fallback_`` says so: f_c can only add to the own model.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from scipy.optimize import lsq_linear, minimize
from scipy.special import log_softmax, softmax
from sklearn.base import BaseEstimator, clone
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.model_selection import KFold, StratifiedKFold
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted
from threadpoolctl import threadpool_limits

__all__ = [
    "DEFAULT_PENALTIES",
    "FUSION_MODELS",
    "PENALTY_RULES",
    "StackedFusion",
    "centred_log_odds",
    "choose_penalty",
    "fusion_kind",
    "make_fusion",
    "pooled_log_loss",
]

PENALTY_RULES: tuple[str, ...] = ("min", "1se")
"""How the CV losses choose λ: ``"1se"`` the strongest penalty within one standard error of the
best (Breiman et al. 1984, §3.4.3; Hastie, Tibshirani & Friedman 2009, §7.10), ``"min"`` the
best."""

DEFAULT_PENALTIES: tuple[float, ...] = (1e-4, 1e-3, 1e-2, 1e-1, 1.0, math.inf)
"""λ grid: per-row penalty strengths from negligible to one that leaves a weight of 1 costing as
much as a nat of mean log-loss, then ∞ (the own model alone)."""


def centred_log_odds(proba: np.ndarray, floor: float = 1e-3) -> np.ndarray:
    """Log-probabilities floored at ``floor`` and centred over the classes (last axis).

    For two classes the columns are ± half the logit; the centring removes the part that
    softmax ignores, so one weight per model scales its whole vote.
    """
    logp = np.log(np.clip(np.asarray(proba, dtype=np.float64), floor, 1.0))
    return logp - logp.mean(axis=-1, keepdims=True)


def choose_penalty(row_losses: dict[float, np.ndarray], rule: str = "min") -> float:
    """The penalty the held-out losses pick.

    Parameters
    ----------
    row_losses : dict of float to ndarray of shape (n_samples,)
        Each row's held-out loss at each λ (every row held out once).
    rule : {"min", "1se"}, default="min"
        ``"min"``: the λ with the lowest mean loss.  ``"1se"``: the largest λ whose mean loss
        exceeds the lowest by at most one standard error of the paired per-row difference
        (the one-standard-error rule; the pairing removes the rows' common difficulty).  On a
        few hundred rows the lowest CV loss is itself noisy; the rule keeps the simpler model,
        at the limit the own model alone (λ = ∞), unless the publishers' gain is larger than
        that noise.

    Returns
    -------
    float

    Examples
    --------
    >>> rows = {0.1: np.array([0.5, 0.7, 0.6, 0.8]), math.inf: np.array([0.55, 0.7, 0.6, 0.8])}
    >>> choose_penalty(rows, "min"), choose_penalty(rows, "1se")
    (0.1, inf)
    """
    means = {lam: float(v.mean()) for lam, v in row_losses.items()}
    low = min(means.values())
    # Ties (within float noise) go to the stronger penalty: the simpler model.
    best = max(lam for lam, v in means.items() if v <= low + 1e-12)
    if rule == "min":
        return best
    if rule != "1se":
        raise ValueError(f"unknown rule {rule!r}; choose one of {list(PENALTY_RULES)}")
    base = row_losses[best]
    n = len(base)

    def within(lam: float) -> bool:
        diff = row_losses[lam] - base
        se = float(diff.std(ddof=1) / math.sqrt(n)) if n > 1 else 0.0
        return float(diff.mean()) <= se + 1e-12

    return max(lam for lam in row_losses if lam >= best and within(lam))


def pooled_log_loss(
    Z: np.ndarray,
    onehot: np.ndarray,
    lam: float,
    pen: np.ndarray,
    *,
    difference: bool | None = None,
) -> Callable[[np.ndarray], tuple[float, np.ndarray]]:
    """The penalised log-loss of the pooled logits ``Z @ w + b`` and its gradient in (w, b).

    Parameters
    ----------
    Z : ndarray of shape (n, m, k)
        Meta-features in blocks (one block of ``k`` columns per model).
    onehot : ndarray of shape (n, k)
    lam : float
        Penalty ``λ/2 (Σ pen·w² + |b|²)``.
    pen : ndarray of shape (m,)
    difference : bool, optional
        Compute the logits from the difference of the two class columns (``k = 2`` only; the
        default there): softmax sees only that difference, so one (n, m) product replaces two
        rows per sample — the same loss and gradient from half the memory per evaluation, which
        bounds the fit when there are thousands of models.

    Returns
    -------
    callable
        ``theta -> (loss, gradient)`` with ``theta = concat(w, b)``.
    """
    n, m, k = Z.shape
    use_difference = k == 2 if difference is None else difference
    if use_difference and k != 2:
        raise ValueError(f"the difference form needs two classes, got {k}")
    if use_difference:
        flat = np.ascontiguousarray(Z[:, :, 0] - Z[:, :, 1])

        def pooled(w: np.ndarray) -> np.ndarray:
            return np.column_stack([flat @ w, np.zeros(n)])

        def back(resid: np.ndarray) -> np.ndarray:
            return np.asarray(flat.T @ resid[:, 0])  # the class-1 residual is its negative
    else:
        # (n·k, m): one row per (sample, class), so the pooled logits are one matrix product.
        flat = np.ascontiguousarray(Z.transpose(0, 2, 1).reshape(n * k, m))

        def pooled(w: np.ndarray) -> np.ndarray:
            return np.asarray(flat @ w).reshape(n, k)

        def back(resid: np.ndarray) -> np.ndarray:
            return np.asarray(flat.T @ resid.reshape(-1))

    def objective(theta: np.ndarray) -> tuple[float, np.ndarray]:
        w, b = theta[:m], theta[m:]
        logp = log_softmax(pooled(w) + b, axis=1)
        resid = (np.exp(logp) - onehot) / n
        loss = -np.sum(logp * onehot) / n + 0.5 * lam * (np.sum(pen * w * w) + b @ b)
        grad_w = back(resid) + lam * pen * w
        grad_b = resid.sum(axis=0) + lam * b
        return float(loss), np.concatenate([grad_w, grad_b])

    return objective


class StackedFusion(BaseEstimator):
    """f_c as a penalised, own-anchored pool of model outputs, penalty chosen by internal CV.

    Parameters
    ----------
    task : {"classification", "regression"}, default="classification"
    block_width : int, default=1
        Columns per model in the meta-features: the number of classes (classification) or 1.
    own_first : bool, default=True
        The first block is the own model: its weight is non-negative and unpenalised, and
        λ = ∞ returns it.  ``False``: every weight is penalised and ∞ is left out of the grid.
    penalties : sequence of float, optional
        The λ grid (default :data:`DEFAULT_PENALTIES`).
    cv : int, default=5
        Folds of the internal choice of λ (stratified for classification).
    rule : {"min", "1se"}, default="min"
        How the held-out losses choose λ (:func:`choose_penalty`): the lowest mean loss, or the
        one-standard-error rule, which falls back to the own model more often (fewer small
        losses, also fewer gains: see ``docs/customization.md``).
    random_state : int, RandomState or None

    Attributes
    ----------
    penalty_ : float
        The chosen λ (``inf`` when the model is the own model alone).
    cv_losses_ : dict of float to float
        Held-out mean log-loss (MSE) per λ.
    weights_ : ndarray of shape (n_models,)
        a then w.
    intercept_ : ndarray of shape (block_width,)
    coef_ : ndarray of shape (block_width, n_models * block_width)
        The same weights as a linear layer on the meta-features (class k reads column k of every
        block), for contribution scores.
    classes_ : ndarray (classification)
    fallback_ : bool
        Whether the fusion is the own model alone (λ = ∞ chosen).

    References
    ----------
    pubsub-ml.txt §4 (Eq. 3), §7.2; Wolpert (1992), "Stacked generalization"; Breiman (1996),
    "Stacked regressions" (non-negative combination weights); Genest & Zidek (1986), logarithmic
    opinion pools.
    """

    def __init__(
        self,
        *,
        task: str = "classification",
        block_width: int = 1,
        own_first: bool = True,
        penalties: Sequence[float] | None = None,
        cv: int = 5,
        rule: str = "min",
        random_state: int | np.random.RandomState | None = None,
    ) -> None:
        self.task = task
        self.block_width = block_width
        self.own_first = own_first
        self.penalties = penalties
        self.cv = cv
        self.rule = rule
        self.random_state = random_state

    # ---- one fit at a given λ -------------------------------------------------------------
    def _blocks(self, M: np.ndarray) -> np.ndarray:
        k = int(self.block_width)
        if M.ndim != 2 or k < 1 or M.shape[1] % k:
            raise ValueError(f"meta-features of shape {M.shape} are not blocks of width {k}")
        return M.reshape(M.shape[0], M.shape[1] // k, k)

    def _own_only(self, n_models: int) -> tuple[np.ndarray, np.ndarray]:
        w = np.zeros(n_models)
        w[0] = 1.0
        return w, np.zeros(int(self.block_width))

    def _fit_clf(
        self, Z: np.ndarray, y: np.ndarray, lam: float, start: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        _, m, k = Z.shape
        if math.isinf(lam):
            return self._own_only(m)
        onehot = np.eye(k)[y]
        pen = np.ones(m)
        if self.own_first:
            pen[0] = 0.0
        objective = pooled_log_loss(Z, onehot, lam, pen)
        if start is None:
            start = np.concatenate(
                [self._own_only(m)[0] if self.own_first else np.zeros(m), np.zeros(k)]
            )
        bounds = [(0.0, None)] * m + [(None, None)] * k
        res = minimize(objective, start, jac=True, method="L-BFGS-B", bounds=bounds)
        return res.x[:m], res.x[m:]

    def _fit_reg(self, out: np.ndarray, y: np.ndarray, lam: float) -> tuple[np.ndarray, np.ndarray]:
        n, m = out.shape
        if math.isinf(lam):
            return self._own_only(m)
        pen = np.ones(m + 1)
        if self.own_first:
            pen[0] = 0.0
        design = np.hstack([out, np.ones((n, 1))])
        ridge = np.diag(np.sqrt(n * lam * pen))
        A = np.vstack([design, ridge[pen > 0]])
        rhs = np.concatenate([y, np.zeros(int(np.sum(pen > 0)))])
        lower = np.zeros(m + 1)
        lower[-1] = -np.inf
        res = lsq_linear(A, rhs, bounds=(lower, np.full(m + 1, np.inf)))
        return res.x[:m], res.x[m:]

    def _fit_at(
        self, M: np.ndarray, y: np.ndarray, lam: float, start: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """The weights at penalty ``lam``; ``start`` warm-starts the classification solver."""
        if self.task == "classification":
            return self._fit_clf(self._blocks(M), y, lam, start)
        return self._fit_reg(M, y, lam)

    def _raw(self, M: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
        if self.task == "classification":
            return np.einsum("nmk,m->nk", self._blocks(M), w) + b
        return M @ w + b[0]

    def _row_losses(self, M: np.ndarray, y: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Each row's log-loss (classification) or squared error (regression)."""
        raw = self._raw(M, w, b)
        if self.task == "classification":
            return np.asarray(-log_softmax(raw, axis=1)[np.arange(len(y)), y])
        return np.asarray((raw - y) ** 2)

    # ---- estimator API ----------------------------------------------------------------------
    def fit(self, M: Any, y: Any) -> StackedFusion:
        """Choose λ by internal CV, then fit the weights on all rows.

        Parameters
        ----------
        M : array-like of shape (n_samples, n_models * block_width)
            Centred log-odds (classification) or outputs on the scaled target (regression).
        y : array-like of shape (n_samples,)
            Class indices 0..block_width-1, or scaled targets.
        """
        if self.task not in ("classification", "regression"):
            raise ValueError(f"task must be 'classification' or 'regression', got {self.task!r}")
        M = np.asarray(M, dtype=np.float64)
        grid = [float(p) for p in (self.penalties or DEFAULT_PENALTIES)]
        if any(not p >= 0 for p in grid):
            raise ValueError(f"penalties must be >= 0, got {grid}")
        if not self.own_first:
            grid = [p for p in grid if not math.isinf(p)] or [1.0]
        if self.rule not in PENALTY_RULES:
            raise ValueError(f"unknown rule {self.rule!r}; choose one of {list(PENALTY_RULES)}")
        clf = self.task == "classification"
        y = np.asarray(y, dtype=np.int64 if clf else np.float64).reshape(-1)
        if clf and self.block_width == 1:
            raise ValueError("classification needs block_width = the number of classes")
        # The products here are small (rows × models): one BLAS thread avoids spin-waiting.
        with threadpool_limits(limits=1, user_api="blas"):
            return self._fit(M, y, grid, clf)

    def _fit(self, M: np.ndarray, y: np.ndarray, grid: list[float], clf: bool) -> StackedFusion:
        rs = check_random_state(self.random_state)
        folds = int(self.cv)
        can_stratify = clf and np.bincount(y, minlength=self.block_width).min() >= folds
        splitter: Any = (
            StratifiedKFold(folds, shuffle=True, random_state=rs)
            if can_stratify
            else KFold(folds, shuffle=True, random_state=rs)
        )
        losses: dict[float, float] = {}
        if len(grid) > 1 and len(y) >= 2 * folds:
            splits = list(splitter.split(M, y))
            # From the strongest penalty down, each fold's solution warm-starts the next λ.
            warm: list[np.ndarray | None] = [None] * len(splits)
            rows: dict[float, np.ndarray] = {}
            for lam in sorted(grid, reverse=True):
                held = np.empty(len(y))
                for i, (train, test) in enumerate(splits):
                    w, b = self._fit_at(M[train], y[train], lam, warm[i])
                    warm[i] = np.concatenate([w, b])
                    held[test] = self._row_losses(M[test], y[test], w, b)
                rows[lam] = held
                losses[lam] = float(held.mean())
            penalty = choose_penalty(rows, self.rule)
        else:
            penalty = grid[-1] if len(grid) == 1 else max(grid)
        w, b = self._fit_at(M, y, penalty)
        k = int(self.block_width)
        self.penalty_ = penalty
        self.cv_losses_ = losses
        self.weights_ = w
        self.intercept_ = b
        self.coef_ = np.kron(w, np.eye(k)) if clf else w.reshape(1, -1)
        self.fallback_ = bool(self.own_first and math.isinf(penalty))
        if clf:
            self.classes_ = np.arange(k)
        self.n_features_in_ = M.shape[1]
        return self

    def decision_function(self, M: Any) -> np.ndarray:
        """The pooled logits (classification) or the scaled prediction (regression)."""
        check_is_fitted(self, "weights_")
        return self._raw(np.asarray(M, dtype=np.float64), self.weights_, self.intercept_)

    def predict_proba(self, M: Any) -> np.ndarray:
        """Class probabilities, shape (n_samples, block_width)."""
        if self.task != "classification":
            raise AttributeError("predict_proba is only available for classification")
        return np.asarray(softmax(self.decision_function(M), axis=1))

    def predict(self, M: Any) -> np.ndarray:
        """Class indices (classification) or scaled predictions (regression)."""
        raw = self.decision_function(M)
        return np.argmax(raw, axis=1) if self.task == "classification" else raw


# ---- the paper's fusion models and the choice of f_c -----------------------------------------
def _fusion_linear(task: str, seed: int) -> Any:
    """m(x) fully connected to the output layer (pubsub-ml.txt §7.2): softmax or linear."""
    if task == "classification":
        return LogisticRegression(C=1.0, max_iter=1000)
    return Ridge(alpha=1.0)


def _fusion_forest(task: str, seed: int) -> Any:
    """A random-forest meta-model (pfl-stacking.txt §4)."""
    cls = RandomForestClassifier if task == "classification" else RandomForestRegressor
    return cls(random_state=seed)


FUSION_MODELS: dict[str, Callable[[str, int], Any]] = {
    "forest": _fusion_forest,
    "linear": _fusion_linear,
}


def fusion_kind(spec: Any) -> str | None:
    """``"stacked"``, ``"linear"`` or ``"forest"`` for a ``fusion_model``; None for an estimator.

    Raises
    ------
    ValueError
        An unknown name.
    """
    if isinstance(spec, StackedFusion):
        return "stacked"
    if isinstance(spec, str):
        if spec != "stacked" and spec not in FUSION_MODELS:
            raise ValueError(
                f"unknown fusion_model {spec!r}; choose 'stacked' or one of {sorted(FUSION_MODELS)}"
            )
        return spec
    return None


def make_fusion(spec: Any, *, task: str, seed: int, width: int, has_own: bool) -> Any:
    """An unfitted f_c for ``fusion_model=spec`` on meta-features in blocks of ``width``.

    A ``StackedFusion`` instance keeps its options and takes its shape from the data; any other
    estimator is cloned, its ``random_state`` set to ``seed`` when unset.
    """
    if spec == "stacked":
        return StackedFusion(task=task, block_width=width, own_first=has_own, random_state=seed)
    if isinstance(spec, str):
        return FUSION_MODELS[spec](task, seed)
    est = clone(spec)
    if isinstance(est, StackedFusion):  # its options kept; its shape set from the data
        est.set_params(task=task, block_width=width, own_first=has_own)
    if "random_state" in est.get_params() and est.get_params()["random_state"] is None:
        est.set_params(random_state=seed)
    return est
