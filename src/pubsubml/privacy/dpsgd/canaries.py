"""Audit canaries: records given by their per-sample gradients instead of by data.

A privacy audit (:mod:`pubsubml.audit`) inserts records whose per-sample gradient it chooses
(Steinke, Nasr & Jagielski, "Privacy auditing with one (1) training run", NeurIPS 2023, §6,
Dirac canaries).  They are records like any other: they count in ``n`` (sample rate, expected
batch), are Poisson-sampled at every step after the data rows, from the same noise source, and
clipped to C before the noise.  :func:`check_canaries` and :class:`CanaryGradients` serve the
stacked path (:func:`~pubsubml.privacy.dpsgd.stacked.train_dp_stacked`), :func:`add_canaries`
the generic one (:func:`~pubsubml.privacy.dpsgd.generic.train_dp`).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from pubsubml.errors import DataValidationError
from pubsubml.privacy.dpsgd.config import _CLIP_EPS
from pubsubml.privacy.dpsgd.mlp_stack import MLPStack
from pubsubml.privacy.noise import NoiseSource, SeededNoise

__all__ = ["CanaryGradients", "add_canaries", "check_canaries"]


def add_canaries(
    summed: dict[str, Tensor], canaries: Tensor, q: float, clip: float, source: NoiseSource
) -> int:
    """Poisson-sample the canary records, clip their gradients, add them to ``summed``."""
    chosen = canaries[source.poisson_mask(canaries.shape[0], q)].to(torch.float32)
    if chosen.shape[0] == 0:
        return 0
    factor = (clip / (chosen.norm(dim=1, keepdim=True) + _CLIP_EPS)).clamp(max=1.0)
    total = (chosen * factor).sum(0)
    for (k, g), part in zip(
        summed.items(), total.split([g.numel() for g in summed.values()]), strict=True
    ):
        summed[k] = g + part.view_as(g)
    return int(chosen.shape[0])


def check_canaries(
    canary_gradients: Sequence[Tensor | None] | None, stack: MLPStack, private: bool
) -> list[Tensor | None]:
    """Validate per-site canary gradients: (m_s, P) float tensors of a private run, or None."""
    if canary_gradients is None:
        return [None] * stack.n_sites
    canaries = list(canary_gradients)
    if len(canaries) != stack.n_sites:
        raise ValueError(f"{stack.n_sites} stacked sites need {stack.n_sites} canary entries")
    if not private and any(c is not None for c in canaries):
        raise ValueError("canary gradients audit a private run; this one is not private")
    P = stack.flat.shape[1]
    for c in canaries:
        if c is not None and (c.ndim != 2 or c.shape[1] != P or not bool(c.isfinite().all())):
            raise DataValidationError(f"canary gradients must be finite, of shape (m, {P})")
    return [None if c is None else c.to(torch.float32) for c in canaries]


class CanaryGradients:
    """Audit canaries: each site's canary gradients, clipped once, added to its clipped sum.

    A privacy audit (:mod:`pubsubml.audit`) inserts records whose per-sample gradient it chooses
    (Steinke, Nasr & Jagielski, NeurIPS 2023, §6, Dirac canaries).  Each step every running
    site Poisson-samples its canaries at its rate q from its own noise source (one mask of
    ``m_s`` per step, after the site's other draws for the step's records) and adds their clipped
    gradients to its sum of clipped per-sample gradients, before the noise.

    Parameters
    ----------
    canaries : list of S (Tensor of shape (m_s, P) or None)
        Flat per-sample gradients of each site's canaries.
    clip : Tensor of shape (S,)
        Each site's clip norm C.
    """

    def __init__(self, canaries: list[Tensor | None], clip: Tensor) -> None:
        self.counts = [0 if c is None else int(c.shape[0]) for c in canaries]
        S, m = len(canaries), max(self.counts)
        P = next(c.shape[1] for c in canaries if c is not None)
        self.clipped = torch.zeros(S, m, P)
        for s, c in enumerate(canaries):
            if c is not None and c.shape[0]:
                factor = (clip[s] / (c.norm(dim=1, keepdim=True) + _CLIP_EPS)).clamp(max=1.0)
                self.clipped[s, : c.shape[0]] = c * factor
        self.chosen = torch.zeros(S, m, dtype=torch.bool)  # padding stays False: never sampled

    def add(
        self,
        grad: Tensor,
        running: Sequence[int],
        q: Sequence[float] | Tensor,
        sources: Sequence[NoiseSource | torch.Generator],
        sizes: Tensor | None = None,
    ) -> None:
        """Poisson-sample each running site's canaries and add their clipped gradients.

        Parameters
        ----------
        grad : Tensor of shape (S, P)
            The sites' sums of clipped gradients, updated in place.
        running : sequence of int
            The sites that take this step.
        q : sequence of S float, or Tensor of shape (S,)
        sources : sequence of S NoiseSource or torch.Generator
            A generator stands for ``SeededNoise(generator)`` (a simulation).
        sizes : Tensor of shape (S,), optional
            Batch sizes, incremented by the canaries sampled.
        """
        chosen = self.chosen
        chosen.zero_()
        for s in running:
            m = self.counts[s]
            if m:
                source = sources[s]
                if isinstance(source, torch.Generator):
                    source = SeededNoise(source)
                chosen[s, :m] = source.poisson_mask(m, float(q[s]))
        if sizes is not None:
            sizes += chosen.sum(1)
        grad += torch.einsum("sm,smp->sp", chosen.to(grad.dtype), self.clipped)
