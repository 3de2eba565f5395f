"""One-run audits of the DP-SGD learners: white-box Dirac gradient canaries and crafted records.

What is audited is the DP-SGD engine as the learners run it: the estimator
(:class:`~pubsubml.learners.mlp.DPMLPClassifier` or
:class:`~pubsubml.learners.dpsgd_linear.DPSGDLogisticRegression`) resolves its hyperparameters
and calibrates σ for the training set exactly as ``fit`` does, then the run goes through the
engine's fast stacked path (:func:`~pubsubml.privacy.dpsgd.stacked.train_dp_stacked`, what ``fit``
calls) or its generic ``torch.func`` path (:func:`~pubsubml.privacy.dpsgd.train_dp`).

Canaries (Steinke, Nasr & Jagielski, NeurIPS 2023, §6):

*Dirac canaries*, white box.  Canary ``i`` is a record whose per-sample gradient is ``10·C`` on
one coordinate and 0 elsewhere (clipped to C by the engine).  Its coordinate is a first-layer
weight of an input column that is zero in every real row, so no real gradient ever reaches it
(:mod:`~pubsubml.audit.dirac`).  The auditor sees every released (noised) gradient, as DP-SGD's
guarantee allows, and scores each canary by the likelihood ratio of its coordinate's releases:
``y_t`` (the release in units of C) is N(0, σ²) without the canary and N(1, σ²) with probability
q with it, so ``score = Σ_t log(1 − q + q·exp((2y_t − 1)/(2σ²)))``.
Negative controls change one thing while the claim stays the shipped mechanism's ε:
``"noise-off"`` (σ = 0), ``"noise-x0.1"`` (σ/10) and ``"clip-off"`` (C → 10⁶·C with the noise
kept at the nominal σ·C, so records are effectively unclipped and the 10·C canaries count fully).

References
----------
Steinke, Nasr & Jagielski, "Privacy Auditing with One (1) Training Run", NeurIPS 2023 (§3 the
bound, §6 Dirac canaries); Nasr et al., "Adversary Instantiation", IEEE S&P 2021 (white-box
gradient canaries); pubsub-ml.txt §8 (DP-SGD).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from typing import Literal

import numpy as np
import torch
from torch import Tensor

from pubsubml.audit.dirac import (
    DiracTask,
    broken_run,
    check_count,
    dirac_task,
    mlp_parameter_count,
    one_run_result,
    run_details,
)
from pubsubml.audit.result import AuditResult
from pubsubml.learners.dpsgd_base import _DPSGDBase
from pubsubml.learners.dpsgd_linear import DPSGDLogisticRegression
from pubsubml.learners.mlp import DPMLPClassifier
from pubsubml.privacy.accountants import compute_epsilon
from pubsubml.privacy.dpsgd import (
    DPSGDConfig,
    MLPStack,
    TrainResult,
    init_mlp,
    train_dp,
    train_dp_stacked,
)
from pubsubml.privacy.noise import SecureNoise

__all__ = [
    "DEFAULT_CANARIES",
    "DEFAULT_ROWS",
    "VARIANTS",
    "Learner",
    "audit_dpsgd",
    "broken_config",
    "check_audit",
    "learner_estimator",
]

Learner = Literal["mlp", "linear"]
Path = Literal["stacked", "generic", "secure"]

VARIANTS: tuple[str, ...] = ("correct", "noise-off", "noise-x0.1", "clip-off")
#: m.  The one-run bound of a perfect attack grows with m (Steinke et al., Fig. 1); 5000 Dirac
#: canaries is their white-box size.
DEFAULT_CANARIES = 5000
#: Real training rows (synthetic, two classes, 10 features): as many as the canaries at most
#: add, so the canaries do not dominate the training set.
DEFAULT_ROWS = 5000


def learner_estimator(learner: Learner, epsilon: float, delta: float, seed: int) -> _DPSGDBase:
    """The audited estimator with its DP-SGD defaults (it resolves σ and the schedule)."""
    if learner == "mlp":
        return DPMLPClassifier(
            classes=[0, 1],
            epsilon=epsilon,
            delta=delta,
            random_state=seed,
            noise_seed=seed,
        )
    return DPSGDLogisticRegression(
        classes=[0, 1], epsilon=epsilon, delta=delta, random_state=seed, noise_seed=seed
    )


def broken_config(config: DPSGDConfig, variant: str) -> DPSGDConfig:
    """The run configuration of a negative control (the claim stays ``config``'s)."""
    sigma, clip = broken_run(variant, config.noise_multiplier, config.max_grad_norm)
    return dataclasses.replace(config, noise_multiplier=sigma, max_grad_norm=clip)


def check_audit(
    epsilon: float,
    variant: str,
    canaries: int,
    delta: float,
    confidence: float,
    rows: int,
    variants: tuple[str, ...] = VARIANTS,
) -> None:
    """Validate a one-run audit's parameters (raises ValueError naming the bad one)."""
    if not (isinstance(epsilon, int | float) and epsilon > 0 and math.isfinite(epsilon)):
        raise ValueError(f"epsilon must be finite and > 0, got {epsilon!r}")
    if variant not in variants:
        raise ValueError(f"unknown variant {variant!r}; choose one of {list(variants)}")
    check_count("canaries", canaries, 2)
    if not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1), got {delta!r}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    check_count("rows", rows, 10)


