"""Asynchronous DP learning with Laplace-noised gradient queries (Algorithm 1).

N data owners each hold a private data set D_i; a learner keeps a central model θ_L and one copy θ_i
per owner.  At iteration k one owner i_k (the first whose rate-1 Poisson clock fires, i.e. uniformly
at random) answers the gradient query of Eq. 3 at θ̂_k = (θ_L + θ_i)/2 (Eq. 6) with Laplace noise
(Eq. 4, Theorem 1), and the learner updates θ_i (Eq. 5) and θ_L (Eq. 7) by projected steps onto
Θ = {‖θ‖∞ ≤ θ_max}.  Linear regression with squared loss ℓ = (y − θᵀx)² and ridge regularizer
g(θ) = λ‖θ‖² (strongly convex with σ = 2λ) is the model of the paper's experiments (§5.1.2).

The owner's answering function (:meth:`DataOwner.answer`, built on :func:`answer_gradient_query`)
and the learner's update (:meth:`AsyncDPLearner.update`) are the same objects in the simulation
(:func:`simulate_async_dp`) and in the real multi-process mode
(:mod:`pubsubml.methods.async_dp_peers`).

References
----------
async-dp-cost-of-privacy.txt §3 (Eq. 1–7, Definition 1, Theorem 1, Algorithm 1), Appendix A (proof
of Theorem 1), Appendix B (parameter choices η = 1/(2N), α_L = α_i/N = α/σ, α = ρ/T²).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike

from pubsubml.errors import DataValidationError, InvalidPrivacyParameterError, PrivacyBudgetExceededError
from pubsubml.methods.async_dp_oracle import (
    SquaredLossOracle,
    check_theta,
    gradient_norm_bound,
    laplace_noise_scale,
    project,
)
from pubsubml.privacy.events import DPEvent
from pubsubml.privacy.ledger import PrivacyLedger, Release
from pubsubml.privacy.mechanisms import laplace_mechanism

__all__ = [
    "AsyncDPLearner",
    "AsyncDPRun",
    "DataOwner",
    "StepSizes",
    "answer_gradient_query",
    "choose_rho",
    "gradient_norm_bound",
    "laplace_noise_scale",
    "project",
    "simulate_async_dp",
    "step_sizes",
]

Style = Literal["broadcast", "request"]


def _positive(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | np.floating | np.integer):
        raise InvalidPrivacyParameterError(f"{name} must be a number, got {value!r}")
    if not 0.0 < float(value) < math.inf:
        raise InvalidPrivacyParameterError(f"{name} must be finite and > 0, got {value}")
    return float(value)


def _count(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise InvalidPrivacyParameterError(f"{name} must be an int >= 1, got {value!r}")
    return int(value)


@dataclasses.dataclass(frozen=True)
class StepSizes:
    """Constant step sizes of Algorithm 1 (Appendix B).

    Attributes
    ----------
    alpha : float
        α = ρ/T².
    alpha_learner : float
        α_L = α/σ, the learner's step on its own cost f_L = (1 − ηN)g.
    alpha_owner : float
        α_i = N·α/σ, the step of every owner copy (Eq. 5: Nρ/(σT²)).
    eta : float
        η = 1/(2N), the share of the regularizer carried by each owner's cost f_i.
    """

    alpha: float
    alpha_learner: float
    alpha_owner: float
    eta: float


def step_sizes(*, n_owners: int, horizon: int, rho: float, strong_convexity: float) -> StepSizes:
    """The step sizes of Appendix B: η = 1/(2N), α_L = α_i/N = α/σ, α = ρ/T².

    With these choices α_L·σ_L = α_i·σ_i = α/2 and α_L·γ_L = α_i·γ_i = α/σ, so the constants
    δ_{α,σ} and δ_{α,γ} of Appendix B vanish.

    Raises
    ------
    InvalidPrivacyParameterError
        On N < 1, T < 1, ρ ≤ 0 or σ ≤ 0.

    Examples
    --------
    >>> s = step_sizes(n_owners=2, horizon=10, rho=1.0, strong_convexity=0.5)
    >>> s.alpha, s.alpha_learner, s.alpha_owner, s.eta
    (0.01, 0.02, 0.04, 0.25)
    """
    n = _count("n_owners", n_owners)
    t = _count("horizon", horizon)
    alpha = _positive("rho", rho) / t**2
    sigma = _positive("strong_convexity", strong_convexity)
    return StepSizes(alpha=alpha, alpha_learner=alpha / sigma, alpha_owner=n * alpha / sigma, eta=0.5 / n)


def choose_rho(
    *,
    curvature: float,
    n_owners: int,
    horizon: int,
    strong_convexity: float,
    contraction: float = 5.0,
) -> float:
    """ρ such that T iterations cover ``contraction`` units of gradient time at ``curvature``.

    On average one iteration moves the mean of the N + 1 models by (α/σ)/(N + 1) times the gradient
    of f (Eq. 5–7 with the steps of :func:`step_sizes`), so T iterations shrink an error along a
    direction of curvature h by about exp(−ρh/(σT(N + 1))).  Setting that exponent to ``contraction``
    gives ρ = contraction·σ·T·(N + 1)/h.  The stationary error due to the DP noise grows with ρ, so
    a small contraction trades residual optimization error for less noise.

    Parameters
    ----------
    curvature : float
        A *public* estimate h > 0 of the curvature of f (e.g. 2·λ_max(E[xxᵀ]) of a public reference
        sample, or of the known feature distribution); never a statistic of the owners' data.
    n_owners, horizon : int
        N and T.
    strong_convexity : float
        σ of the regularizer g.
    contraction : float, default=5.0

    Returns
    -------
    float
        ρ.

    Raises
    ------
    InvalidPrivacyParameterError
        On a non-positive parameter.

    Examples
    --------
    >>> choose_rho(curvature=2.0, n_owners=3, horizon=100, strong_convexity=0.01)
    10.0
    """
    h = _positive("curvature", curvature)
    sigma = _positive("strong_convexity", strong_convexity)
    n = _count("n_owners", n_owners)
    t = _count("horizon", horizon)
    return _positive("contraction", contraction) * sigma * t * (n + 1) / h


def answer_gradient_query(
    theta: ArrayLike,
    oracle: SquaredLossOracle,
    *,
    epsilon: float,
    horizon: int,
    rng: np.random.Generator,
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
    rng : numpy.random.Generator

    Returns
    -------
    answer : ndarray of shape like ``theta``
    event : DPEvent
        ``DPEvent(mechanism="laplace", noise_multiplier=T/ε_i)`` for *one* answer (one row).

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
    per_answer = _positive("epsilon", epsilon) / _count("horizon", horizon)
    return laplace_mechanism(exact, sensitivity=oracle.sensitivity, epsilon=per_answer, rng=rng)


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
        Noise source (default: fresh OS entropy).
    ledger_delta : float, default=1e-6
        δ at which the ledger reports its accountant ε (see Notes).
    ledger_backend : {"pld", "rdp"}, default="pld"

    Attributes
    ----------
    answers_given : int
    ledger : PrivacyLedger
        Every answer is charged here (one Laplace DPEvent) before it leaves the owner.

    Notes
    -----
    The budget is enforced with pure ε-DP basic composition, as in the paper: the owner refuses
    the (T + 1)-th query, and :meth:`spent_epsilon` is k·ε_i/T after k answers (ε_i after T).  This
    is exact for pure DP at δ = 0.  The ledger also records each answer's DPEvent; its PLD accountant
    cannot report δ = 0 (its pessimistic tail truncation leaves ε = ∞ there) and at any δ > 0 it
    reports an (ε, δ) guarantee below ε_i, so it never binds before the count does.

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
        ledger_backend: Literal["pld", "rdp"] = "pld",
    ) -> None:
        self.site = str(site)
        self.epsilon = _positive("epsilon", epsilon)
        self.horizon = _count("horizon", horizon)
        self.oracle = SquaredLossOracle(X, y, clip_norm=clip_norm, theta_max=theta_max)
        self.rng = np.random.default_rng() if rng is None else rng
        self.ledger = PrivacyLedger(
            site=self.site, epsilon_budget=self.epsilon, delta=ledger_delta, backend=ledger_backend
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
            raise DataValidationError(f"a data owner answers one query at a time, got {point.shape}")
        noisy, event = answer_gradient_query(
            point, self.oracle, epsilon=self.epsilon, horizon=self.horizon, rng=self.rng
        )
        self.ledger.charge(
            Release(
                release_id=f"{self.site}/gradient-answer/{self.answers_given + 1}",
                description="Laplace-noised gradient answer (async-dp Eq. 4)",
                events=(event,),
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
        sizes = [_count("n_records[i]", n) for n in n_records]
        if not sizes:
            raise InvalidPrivacyParameterError("the learner needs at least one data owner")
        self.n_records = np.asarray(sizes, dtype=np.int64)
        self.shares = self.n_records / self.n_records.sum()
        self.n_owners = len(sizes)
        self.n_features = _count("n_features", n_features)
        self.horizon = _count("horizon", horizon)
        self.reg = _positive("reg", reg)
        self.theta_max = _positive("theta_max", theta_max)
        self.rho = _positive("rho", rho)
        self.replicas = None if replicas is None else _count("replicas", replicas)
        self.steps = step_sizes(
            n_owners=self.n_owners, horizon=self.horizon, rho=self.rho, strong_convexity=2 * self.reg
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
        owner_new = project(point - s.alpha_owner * (s.eta * grad_g + share * noisy), self.theta_max)
        learner_new = project(
            point - s.alpha_learner * (1.0 - s.eta * self.n_owners) * grad_g, self.theta_max
        )
        if self.replicas is None:
            self.theta_owners[int(index)] = owner_new
        else:
            self.theta_owners[index, np.arange(self.replicas)] = owner_new
        self.theta_learner = learner_new
        self.iteration += 1


@dataclasses.dataclass(frozen=True)
class AsyncDPRun:
    """What one run of Algorithm 1 did.

    Attributes
    ----------
    owners : ndarray of shape (T,)
        i_k, the owner that answered at iteration k.
    times : ndarray of shape (T,)
        t_k in units of the owners' mean clock period (rate-1 Poisson clocks).
    thetas : ndarray of shape (T, p)
        θ_L,k after each iteration.
    """

    owners: np.ndarray
    times: np.ndarray
    thetas: np.ndarray


def simulate_async_dp(
    owners: Sequence[DataOwner],
    learner: AsyncDPLearner,
    *,
    rng: np.random.Generator,
    style: Style = "request",
    broadcast_interval: float = 1.0,
) -> AsyncDPRun:
    """Run Algorithm 1 for T iterations in one process, with independent rate-1 Poisson clocks.

    ``style="request"``: the learner listens; the owner whose clock fires first requests an update.
    ``style="broadcast"``: the learner broadcasts a query every ``broadcast_interval`` time units
    (once the previous update is over); the first owner whose clock fires after the broadcast
    answers.  In both styles every owner is the next one with probability 1/N (§3).

    Parameters
    ----------
    owners : sequence of DataOwner
        In the learner's owner order.
    learner : AsyncDPLearner
        A single-run learner (``replicas=None``).
    rng : numpy.random.Generator
        Drives the clocks (each owner has its own noise generator).
    style : {"request", "broadcast"}, default="request"
    broadcast_interval : float, default=1.0

    Returns
    -------
    AsyncDPRun

    Raises
    ------
    DataValidationError
        If the owners do not match the learner.
    PrivacyBudgetExceededError
        If an owner's horizon is shorter than the learner's and it runs out.
    """
    if learner.replicas is not None or len(owners) != learner.n_owners:
        raise DataValidationError("simulate_async_dp needs a single-run learner with one entry per owner")
    if [o.n_records for o in owners] != learner.n_records.tolist():
        raise DataValidationError("owners' n_records do not match the learner's")
    if style not in ("request", "broadcast"):
        raise DataValidationError(f"style must be 'request' or 'broadcast', got {style!r}")
    interval = _positive("broadcast_interval", broadcast_interval)
    fire = rng.exponential(1.0, size=learner.n_owners)
    now = 0.0
    picked, times, thetas = [], [], []
    for _ in range(learner.horizon):
        if style == "broadcast":
            now = math.ceil(now / interval + 1e-12) * interval  # next broadcast after the last update
            late = fire < now  # memoryless clocks: restart those that fired while nobody listened
            fire[late] = now + rng.exponential(1.0, size=int(late.sum()))
        i = int(np.argmin(fire))
        now = float(fire[i])
        fire[i] += rng.exponential(1.0)
        theta_hat = learner.query(i)
        learner.update(i, theta_hat, owners[i].answer(theta_hat))
        picked.append(i)
        times.append(now)
        thetas.append(learner.theta_learner.copy())
    return AsyncDPRun(owners=np.asarray(picked), times=np.asarray(times), thetas=np.asarray(thetas))
