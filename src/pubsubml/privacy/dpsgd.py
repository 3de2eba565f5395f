"""DP-SGD: per-sample clipping, Gaussian noise and Poisson sampling, for one model or many at once.

Publishers train their models with DP-SGD (pubsub-ml.txt §7.2 and §8: "the DP guaranteed using
DPSGD [1]", Abadi et al. 2016).  Each step samples every row independently with probability ``q``
(Poisson sampling, which the accountant assumes), clips every per-sample gradient to L2 norm ``C``
over all parameters jointly, adds N(0, σ²C²) to the sum of clipped gradients and divides by the
*expected* batch size ``q·n`` (as Opacus does).  An epoch is ``round(1/q)`` steps.

Two paths compute the clipped sum:

* the generic path (:func:`per_sample_gradients`, :func:`train_dp`) works for any ``nn.Module``
  with ``torch.func`` (vmap + grad + functional_call) and is the reference;
* the fast path (:class:`MLPStack`, :func:`train_dp_stacked`) trains ``S`` multilayer perceptrons
  (Linear + elementwise activation) at once, parameters stacked along a leading site dimension, and
  never materialises per-sample gradients: the per-sample gradient of a linear layer is the outer
  product ``g_i a_iᵀ``, so ``‖∇_i‖² = Σ_layers ‖g_i‖²(‖a_i‖² + 1)`` and the clipped sum is
  ``(c ∘ G)ᵀ A``, one batched matmul per layer ("ghost clipping").

Randomness follows one protocol in both paths, so a site's model depends only on its own sources:
the initial weights (:func:`init_mlp`) from its generator, then per step the Poisson mask over its
``n`` rows and the noise over all ``P`` parameters in ``module.parameters()`` order from its noise
source (:mod:`pubsubml.privacy.noise`): :class:`~pubsubml.privacy.noise.SecureNoise` for a model
that may be released, or by default :class:`~pubsubml.privacy.noise.SeededNoise` over the same
generator (``rand(n) < q`` and ``randn(P)``), reproducible, for simulations.  Without privacy
(``DPSGDConfig(private=False)``) both paths shuffle (``randperm(n)`` per epoch) into minibatches of
``batch_size`` rows and average the unclipped gradients.  Every site of a stack has its own data
size, sample rate, step count, noise and optimizer state; torch's Adam and SGD are elementwise, so
the stacked optimizer is exactly ``S`` independent ones.

Notes
-----
The guarantee holds for what :class:`TrainResult` reports (steps, sample rate, σ, C) and for
add/remove-one neighbours; compute ε from :attr:`TrainResult.events`.  It holds against an
adversary who cannot know the noise: with the default seeded source (as in Opacus without
``secure_mode``) whoever knows the seed can regenerate the noise, so a model that may leave the
site is trained with ``noise=SecureNoise()`` (a ChaCha20 stream keyed from ``os.urandom``, noise
hardened against floating-point attacks; the learners do this unless given a ``noise_seed``).

Speed: the fast path runs small batched matmuls; on a machine whose cores are shared with other
processes, one intra-op thread (``torch.set_num_threads(1)``) is often much faster than several,
because idle OpenMP workers compete for the cores (see ``benchmarks/RESULTS.md``).

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
from pubsubml.privacy.dpsgd_spec import (
    _CLIP_EPS,
    ACTIVATIONS,
    LOSSES,
    Activation,
    DPSGDConfig,
    Loss,
    TrainResult,
    _check_data,
    _loss,
)
from pubsubml.privacy.mlp_stack import MLPStack, train_dp_stacked
from pubsubml.privacy.noise import NoiseSource, SeededNoise

__all__ = [
    "ACTIVATIONS",
    "LOSSES",
    "Activation",
    "DPSGDConfig",
    "Loss",
    "MLPStack",
    "TrainResult",
    "clip_per_sample",
    "init_mlp",
    "per_sample_gradients",
    "poisson_sample",
    "train_dp",
    "train_dp_stacked",
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
        A key of :data:`LOSSES` or a :class:`Loss`.

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


def _add_canaries(
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
    n_params = sum(p.numel() for p in named.values())
    if canary_gradients is not None:
        if not config.private:
            raise ValueError("canary gradients audit a private run; this one is not private")
        if canary_gradients.ndim != 2 or canary_gradients.shape[1] != n_params:
            raise DataValidationError(f"canary gradients must have shape (m, {n_params})")
        n += canary_gradients.shape[0]
    q, steps = config.sample_rate_for(n), config.steps_for(n)
    if optimizer is None:
        make = torch.optim.Adam if config.optimizer == "adam" else torch.optim.SGD
        optimizer = make(list(named.values()), lr=config.lr)
    sizes = torch.zeros(steps, dtype=torch.long)
    if not config.private:
        batches = (b for _ in range(config.epochs) for b in _shuffled(n, config, generator))
        for t, idx in enumerate(batches):
            optimizer.zero_grad()
            lossf.per_sample(module(X[idx]), y[idx]).mean().backward()
            optimizer.step()
            sizes[t] = len(idx)
        return TrainResult(module, steps, q, 0.0, math.inf, False, sizes)
    sigma, clip = config.noise_multiplier, config.max_grad_norm
    n_data = X.shape[0]
    source = SeededNoise(generator) if noise is None else noise
    draw = torch.empty(n_params)
    for t in range(steps):
        idx = source.poisson_mask(n_data, q).nonzero().squeeze(1)
        sizes[t] = len(idx)
        if len(idx) > 0:
            psg = per_sample_gradients(module, named, X[idx], y[idx], lossf)
            summed = {k: g.sum(0) for k, g in clip_per_sample(psg, clip)[0].items()}
        else:
            summed = {k: torch.zeros_like(p) for k, p in named.items()}
        if canary_gradients is not None and canary_gradients.shape[0]:
            sizes[t] += _add_canaries(summed, canary_gradients, q, clip, source)
        source.normal_(draw)
        for (k, p), z in zip(
            named.items(), draw.split([p.numel() for p in named.values()]), strict=True
        ):
            p.grad = (summed[k] + sigma * clip * z.view_as(p)) / (q * n)
        optimizer.step()
    return TrainResult(module, steps, q, sigma, clip, True, sizes, source.kind)