class _Releases:
    """Collects the released gradient on the canaries' coordinates at every step."""

    def __init__(self, coords: Tensor) -> None:
        self.coords, self.rows = coords, list[Tensor]()

    def stacked(self, params: Tensor, grad: Tensor) -> None:
        self.rows.append(grad[0, self.coords].clone())

    def generic(self, first_weight: Tensor) -> Callable[..., None]:
        def hook(*_: object) -> None:
            assert first_weight.grad is not None
            self.rows.append(first_weight.grad.reshape(-1)[self.coords].clone())

        return hook


def _train(
    path: Path,
    est: _DPSGDBase,
    sizes: tuple[int, ...],
    X: Tensor,
    y: Tensor,
    config: DPSGDConfig,
    generator: torch.Generator,
    canary_gradients: Tensor | None,
    releases: _Releases | None,
) -> TrainResult:
    if path in ("stacked", "secure"):
        stack = MLPStack.init(sizes, est._activation_name(), [generator])
        return train_dp_stacked(
            stack,
            [X],
            [y],
            configs=[config],
            generators=[generator],
            loss=est._loss,
            grad_hook=None if releases is None else releases.stacked,
            canary_gradients=None if canary_gradients is None else [canary_gradients],
            noise=[SecureNoise()] if path == "secure" else None,
        )[0]
    module = init_mlp(sizes, est._activation_name(), generator)
    params = [p for p in module.parameters() if p.requires_grad]
    make = torch.optim.Adam if config.optimizer == "adam" else torch.optim.SGD
    optimizer = make(params, lr=config.lr)
    if releases is not None:
        optimizer.register_step_pre_hook(releases.generic(params[0]))
    return train_dp(
        module,
        X,
        y,
        config=config,
        generator=generator,
        loss=est._loss,
        optimizer=optimizer,
        canary_gradients=canary_gradients,
    )


