"""Asynchronous DP learning with Laplace-noised gradient queries (Algorithm 1).

N data owners each hold a private data set D_i; a learner keeps a central model θ_L and one copy θ_i
per owner.  At iteration k one owner i_k (the first whose rate-1 Poisson clock fires, i.e. uniformly
at random) answers the gradient query of Eq. 3 at θ̂_k = (θ_L + θ_i)/2 (Eq. 6) with Laplace noise
(Eq. 4, Theorem 1), and the learner updates θ_i (Eq. 5) and θ_L (Eq. 7) by projected steps onto
Θ = {‖θ‖∞ ≤ θ_max}.  Linear regression with squared loss ℓ = (y − θᵀx)² and ridge regularizer
g(θ) = λ‖θ‖² (strongly convex with σ = 2λ) is the model of the paper's experiments (§5.1.2).

The owner's answering function (:meth:`DataOwner.answer`, built on :func:`answer_gradient_query`)
and the learner's update (:meth:`AsyncDPLearner.update`) are the same objects in the simulation
(:func:`pubsubml.methods.async_dp.simulation.simulate_async_dp`) and in the real multi-process
mode (:mod:`pubsubml.methods.async_dp.peers`).

References
----------
async-dp-cost-of-privacy.txt §3 (Eq. 1–7, Definition 1, Theorem 1, Algorithm 1), Appendix A (proof
of Theorem 1), Appendix B (parameter choices η = 1/(2N), α_L = α_i/N = α/σ, α = ρ/T²).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike

from pubsubml.errors import (
    DataValidationError,
    InvalidPrivacyParameterError,
    PrivacyBudgetExceededError,
)
from pubsubml.methods.async_dp.oracle import SquaredLossOracle
from pubsubml.methods.async_dp.theory import (
    StepSizes,
    check_count,
    check_positive,
    check_theta,
    choose_rho,
    gradient_norm_bound,
    laplace_noise_scale,
    project,
    step_sizes,
)
from pubsubml.privacy.accountants import compute_epsilon
from pubsubml.privacy.events import DPEvent
from pubsubml.privacy.ledger import PrivacyLedger, Release
from pubsubml.privacy.mechanisms import laplace_mechanism

__all__ = [
    "AsyncDPLearner",
    "DataOwner",
    "SquaredLossOracle",
    "StepSizes",
    "answer_gradient_query",
    "choose_rho",
    "gradient_norm_bound",
    "laplace_noise_scale",
    "project",
    "step_sizes",
]


def answer_gradient_query(
    theta: ArrayLike,
    oracle: SquaredLossOracle,
    *,
    epsilon: float,
    horizon: int,
    rng: np.random.Generator | None = None,
) -> tuple[np.ndarray, DPEvent]:
    """The DP answer of Eq. 4: Q_i(D_i; θ) of Eq. 3 plus Laplace noise of scale 2ΞT/(n_i ε_i).

    Parameters
    ----------
    theta : array-like of shape (p,) or (r, p)
        Query point(s) θ̂_k in Θ; r rows are r independent queries (replicate runs).
    oracle : SquaredLossOracle
        The owner's private data and clipping norm Ξ.
    epsilon : float
        ε_i, the owner's budget over the whole horizon.
    horizon : int
        T, the most answers the owner will ever give.
    rng : numpy.random.Generator, optional
        A seeded source, for simulations only; default: secure Laplace noise
        (:func:`~pubsubml.privacy.mechanisms.laplace_mechanism`).

    Returns
    -------
    answer : ndarray of shape like ``theta``
    event : DPEvent
        ``DPEvent(mechanism="laplace", noise_multiplier=T/ε_i, neighbouring="replace_one")`` for *one* answer (one row).

    Raises
    ------
    InvalidPrivacyParameterError
        On ε ≤ 0 or T < 1.
    DataValidationError
        If θ is not finite or lies outside Θ.

    Notes
    -----
    Every per-example gradient is clipped to L1 norm Ξ, so replacing one record changes the mean
    by at most 2Ξ/n_i in L1 (Appendix A), and Laplace noise of scale (2Ξ/n_i)/(ε_i/T) makes one
    answer (ε_i/T)-DP; T answers compose to ε_i-DP (Theorem 1).  The paper states Ξ as an L2 bound
    (Assumption 2); the Laplace mechanism needs the L1 sensitivity, which an L2 bound only gives up
    to a factor √p, hence the L1 clipping here.

    References
    ----------
    async-dp-cost-of-privacy.txt §3 Eq. 3–4, Theorem 1, Appendix A.
    """
    exact = oracle.mean_gradient(theta)
    per_answer = check_positive("epsilon", epsilon) / check_count("horizon", horizon)
    return laplace_mechanism(
        exact,
        sensitivity=oracle.sensitivity,
        epsilon=per_answer,
        rng=rng,
        neighbouring="replace_one",  # the sensitivity 2Ξ/n_i is over replace-one neighbours
    )


class DataOwner:
    """A data owner that answers gradient queries under its own ε_i over horizon T (Theorem 1).

    Parameters
    ----------
    site : str
        The owner's name (its ledger's site).
    X : array-like of shape (n_i, p)
        Private inputs, already encoded with public bounds.
    y : array-like of shape (n_i,)
        Private targets.
    epsilon : float
        ε_i for the whole horizon.
    horizon : int
        T: the owner answers at most T queries, each (ε_i/T)-DP.
    clip_norm : float
        Ξ, the L1 bound enforced on every per-example gradient.
    theta_max : float
        θ_max of Θ; queries outside Θ are refused.
    rng : numpy.random.Generator, optional
        A seeded noise source, for simulations only.  Default: secure Laplace noise that nobody
        can regenerate (:func:`~pubsubml.privacy.mechanisms.laplace_mechanism`).
    ledger_delta : float, default=1e-6
        δ at which the ledger reports its accountant ε (see Notes).
    ledger_backend : {"pld", "rdp"}, optional
        The ledger's accountant; default "pld" when one answer costs ε_i/T ≤ 0.1 and "rdp" above,
        where a PLD of the Laplace mechanism becomes too wide to compose at every answer.

    Attributes
    ----------
    answers_given : int
    event : DPEvent
        The DP event of one answer: ``DPEvent(mechanism="laplace", noise_multiplier=T/ε_i, neighbouring="replace_one")``.
    ledger : PrivacyLedger
        Every answer is charged here (one Laplace DPEvent) before it leaves the owner.

    Notes
    -----
    The budget is enforced with pure ε-DP basic composition, as in the paper: the owner refuses
    the (T + 1)-th query, and :meth:`spent_epsilon` is k·ε_i/T after k answers (ε_i after T).  This
    is exact for pure DP at δ = 0 and is the guarantee of Theorem 1.  The ledger also records every
    answer's DPEvent (Laplace, noise multiplier T/ε_i).  Its accountants answer a different question,
    an (ε, δ) guarantee at δ > 0: the PLD accountant cannot report δ = 0 (its pessimistic tail
    truncation leaves ε = ∞ there); at δ = 1e-6 it reports far less than ε_i after many answers
    (T = 1000 at ε_i = 1: ε ≈ 0.12) but up to ~1e-4·ε_i more for a few answers (grid rounding), and
    the RDP conversion can exceed ε_i by more.  The ledger's budget is therefore the accountant's ε
    of exactly T answers, so the ledger accepts the T answers the policy allows and refuses the
    next one as well.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> owner = DataOwner(site="bank", X=rng.uniform(-1, 1, (50, 2)), y=rng.uniform(-1, 1, 50),
    ...                   epsilon=1.0, horizon=2, clip_norm=4.0, theta_max=1.0, rng=rng)
    >>> owner.answer(np.zeros(2)).shape, owner.spent_epsilon()
    ((2,), 0.5)
    """

    def __init__(
        self,
        *,
        site: str,
        X: ArrayLike,
        y: ArrayLike,
        epsilon: float,
        horizon: int,
        clip_norm: float,
        theta_max: float,
        rng: np.random.Generator | None = None,
        ledger_delta: float = 1e-6,
        ledger_backend: Literal["pld", "rdp"] | None = None,
    ) -> None:
        self.site = str(site)
        self.epsilon = check_positive("epsilon", epsilon)
        self.horizon = check_count("horizon", horizon)
        self.oracle = SquaredLossOracle(X, y, clip_norm=clip_norm, theta_max=theta_max)
        self.rng = rng
        self.event = DPEvent(
            mechanism="laplace",
            noise_multiplier=self.horizon / self.epsilon,
            neighbouring="replace_one",
        )
        backend = ledger_backend or ("pld" if self.epsilon / self.horizon <= 0.1 else "rdp")
        horizon_event = self.event.model_copy(update={"count": self.horizon})
        self.ledger = PrivacyLedger(
            site=self.site,
            epsilon_budget=compute_epsilon([horizon_event], ledger_delta, backend=backend),
            delta=ledger_delta,
            backend=backend,
        )
        self.answers_given = 0

    @property
    def n_records(self) -> int:
        """n_i (public: neighbouring data sets differ by replacing one record, Definition 1)."""
        return self.oracle.n_records

    @property
    def noise_scale(self) -> float:
        """The Laplace scale 2ΞT/(n_i ε_i) of every answer (Theorem 1)."""
        return laplace_noise_scale(
            clip_norm=self.oracle.clip_norm,
            horizon=self.horizon,
            n_records=self.n_records,
            epsilon=self.epsilon,
        )

    def spent_epsilon(self) -> float:
        """Pure-DP ε spent so far: answers_given·ε_i/T."""
        return self.answers_given * self.epsilon / self.horizon

    def answer(self, theta: ArrayLike) -> np.ndarray:
        """Answer one gradient query (Eq. 4), charging it to the ledger first.

        Parameters
        ----------
        theta : array-like of shape (p,)
            θ̂_k, which must lie in Θ.

        Returns
        -------
        ndarray of shape (p,)

        Raises
        ------
        PrivacyBudgetExceededError
            On query T + 1 and later; nothing is computed or released.
        DataValidationError
            If θ is malformed, outside Θ, or of the wrong width; nothing is charged.
        """
        if self.answers_given >= self.horizon:
            raise PrivacyBudgetExceededError(
                f"data owner {self.site!r} has answered its {self.horizon} queries and spent "
                f"ε={self.spent_epsilon():g} of ε={self.epsilon:g}; query {self.answers_given + 1} "
                "is refused"
            )
        point = check_theta(theta, self.oracle.n_features, self.oracle.theta_max)
        if point.ndim != 1:
            raise DataValidationError(
                f"a data owner answers one query at a time, got {point.shape}"
            )
        noisy, event = answer_gradient_query(
            point, self.oracle, epsilon=self.epsilon, horizon=self.horizon, rng=self.rng
        )
        assert math.isclose(
            event.noise_multiplier or 0.0, self.horizon / self.epsilon, rel_tol=1e-9
        )
        self.ledger.charge(
            Release(
                release_id=f"{self.site}/gradient-answer/{self.answers_given + 1}",
                description="Laplace-noised gradient answer (async-dp Eq. 4)",
                events=(self.event,),  # the same event object, so the ledger groups all answers
            )
        )
        self.answers_given += 1
        return noisy


class AsyncDPLearner:
    """The learner of Algorithm 1: central model θ_L and one copy θ_i per owner.

    Parameters
    ----------
    n_records : sequence of int
        n_i of every owner (public); the learner weights answers by n_i/n.
    n_features : int
        p.
    horizon : int
        T.
    reg : float
        λ of g(θ) = λ‖θ‖² (σ = 2λ).
    theta_max : float
        θ_max of Θ.
    rho : float
        ρ of Algorithm 1 (α = ρ/T²); see :func:`choose_rho`.
    replicas : int, optional
        Run this many independent copies at once (vectorized replicate runs); every array then
        gains a leading replica axis and each replica talks to its own owner at each iteration.

    Attributes
    ----------
    theta_learner : ndarray of shape (p,) or (replicas, p)
        θ_L (Algorithm 1 line 1: initialised to 0).
    theta_owners : ndarray of shape (N, p) or (N, replicas, p)
        θ_i.
    iteration : int
        k, the number of updates made.
    steps : StepSizes

    Raises
    ------
    InvalidPrivacyParameterError
        On invalid sizes or parameters.

    Examples
    --------
    >>> learner = AsyncDPLearner(n_records=[10, 30], n_features=2, horizon=5, reg=0.5,
    ...                          theta_max=1.0, rho=1.0)
    >>> theta_hat = learner.query(1)
    >>> learner.update(1, theta_hat, np.array([-1.0, 2.0]))
    >>> learner.iteration, learner.theta_owners[1].round(3).tolist()
    (1, [0.06, -0.12])
    """

    def __init__(
        self,
        *,
        n_records: Sequence[int],
        n_features: int,
        horizon: int,
        reg: float,
        theta_max: float,
        rho: float,
        replicas: int | None = None,
    ) -> None:
        sizes = [check_count("n_records[i]", n) for n in n_records]
        if not sizes:
            raise InvalidPrivacyParameterError("the learner needs at least one data owner")
        self.n_records = np.asarray(sizes, dtype=np.int64)
        self.shares = self.n_records / self.n_records.sum()
        self.n_owners = len(sizes)
        self.n_features = check_count("n_features", n_features)
        self.horizon = check_count("horizon", horizon)
        self.reg = check_positive("reg", reg)
        self.theta_max = check_positive("theta_max", theta_max)
        self.rho = check_positive("rho", rho)
        self.replicas = None if replicas is None else check_count("replicas", replicas)
        self.steps = step_sizes(
            n_owners=self.n_owners,
            horizon=self.horizon,
            rho=self.rho,
            strong_convexity=2 * self.reg,
        )
        lead = () if self.replicas is None else (self.replicas,)
        self.theta_learner = np.zeros((*lead, self.n_features))
        self.theta_owners = np.zeros((self.n_owners, *lead, self.n_features))
        self.iteration = 0

    def _owners(self, owner: int | np.ndarray) -> np.ndarray:
        index = np.asarray(owner)
        want = () if self.replicas is None else (self.replicas,)
        if index.shape != want or not np.issubdtype(index.dtype, np.integer):
            raise DataValidationError(f"owner must be an int index of shape {want}, got {owner!r}")
        if np.any((index < 0) | (index >= self.n_owners)):
            raise DataValidationError(f"owner index out of range [0, {self.n_owners})")
        return index

    def _copies(self, index: np.ndarray) -> np.ndarray:
        if self.replicas is None:
            return self.theta_owners[int(index)]
        return self.theta_owners[index, np.arange(self.replicas)]

    def query(self, owner: int | np.ndarray) -> np.ndarray:
        """θ̂_k = (θ_L,k−1 + θ_i,k−1)/2, the query point sent to owner i (Eq. 6)."""
        index = self._owners(owner)
        return 0.5 * (self.theta_learner + self._copies(index))

    def update(self, owner: int | np.ndarray, theta_hat: ArrayLike, answer: ArrayLike) -> None:
        """Apply Eq. 5 to θ_i and Eq. 7 to θ_L with the owner's DP answer; k ← k + 1.

        θ_i,k = Π_Θ[θ̂_k − α_i(η∇g(θ̂_k) + (n_i/n)·Q̃_i(D_i; θ̂_k))] and
        θ_L,k = Π_Θ[θ̂_k − α_L(1 − ηN)∇g(θ̂_k)], with ∇g(θ) = 2λθ.

        Raises
        ------
        DataValidationError
            On a bad owner index or arrays of the wrong shape or with non-finite values; nothing
            changes.
        """
        index = self._owners(owner)
        shape = self.theta_learner.shape
        point = np.asarray(theta_hat, dtype=np.float64)
        noisy = np.asarray(answer, dtype=np.float64)
        if point.shape != shape or noisy.shape != shape:
            raise DataValidationError(f"theta_hat and answer must have shape {shape}")
        if not (np.all(np.isfinite(point)) and np.all(np.isfinite(noisy))):
            raise DataValidationError("theta_hat and answer must be finite")
        s = self.steps
        grad_g = 2.0 * self.reg * point
        share = self.shares[index][..., None] if self.replicas is not None else self.shares[index]
        owner_new = project(
            point - s.alpha_owner * (s.eta * grad_g + share * noisy), self.theta_max
        )
        learner_new = project(
            point - s.alpha_learner * (1.0 - s.eta * self.n_owners) * grad_g, self.theta_max
        )
        if self.replicas is None:
            self.theta_owners[int(index)] = owner_new
        else:
            self.theta_owners[index, np.arange(self.replicas)] = owner_new
        self.theta_learner = learner_new
        self.iteration += 1
