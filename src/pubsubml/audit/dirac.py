"""What the white-box Dirac-canary audits share: the task, the canaries, the broken runs, the result.

Every DP-SGD-based audit (:mod:`~pubsubml.audit.dpsgd`, :mod:`~pubsubml.audit.dpsgd_many_run`,
:mod:`~pubsubml.audit.dp_fedavg`, :mod:`~pubsubml.audit.proxyfl`,
:mod:`~pubsubml.audit.domain_experts`) trains on the same public synthetic task widened by input
columns that are zero in every real row; canary ``i`` is a per-sample gradient of ``10·C`` on one
first-layer weight of such a column (Steinke, Nasr & Jagielski, NeurIPS 2023, §6), so no real
gradient reaches its coordinate.  Its negative controls change σ or C while the claim stays the
shipped mechanism's.

References
----------
Steinke, Nasr & Jagielski, "Privacy Auditing with One (1) Training Run", NeurIPS 2023, §6.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor

from pubsubml.audit.guesses import dirac_scores, draw_inclusion, one_run_bound
from pubsubml.audit.result import AuditResult
from pubsubml.privacy.accountants import compute_epsilon
from pubsubml.privacy.events import DPEvent

__all__ = [
    "DIRAC_NORM",
    "REAL_FEATURES",
    "DiracTask",
    "broken_run",
    "check_count",
    "dirac_coordinates",
    "dirac_rows",
    "dirac_task",
    "gaussian_claim",
    "mlp_parameter_count",
    "one_run_result",
    "padded_rows",
    "real_rows",
    "run_details",
]

#: Columns of the public synthetic task; canary columns come after them.
REAL_FEATURES = 10
#: A canary's gradient in units of C: clipped to C by a correct mechanism, 10·C with clip-off.
DIRAC_NORM = 10.0
_CLIP_OFF = 1e6


def real_rows(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A public synthetic task: 10 standard-normal features, a noisy linear rule, 2 classes."""
    X = rng.standard_normal((n, REAL_FEATURES))
    w = rng.standard_normal(REAL_FEATURES)
    y = (X @ w + rng.standard_normal(n) > 0).astype(np.int64)
    return X, y


def padded_rows(n: int, width: int, rng: np.random.Generator) -> tuple[Tensor, Tensor]:
    """:func:`real_rows` as float32 features widened by zero canary columns to ``width``."""
    X_real, y_real = real_rows(n, rng)
    X = torch.zeros(n, width, dtype=torch.float32)
    X[:, :REAL_FEATURES] = torch.from_numpy(X_real.astype(np.float32))
    return X, torch.from_numpy(y_real)


def dirac_coordinates(m: int, out0: int, width: int) -> Tensor:
    """Flat indices of ``m`` first-layer weights W0[o, c] on the canary-only columns c ≥ 10.

    W0 has shape (out0, width) and comes first in the flat parameter layout of every engine
    (``nn.Sequential.parameters()`` order, row-major), so W0[o, c] is index ``o · width + c``.
    """
    i = torch.arange(m)
    return (i % out0) * width + REAL_FEATURES + i // out0


def dirac_rows(coords: Tensor, included: np.ndarray, n_params: int, clip: float) -> Tensor:
    """The included canaries' per-sample gradients: ``10·C`` on their coordinate, one row each."""
    chosen = coords[torch.from_numpy(np.asarray(included, dtype=bool))]
    rows = torch.zeros(len(chosen), n_params)
    rows[torch.arange(len(chosen)), chosen] = DIRAC_NORM * clip
    return rows


@dataclasses.dataclass(frozen=True)
class DiracTask:
    """A one-run audit's data: real rows widened by canary columns, the canaries' coins and
    coordinates (first-layer weights W0[o, c] of an MLP whose first layer has ``out0`` units)."""

    width: int
    splits: list[tuple[Tensor, Tensor]]
    included: np.ndarray
    coords: Tensor

    def gradients(self, n_params: int, clip: float) -> Tensor:
        """The included canaries' per-sample gradients (:func:`dirac_rows`)."""
        return dirac_rows(self.coords, self.included, n_params, clip)