def audit_dpsgd(
    learner: Learner = "mlp",
    *,
    path: Path = "stacked",
    epsilon: float = 1.0,
    delta: float = 1e-5,
    variant: str = "correct",
    canaries: int | None = None,
    rows: int = DEFAULT_ROWS,
    confidence: float = 0.95,
    seed: int = 0,
) -> AuditResult:
    """One-run audit of a DP-SGD learner with white-box Dirac gradient canaries.

    Parameters
    ----------
    learner : {"mlp", "linear"}, default="mlp"
        :class:`~pubsubml.learners.mlp.DPMLPClassifier` (Table 4's network) or
        :class:`~pubsubml.learners.dpsgd_linear.DPSGDLogisticRegression`, each with its DP-SGD
        defaults; σ is calibrated to (ε, δ) for the records that train, canaries included.
    path : {"stacked", "generic", "secure"}, default="stacked"
        The engine's batched path (what ``fit`` runs in a simulation with a ``noise_seed``), its
        generic ``torch.func`` path, or the batched path drawing its Poisson masks and noise from
        :class:`~pubsubml.privacy.noise.SecureNoise` (what ``fit`` runs for a release; ``seed``
        then seeds everything but the sampling and the noise).
    epsilon, delta : float
        The privacy target of the audited run; the claim is the accountant's ε for what ran.
    variant : {"correct", "noise-off", "noise-x0.1", "clip-off"}, default="correct"
        The shipped mechanism, or a negative control (module docstring).  A negative control
        keeps the correct mechanism's claim.
    canaries : int, optional
        ``m``, default :data:`DEFAULT_CANARIES`.
    rows : int, default=DEFAULT_ROWS
        Real training rows besides the canaries.
    confidence : float, default=0.95
    seed : int, default=0
        Seeds the rows, the canaries' coins, the initial weights, the sampling and the noise.

    Returns
    -------
    AuditResult

    Raises
    ------
    ValueError
        An unknown learner, path or variant, or a parameter out of range.

    References
    ----------
    Steinke, Nasr & Jagielski, NeurIPS 2023, §6 (Dirac canaries, white box); Abadi et al. 2016.

    Examples
    --------
    >>> r = audit_dpsgd("linear", epsilon=1.0, canaries=200, rows=200)
    >>> r.lower_bound <= r.claimed_epsilon
    True
    """
    _check_learner_and_path(learner, path)
    m = DEFAULT_CANARIES if canaries is None else canaries
    check_audit(epsilon, variant, m, delta, confidence, rows)
    start = time.perf_counter()
    rng = np.random.default_rng(seed)
    est = learner_estimator(learner, epsilon, delta, seed)
    hidden = tuple(int(h) for h in est._hidden())
    task = dirac_task([rows], m, hidden[0] if hidden else 2, rng)
    result, config, releases = _train_with_canaries(path, est, hidden, task, variant, seed)
    q = result.sample_rate
    return one_run_result(
        f"dpsgd-{learner}",
        variant,
        claimed_epsilon=_claimed_epsilon(result, config, delta),
        delta=delta,
        releases=releases,
        q=q,
        sigma=config.noise_multiplier,
        included=task.included,
        confidence=confidence,
        start=start,
        details=run_details(path, result.steps, q, config.noise_multiplier, rows),
    )


def _check_learner_and_path(learner: str, path: str) -> None:
    if learner not in ("mlp", "linear") or path not in ("stacked", "generic", "secure"):
        raise ValueError(
            "learner must be 'mlp' or 'linear' and path 'stacked', 'generic' or 'secure'"
        )


def _claimed_epsilon(result: TrainResult, config: DPSGDConfig, delta: float) -> float:
    """The accountant's ε for the steps that ran, at the shipped (σ, C) of ``config``."""
    claimed_run = dataclasses.replace(
        result, noise_multiplier=config.noise_multiplier, max_grad_norm=config.max_grad_norm
    )
    return compute_epsilon(claimed_run.events, delta)


def _train_with_canaries(
    path: Path,
    est: _DPSGDBase,
    hidden: tuple[int, ...],
    task: DiracTask,
    variant: str,
    seed: int,
) -> tuple[TrainResult, DPSGDConfig, np.ndarray]:
    """Train the variant's run on the real rows and the included canaries.

    Returns what ran, the shipped configuration (σ for all the records that train, canaries
    included: the claim) and the releases on the canaries' coordinates in units of C, (T, m).
    """
    X, y = task.splits[0]
    n = len(X) + int(task.included.sum())
    config, _ = est._config(n, task.width)  # σ for n records: the claim
    sizes = (task.width, *hidden, 2)
    dirac = task.gradients(mlp_parameter_count(sizes), config.max_grad_norm)
    releases = _Releases(task.coords)
    generator = torch.Generator().manual_seed(seed)
    run_config = broken_config(config, variant)
    result = _train(path, est, sizes, X, y, run_config, generator, dirac, releases)
    q = result.sample_rate
    rows = torch.stack(releases.rows).double().numpy() * (q * n) / config.max_grad_norm
    return result, config, rows
