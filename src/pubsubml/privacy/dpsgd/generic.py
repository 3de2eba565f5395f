"""The generic DP-SGD path: any ``nn.Module``, per-sample gradients with ``torch.func``.

:func:`per_sample_gradients` computes them (vmap + grad + functional_call),
:func:`clip_per_sample` clips each to L2 norm ``C`` over all parameters jointly, and
:func:`train_dp` trains a module in place: per step a Poisson sample of the rows, their clipped
gradients summed, N(0, σ²C²) added and the sum divided by the *expected* batch size ``q·n`` (as
Opacus does).  It is the reference of the stacked path
(:func:`~pubsubml.privacy.dpsgd.stacked.train_dp_stacked`), which draws the same randomness
(see :mod:`pubsubml.privacy.dpsgd` for the protocol).

Notes
-----
The guarantee holds for what :class:`~pubsubml.privacy.dpsgd.config.TrainResult` reports
(steps, sample rate, σ, C) and for add/remove-one neighbours; compute ε from its ``events``.

References
----------
pubsub-ml.txt §7.2 (Table 4 networks) and §8 (DP-SGD); Abadi et al., "Deep learning with
differential privacy", CCS 2016.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import torch
from torch import Tensor, nn
from torch.func import functional_call, grad, vmap

from pubsubml.errors import DataValidationError
from pubsubml.privacy.dpsgd.canaries import add_canaries
from pubsubml.privacy.dpsgd.config import _CLIP_EPS, DPSGDConfig, TrainResult, _check_data
from pubsubml.privacy.dpsgd.functions import Loss, _loss
from pubsubml.privacy.dpsgd.mlp_stack import MLPStack
from pubsubml.privacy.noise import NoiseSource, SeededNoise

__all__ = [
    "clip_per_sample",
    "init_mlp",
    "per_sample_gradients",
    "poisson_sample",
    "train_dp",
]


def per_sample_gradients(
    module: nn.Module,
    params: Mapping[str, Tensor],
    x: Tensor,
    y: Tensor,
    loss_fn: str | Loss = "cross_entropy",
) -> dict[str, Tensor]:
    """Per-sample gradients of the loss with ``torch.func`` (vmap over grad of functional_call).

    Parameters
    ----------
    module : nn.Module
    params : mapping of str to Tensor
        Parameter values by name (``dict(module.named_parameters())``).
    x : Tensor of shape (b, ...)
    y : Tensor of shape (b,)
    loss_fn : str or Loss, default="cross_entropy"
        A key of :data:`~pubsubml.privacy.dpsgd.functions.LOSSES` or a
        :class:`~pubsubml.privacy.dpsgd.functions.Loss`.

    Returns
    -------
    dict of str to Tensor of shape (b, *param.shape)

    Examples
    --------
    >>> m = nn.Linear(3, 2)
    >>> y = torch.zeros(4, dtype=torch.long)
    >>> tuple(per_sample_gradients(m, dict(m.named_parameters()), torch.ones(4, 3), y)["weight"].shape)
    (4, 2, 3)
    """
    loss = _loss(loss_fn)
    buffers = dict(module.named_buffers())
    detached = {k: v.detach() for k, v in params.items()}

    def sample_loss(p: dict[str, Tensor], xi: Tensor, yi: Tensor) -> Tensor:
        out = functional_call(module, (p, buffers), (xi.unsqueeze(0),))
        return loss.per_sample(out, yi.unsqueeze(0)).sum()

    result: dict[str, Tensor] = vmap(grad(sample_loss), in_dims=(None, 0, 0))(detached, x, y)
    return result


def clip_per_sample(
    grads: Mapping[str, Tensor], max_grad_norm: float
) -> tuple[dict[str, Tensor], Tensor]:
    """Scale each sample's gradient to L2 norm at most C, all parameters jointly.

    Parameters
    ----------
    grads : mapping of str to Tensor of shape (b, ...)
    max_grad_norm : float
        C; the factor is ``min(1, C / (‖∇_i‖ + 1e-6))`` as in Opacus.

    Returns
    -------
    clipped : dict of str to Tensor of shape (b, ...)
    norms : Tensor of shape (b,), the norms before clipping
    """
    norms = torch.stack([g.reshape(g.shape[0], -1).pow(2).sum(1) for g in grads.values()]).sum(0)
    norms = norms.sqrt()
    factor = (max_grad_norm / (norms + _CLIP_EPS)).clamp(max=1.0)
    clipped = {k: g * factor.view(-1, *([1] * (g.dim() - 1))) for k, g in grads.items()}
    return clipped, norms


def poisson_sample(n: int, sample_rate: float, generator: torch.Generator) -> Tensor:
    """Poisson sampling: a bool mask of shape (n,), each row included with probability ``q``.

    Examples
    --------
    >>> poisson_sample(1000, 0.1, torch.Generator().manual_seed(0)).dtype
    torch.bool
    """
    return torch.rand(n, generator=generator) < sample_rate


def init_mlp(
    layer_sizes: Sequence[int], activation: str, generator: torch.Generator
) -> nn.Sequential:
    """An MLP ``Linear, act, …, Linear`` with torch's default init, drawn from ``generator``.

    Weights and biases are U(-1/√fan_in, 1/√fan_in) as for ``nn.Linear``, drawn layer by layer,
    weight then bias.  ``layer_sizes`` = (n_inputs, hidden…, n_outputs), e.g. (10, 100, 50, 2).

    Examples
    --------
    >>> init_mlp((10, 100, 50, 2), "tanh", torch.Generator().manual_seed(0))[:2]
    Sequential(
      (0): Linear(in_features=10, out_features=100, bias=True)
      (1): Tanh()
    )
    """
    return MLPStack.init(layer_sizes, activation, [generator]).to_modules()[0]


def _shuffled(n: int, config: DPSGDConfig, generator: torch.Generator) -> tuple[Tensor, ...]:
    """One epoch of shuffled minibatches (non-private training)."""
    return torch.randperm(n, generator=generator).split(config.batch_size)


def train_dp(
    module: nn.Module,
    X: Tensor,
    y: Tensor,
    *,
    config: DPSGDConfig,
    generator: torch.Generator,
    loss: str | Loss = "cross_entropy",
    optimizer: torch.optim.Optimizer | None = None,
    canary_gradients: Tensor | None = None,
    noise: NoiseSource | None = None,
) -> TrainResult:
    """Train any ``nn.Module`` in place with DP-SGD (the generic torch.func path).

    Parameters
    ----------
    module : nn.Module
        Trained in place.
    X : Tensor of shape (n, d)
    y : Tensor of shape (n,)
        int64 class indices for cross-entropy, float targets for MSE.
    config : DPSGDConfig
    generator : torch.Generator
        Shuffles a non-private run; the Poisson draws and the noise of a private run when
        ``noise`` is not given (reproducible under a seed: simulations only).
    loss : str or Loss, default="cross_entropy"
    optimizer : torch.optim.Optimizer, optional
        Any optimizer over ``module.parameters()``; the noisy gradient is written into ``.grad``.
        Defaults to the one named in ``config``.
    canary_gradients : Tensor of shape (m, P), optional
        For privacy auditing (:mod:`pubsubml.audit`): ``m`` extra records given by their
        per-sample gradients over the ``P`` trainable parameters (flattened in
        ``named_parameters()`` order).  They count in ``n``, are Poisson-sampled at every step
        after the data rows and clipped to C like any record.  Private runs only.
    noise : NoiseSource, optional
        Source of the Poisson draws and the noise: :class:`~pubsubml.privacy.noise.SecureNoise`
        for a model that may be released; default ``SeededNoise(generator)``.

    Returns
    -------
    TrainResult

    Raises
    ------
    DataValidationError
        Shapes of ``X`` and ``y`` do not agree, or no rows.

    Notes
    -----
    The guarantee holds for the reported ``(steps, sample_rate, noise_multiplier)``: compute ε
    from :attr:`TrainResult.events` with the accountant, never from the configuration.
    """
    n = _check_data(X, y)
    lossf = _loss(loss)
    named = {k: p for k, p in module.named_parameters() if p.requires_grad}
    n += _canary_count(canary_gradients, named, config)
    q, steps = config.sample_rate_for(n), config.steps_for(n)
    if optimizer is None:
        make = torch.optim.Adam if config.optimizer == "adam" else torch.optim.SGD
        optimizer = make(list(named.values()), lr=config.lr)
    if not config.private:
        sizes = _train_minibatches(module, X, y, lossf, optimizer, config, generator, n)
        return TrainResult(module, steps, q, 0.0, math.inf, False, sizes)
    source = SeededNoise(generator) if noise is None else noise
    run = _PrivateRun(module, named, lossf, optimizer, config, source, q, n)
    sizes = run.train(X, y, steps, canary_gradients)
    sigma, clip = config.noise_multiplier, config.max_grad_norm
    return TrainResult(module, steps, q, sigma, clip, True, sizes, source.kind)


def _canary_count(
    canary_gradients: Tensor | None, named: Mapping[str, Tensor], config: DPSGDConfig
) -> int:
    """The number of canary records (0 without canaries), after checking their shape.

    Raises
    ------
    ValueError
        Canaries in a run that is not private.
    DataValidationError
        Canary gradients that are not of shape (m, P).
    """
    if canary_gradients is None:
        return 0
    n_params = sum(p.numel() for p in named.values())
    if not config.private:
        raise ValueError("canary gradients audit a private run; this one is not private")
    if canary_gradients.ndim != 2 or canary_gradients.shape[1] != n_params:
        raise DataValidationError(f"canary gradients must have shape (m, {n_params})")
    return int(canary_gradients.shape[0])


def _train_minibatches(
    module: nn.Module,
    X: Tensor,
    y: Tensor,
    loss: Loss,
    optimizer: torch.optim.Optimizer,
    config: DPSGDConfig,
    generator: torch.Generator,
    n: int,
) -> Tensor:
    """Non-private training: shuffled minibatches, unclipped gradients averaged over each batch;
    returns the batch sizes."""
    sizes = torch.zeros(config.steps_for(n), dtype=torch.long)
    batches = (b for _ in range(config.epochs) for b in _shuffled(n, config, generator))
    for t, idx in enumerate(batches):
        optimizer.zero_grad()
        loss.per_sample(module(X[idx]), y[idx]).mean().backward()
        optimizer.step()
        sizes[t] = len(idx)
    return sizes


class _PrivateRun:
    """The DP-SGD steps of one private run of :func:`train_dp` (``n`` records, canaries included)."""

    def __init__(
        self,
        module: nn.Module,
        named: Mapping[str, Tensor],
        loss: Loss,
        optimizer: torch.optim.Optimizer,
        config: DPSGDConfig,
        source: NoiseSource,
        q: float,
        n: int,
    ) -> None:
        self.module, self.named, self.loss, self.optimizer = module, named, loss, optimizer
        self.source, self.q, self.n = source, q, n
        self.sigma, self.clip = config.noise_multiplier, config.max_grad_norm

    def train(self, X: Tensor, y: Tensor, steps: int, canary_gradients: Tensor | None) -> Tensor:
        """Run ``steps`` steps on the rows of ``X`` (and the canaries); returns the batch sizes."""
        sizes = torch.zeros(steps, dtype=torch.long)
        draw = torch.empty(sum(p.numel() for p in self.named.values()))
        for t in range(steps):
            idx = self.source.poisson_mask(X.shape[0], self.q).nonzero().squeeze(1)
            sizes[t] = len(idx)
            summed = self._clipped_sum(X[idx], y[idx])
            if canary_gradients is not None and canary_gradients.shape[0]:
                sizes[t] += add_canaries(summed, canary_gradients, self.q, self.clip, self.source)
            self._noisy_step(summed, draw)
        return sizes

    def _clipped_sum(self, X: Tensor, y: Tensor) -> dict[str, Tensor]:
        """Σ of the batch's per-sample gradients, each clipped to C (zeros for an empty batch)."""
        if len(X) == 0:
            return {k: torch.zeros_like(p) for k, p in self.named.items()}
        psg = per_sample_gradients(self.module, self.named, X, y, self.loss)
        return {k: g.sum(0) for k, g in clip_per_sample(psg, self.clip)[0].items()}

    def _noisy_step(self, summed: dict[str, Tensor], draw: Tensor) -> None:
        """Add N(0, σ²C²) to the clipped sum, divide by the expected batch q·n, step."""
        self.source.normal_(draw)
        sizes = [p.numel() for p in self.named.values()]
        for (k, p), z in zip(self.named.items(), draw.split(sizes), strict=True):
            p.grad = (summed[k] + self.sigma * self.clip * z.view_as(p)) / (self.q * self.n)
        self.optimizer.step()