def dirac_task(rows: Sequence[int], m: int, out0: int, rng: np.random.Generator) -> DiracTask:
    """Draw :func:`padded_rows` of each size in ``rows``, then the coins of ``m`` canaries."""
    width = REAL_FEATURES + math.ceil(m / out0)
    splits = [padded_rows(n, width, rng) for n in rows]
    included = draw_inclusion(m, rng)
    return DiracTask(width, splits, included, dirac_coordinates(m, out0, width))


def mlp_parameter_count(sizes: Sequence[int]) -> int:
    """Weights and biases of an MLP with layer widths ``sizes`` (inputs first)."""
    return sum(a * b + b for a, b in itertools.pairwise(sizes))


def broken_run(variant: str, sigma: float, clip: float) -> tuple[float, float]:
    """(σ, C) a run uses: the shipped ones, or a negative control's.

    ``"noise-off"``: σ = 0; ``"noise-x0.1"``: σ/10; ``"clip-off"``: C·10⁶ with σ/10⁶, so the
    noise stays σ·C and records are effectively unclipped.  Any other variant runs as shipped.
    """
    if variant == "noise-off":
        return 0.0, clip
    if variant == "noise-x0.1":
        return sigma / 10, clip
    if variant == "clip-off":
        return sigma / _CLIP_OFF, clip * _CLIP_OFF
    return sigma, clip


def one_run_result(
    target: str,
    variant: str,
    *,
    claimed_epsilon: float,
    delta: float,
    releases: np.ndarray,
    q: float,
    sigma: float,
    included: np.ndarray,
    confidence: float,
    start: float,
    details: dict[str, Any],
    canary: str = "gradient",
) -> AuditResult:
    """Score the canaries' releases (in units of C), bound ε, and report it.

    Parameters
    ----------
    releases : array of shape (T, m)
        Every release on every canary's coordinate, divided by C (and multiplied back by the
        mechanism's denominator, so an included, sampled canary adds 1).
    q, sigma : float
        The sampling rate and the *claimed* σ (the auditor tests the shipped mechanism).
    start : float
        ``time.perf_counter()`` when the audit started.
    """
    scores = dirac_scores(releases, q, sigma)
    bound = one_run_bound(scores, included, delta, confidence)
    return AuditResult(
        target=target,
        variant=variant,
        claimed_epsilon=claimed_epsilon,
        delta=delta,
        lower_bound=bound.lower_bound,
        confidence=confidence,
        method="one-run",
        canary=canary,
        canaries=len(included),
        guesses=bound.guesses,
        correct=bound.correct,
        runtime_s=time.perf_counter() - start,
        details=details,
    )


def gaussian_claim(sigma: float, q: float, steps: int, delta: float) -> float:
    """The ε a shipped mechanism claims: ``steps`` subsampled-Gaussian steps of σ at rate q."""
    claim = DPEvent(
        mechanism="subsampled_gaussian", noise_multiplier=sigma, sample_rate=q, count=steps
    )
    return compute_epsilon([claim], delta)


def run_details(
    path: str,
    steps: int,
    q: float,
    sigma: float,
    rows: int,
    *,
    counted: str = "steps",
    **extra: Any,
) -> dict[str, Any]:
    """The ``details`` of an audit: the code path, steps, q, the claimed σ, real rows, extras.

    ``counted`` names what ``steps`` counts (``"rounds"`` where one release is one round).
    """
    return {
        "path": path,
        counted: steps,
        "sample_rate": q,
        "noise_multiplier": sigma,
        "rows": rows,
        **extra,
    }


def check_count(name: str, value: Any, minimum: int) -> None:
    """Raise ValueError unless ``value`` is an integer ≥ ``minimum``."""
    if not isinstance(value, int | np.integer) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
