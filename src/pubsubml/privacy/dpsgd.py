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

Randomness follows one protocol in both paths, so a site's model depends only on its own generator:
the initial weights (:func:`init_mlp`), then per step the Poisson draws ``rand(n)`` and the noise
``randn(P)`` over all ``P`` parameters in ``module.parameters()`` order.  Without privacy
(``DPSGDConfig(private=False)``) both paths shuffle (``randperm(n)`` per epoch) into minibatches of
``batch_size`` rows and average the unclipped gradients.  Every site of a stack has its own data
size, sample rate, step count, noise and optimizer state; torch's Adam and SGD are elementwise, so
the stacked optimizer is exactly ``S`` independent ones.

Notes
-----
The guarantee holds for what :class:`TrainResult` reports (steps, sample rate, σ, C) and for
add/remove-one neighbours; compute ε from :attr:`TrainResult.events`.  Poisson draws and noise come
from ``torch.Generator`` (a pseudo-random generator seeded by the caller), as in Opacus without
``secure_mode``, and the float32 Gaussian noise is not hardened against floating-point attacks:
appropriate for simulation and research; a deployment facing an adversary who can observe or
reconstruct the seed needs a cryptographically secure source.

Speed: the fast path runs small batched matmuls; on a machine whose cores are shared with other
processes, one intra-op thread (``torch.set_num_threads(1)``) is often much faster than several,
because idle OpenMP workers compete for the cores (see ``benchmarks/RESULTS.md``).

References
----------
pubsub-ml.txt §7.2 (Table 4 networks) and §8 (DP-SGD); Abadi et al., "Deep learning with
differential privacy", CCS 2016.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor, nn
from torch.func import functional_call, grad, vmap

from pubsubml.errors import DataValidationError, InvalidPrivacyParameterError
from pubsubml.privacy.events import DPEvent

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

_CLIP_EPS = 1e-6  # clip factor C / (‖∇‖ + 1e-6), as Opacus
_BETA1, _BETA2, _ADAM_EPS = 0.9, 0.999, 1e-8  # torch.optim.Adam defaults


@dataclass(frozen=True)
class Activation:
    """An elementwise activation of the fast path.

    ``forward_(z)`` applies it in place; ``backward_(h, a, tmp)`` multiplies the upstream gradient
    ``h`` in place by the derivative written from the output ``a`` (``tmp``: scratch of a's shape).
    """

    module: type[nn.Module]
    forward_: Callable[[Tensor], Tensor]
    backward_: Callable[[Tensor, Tensor, Tensor], Tensor]


def _tanh_backward_(h: Tensor, a: Tensor, tmp: Tensor) -> Tensor:
    return h.addcmul_(h, torch.mul(a, a, out=tmp), value=-1.0)  # h·(1 − a²)


def _relu_backward_(h: Tensor, a: Tensor, tmp: Tensor) -> Tensor:
    return h.masked_fill_(a <= 0, 0.0)


def _sigmoid_backward_(h: Tensor, a: Tensor, tmp: Tensor) -> Tensor:
    return h.mul_(torch.sub(a, torch.mul(a, a, out=tmp), out=tmp))  # h·a(1 − a)


@dataclass(frozen=True)
class Loss:
    """A per-sample loss over outputs (..., k) and targets (...), and its gradient in the outputs."""

    per_sample: Callable[[Tensor, Tensor], Tensor]
    output_grad: Callable[[Tensor, Tensor], Tensor]


def _ce(out: Tensor, y: Tensor) -> Tensor:
    return -torch.log_softmax(out, -1).gather(-1, y.unsqueeze(-1)).squeeze(-1)


def _ce_grad(out: Tensor, y: Tensor) -> Tensor:
    g = torch.softmax(out, -1)
    return g.scatter_add_(-1, y.unsqueeze(-1), torch.full_like(g[..., :1], -1.0))


ACTIVATIONS: dict[str, Activation] = {
    "tanh": Activation(nn.Tanh, torch.tanh_, _tanh_backward_),
    "relu": Activation(nn.ReLU, torch.relu_, _relu_backward_),
    "sigmoid": Activation(nn.Sigmoid, torch.sigmoid_, _sigmoid_backward_),
}
LOSSES: dict[str, Loss] = {
    "cross_entropy": Loss(_ce, _ce_grad),  # logits (..., k), int64 labels (...)
    "mse": Loss(lambda o, y: (o[..., 0] - y) ** 2, lambda o, y: 2.0 * (o - y.unsqueeze(-1))),
}


def _activation(name: str) -> Activation:
    if name not in ACTIVATIONS:
        raise ValueError(f"unknown activation {name!r}; choose one of {sorted(ACTIVATIONS)}")
    return ACTIVATIONS[name]


def _loss(loss: str | Loss) -> Loss:
    if isinstance(loss, Loss):
        return loss
    if loss not in LOSSES:
        raise ValueError(f"unknown loss {loss!r}; choose one of {sorted(LOSSES)}")
    return LOSSES[loss]


@dataclass(frozen=True)
class DPSGDConfig:
    """Hyperparameters of one DP-SGD run.

    Parameters
    ----------
    noise_multiplier : float, default=1.0
        σ: the noise added to the sum of clipped gradients is N(0, σ²C²).
    max_grad_norm : float, default=1.0
        C: every per-sample gradient is clipped to this L2 norm (all parameters jointly).
    batch_size : int, default=100
        Expected batch size; the sample rate is ``q = min(1, batch_size / n)`` unless given.
    sample_rate : float, optional
        Poisson sampling probability ``q`` (overrides ``batch_size`` when private).
    epochs : int, default=30
        A private run is ``epochs · round(1/q)`` steps (Opacus truncates ``1/q`` instead; the
        two agree whenever ``n / batch_size`` is an integer).
    lr : float, default=1e-3
    optimizer : {"adam", "sgd"}, default="adam"
        torch's Adam (betas 0.9, 0.999, eps 1e-8) or plain SGD.
    private : bool, default=True
        ``False`` trains without clipping or noise on shuffled minibatches (``ceil(n/batch_size)``
        steps per epoch, gradients averaged over the actual batch): a model that is never released.

    Raises
    ------
    InvalidPrivacyParameterError
        σ < 0, C ≤ 0 or a sample rate outside (0, 1].
    ValueError
        Non-positive batch size, epochs or learning rate, or an unknown optimizer.

    Examples
    --------
    >>> cfg = DPSGDConfig(noise_multiplier=1.0, batch_size=100, epochs=30)
    >>> cfg.sample_rate_for(500), cfg.steps_for(500)
    (0.2, 150)
    """

    noise_multiplier: float = 1.0
    max_grad_norm: float = 1.0
    batch_size: int = 100
    sample_rate: float | None = None
    epochs: int = 30
    lr: float = 1e-3
    optimizer: Literal["adam", "sgd"] = "adam"
    private: bool = True

    def __post_init__(self) -> None:
        if not (self.noise_multiplier >= 0 and math.isfinite(self.noise_multiplier)):
            raise InvalidPrivacyParameterError(
                f"noise_multiplier must be finite and >= 0, got {self.noise_multiplier}"
            )
        if not (self.max_grad_norm > 0 and math.isfinite(self.max_grad_norm)):
            raise InvalidPrivacyParameterError(
                f"max_grad_norm must be finite and > 0, got {self.max_grad_norm}"
            )
        if self.sample_rate is not None and not 0.0 < self.sample_rate <= 1.0:
            raise InvalidPrivacyParameterError(
                f"sample_rate must be in (0, 1], got {self.sample_rate}"
            )
        for name in ("batch_size", "epochs"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if not (self.lr > 0 and math.isfinite(self.lr)):
            raise ValueError(f"lr must be finite and > 0, got {self.lr}")
        if self.optimizer not in ("adam", "sgd"):
            raise ValueError(f"unknown optimizer {self.optimizer!r}; choose 'adam' or 'sgd'")

    def sample_rate_for(self, n: int) -> float:
        """Sample rate ``q`` for ``n`` rows (the nominal ``batch_size / n`` when not private)."""
        if self.private and self.sample_rate is not None:
            return self.sample_rate
        return min(1.0, self.batch_size / n)

    def steps_for(self, n: int) -> int:
        """Number of optimizer steps that training on ``n`` rows runs."""
        if not self.private:
            return self.epochs * math.ceil(n / self.batch_size)
        return self.epochs * max(1, round(1.0 / self.sample_rate_for(n)))


@dataclass
class TrainResult:
    """What a training run actually did, for the accountant.

    Attributes
    ----------
    module : nn.Module
        The trained model.
    steps, sample_rate, noise_multiplier, max_grad_norm : int, float, float, float
        Steps run, Poisson rate ``q``, σ and C (σ = 0 and C = inf when not private).
    private : bool
    batch_sizes : Tensor of shape (steps,)
        The number of rows in each step's batch (variable under Poisson sampling).
    """

    module: nn.Module
    steps: int
    sample_rate: float
    noise_multiplier: float
    max_grad_norm: float
    private: bool
    batch_sizes: Tensor

    @property
    def events(self) -> list[DPEvent]:
        """The run as DP events (one subsampled Gaussian, ``steps`` times); empty if not private.

        Raises
        ------
        InvalidPrivacyParameterError
            A private run with σ = 0, which has no DP guarantee.
        """
        if not self.private:
            return []
        return [
            DPEvent(
                mechanism="subsampled_gaussian",
                noise_multiplier=self.noise_multiplier,
                sample_rate=self.sample_rate,
                count=self.steps,
            )
        ]


# ---- generic path (any nn.Module) ------------------------------------------------------------
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


def _check_data(X: Tensor, y: Tensor) -> int:
    if X.dim() != 2 or y.dim() != 1 or X.shape[0] != y.shape[0] or X.shape[0] == 0:
        raise DataValidationError(
            f"expected X of shape (n, d) and y of shape (n,) with n >= 1, got {tuple(X.shape)} "
            f"and {tuple(y.shape)}"
        )
    return int(X.shape[0])


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
        Source of the Poisson draws and the noise (reproducible under a seed).
    loss : str or Loss, default="cross_entropy"
    optimizer : torch.optim.Optimizer, optional
        Any optimizer over ``module.parameters()``; the noisy gradient is written into ``.grad``.
        Defaults to the one named in ``config``.

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
    q, steps = config.sample_rate_for(n), config.steps_for(n)
    named = {k: p for k, p in module.named_parameters() if p.requires_grad}
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
    for t in range(steps):
        idx = poisson_sample(n, q, generator).nonzero().squeeze(1)
        sizes[t] = len(idx)
        if len(idx) > 0:
            psg = per_sample_gradients(module, named, X[idx], y[idx], lossf)
            summed = {k: g.sum(0) for k, g in clip_per_sample(psg, clip)[0].items()}
        else:
            summed = {k: torch.zeros_like(p) for k, p in named.items()}
        noise = torch.randn(sum(p.numel() for p in named.values()), generator=generator)
        for (k, p), z in zip(
            named.items(), noise.split([p.numel() for p in named.values()]), strict=True
        ):
            p.grad = (summed[k] + sigma * clip * z.view_as(p)) / (q * n)
        optimizer.step()
    return TrainResult(module, steps, q, sigma, clip, True, sizes)


# ---- fast path: S multilayer perceptrons at once ----------------------------------------------
class _Scratch:
    """Reusable flat buffers: large temporaries are not reallocated at every step."""

    def __init__(self) -> None:
        self._bufs: dict[str, Tensor] = {}

    def get(self, name: str, shape: Sequence[int]) -> Tensor:
        numel = math.prod(shape)
        buf = self._bufs.get(name)
        if buf is None or buf.numel() < numel:
            buf = self._bufs[name] = torch.empty(int(numel * 1.25) + 1)
        return buf[:numel].view(*shape)


def _buffer(scratch: _Scratch | None, name: str, shape: Sequence[int]) -> Tensor:
    return torch.empty(*shape) if scratch is None else scratch.get(name, shape)


class MLPStack:
    """``S`` MLPs of one architecture, parameters stacked along a leading site dimension.

    Parameters
    ----------
    weights : sequence of Tensor of shape (S, out_l, in_l)
    biases : sequence of Tensor of shape (S, out_l)
    activation : {"tanh", "relu", "sigmoid"}
        Applied after every layer but the last.

    Raises
    ------
    ValueError
        Shapes that do not chain, or an unknown activation.

    Examples
    --------
    >>> stack = MLPStack.init((10, 100, 50, 2), "tanh", [torch.Generator() for _ in range(3)])
    >>> tuple(stack.forward(torch.zeros(3, 7, 10)).shape), stack.layer_sizes
    ((3, 7, 2), (10, 100, 50, 2))
    """

    def __init__(
        self, weights: Sequence[Tensor], biases: Sequence[Tensor], activation: str
    ) -> None:
        self._act = _activation(activation)
        if not weights or len(weights) != len(biases):
            raise ValueError("an MLPStack needs as many bias as weight tensors, at least one")
        S = weights[0].shape[0]
        for i, (w, b) in enumerate(zip(weights, biases, strict=True)):
            chained = i == 0 or w.shape[2] == weights[i - 1].shape[1]
            if w.dim() != 3 or w.shape[0] != S or b.shape != (S, w.shape[1]) or not chained:
                raise ValueError(
                    f"layer {i}: weight {tuple(w.shape)} and bias {tuple(b.shape)} do not chain"
                )
        self._shapes = [
            tuple(t.shape[1:]) for pair in zip(weights, biases, strict=True) for t in pair
        ]
        #: All parameters of each site in one row, (S, P): the optimizer and the noise act on it
        #: in single operations; ``weights`` and ``biases`` are views into it.
        self.flat = torch.empty(S, sum(math.prod(shape) for shape in self._shapes))
        views = self._views(self.flat)
        for view, t in zip(
            views, (t for pair in zip(weights, biases, strict=True) for t in pair), strict=True
        ):
            view.copy_(t.detach())
        self.weights, self.biases = views[0::2], views[1::2]
        self.activation = activation

    @property
    def n_sites(self) -> int:
        """Number of stacked models ``S``."""
        return int(self.weights[0].shape[0])

    @property
    def layer_sizes(self) -> tuple[int, ...]:
        """(n_inputs, hidden…, n_outputs)."""
        return (int(self.weights[0].shape[2]), *(int(w.shape[1]) for w in self.weights))

    def _views(self, flat: Tensor) -> list[Tensor]:
        """Per-parameter views (S, *shape) of a flat (S, P) tensor, in :meth:`parameters` order."""
        sizes = [math.prod(shape) for shape in self._shapes]
        return [
            c.view(-1, *shape) for c, shape in zip(flat.split(sizes, 1), self._shapes, strict=True)
        ]

    def parameters(self) -> list[Tensor]:
        """Stacked parameters in ``nn.Sequential.parameters()`` order: W0, b0, W1, b1, …"""
        return [t for pair in zip(self.weights, self.biases, strict=True) for t in pair]

    @classmethod
    def init(
        cls, layer_sizes: Sequence[int], activation: str, generators: Sequence[torch.Generator]
    ) -> MLPStack:
        """One model per generator, each as :func:`init_mlp` draws it (U(±1/√fan_in))."""
        S, pairs = len(generators), list(itertools.pairwise(layer_sizes))
        weights = [torch.empty(S, fan_out, fan_in) for fan_in, fan_out in pairs]
        biases = [torch.empty(S, fan_out) for _, fan_out in pairs]
        for s, g in enumerate(generators):
            for w, b in zip(weights, biases, strict=True):
                torch.rand(w.shape[1:], generator=g, out=w[s])
                torch.rand(b.shape[1:], generator=g, out=b[s])
        for w, b in zip(weights, biases, strict=True):
            bound = 1.0 / math.sqrt(w.shape[2])
            w.mul_(2 * bound).sub_(bound)
            b.mul_(2 * bound).sub_(bound)
        return cls(weights, biases, activation)

    @classmethod
    def from_modules(cls, modules: Sequence[nn.Sequential]) -> MLPStack:
        """Stack ``nn.Sequential`` MLPs (Linear, activation, …, Linear) of one architecture.

        Raises
        ------
        ValueError
            Modules that are not such MLPs, mix activations or differ in shape.
        """
        parts = [list(mod) for mod in modules]
        kinds = {type(m) for p in parts for m in p[1::2]}
        mlp = all(
            len(p) % 2 == 1
            and all(isinstance(m, nn.Linear) and m.bias is not None for m in p[0::2])
            for p in parts
        )
        # A single Linear layer applies no activation: any name will do.
        names = [k for k, a in ACTIVATIONS.items() if {a.module} == kinds] if kinds else ["tanh"]
        if not parts or not mlp or len(names) != 1 or len({len(p) for p in parts}) != 1:
            raise ValueError("expected nn.Sequential(Linear, activation, …, Linear) of one shape")
        layers = list(zip(*(p[0::2] for p in parts), strict=True))
        weights = [torch.stack([lin.weight.detach() for lin in layer]) for layer in layers]
        biases = [torch.stack([lin.bias.detach() for lin in layer]) for layer in layers]
        return cls(weights, biases, names[0])

    def to_modules(self) -> list[nn.Sequential]:
        """The ``S`` models as ``nn.Sequential`` of alternating ``nn.Linear`` and activations."""
        out = []
        with torch.random.fork_rng(devices=[]):  # nn.Linear's own init must not move the global RNG
            for s in range(self.n_sites):
                layers: list[nn.Module] = []
                for w, b in zip(self.weights, self.biases, strict=True):
                    lin = nn.Linear(w.shape[2], w.shape[1])
                    lin.weight, lin.bias = nn.Parameter(w[s].clone()), nn.Parameter(b[s].clone())
                    layers += [lin, self._act.module()]
                out.append(nn.Sequential(*layers[:-1]))
        return out

    def forward(self, X: Tensor) -> Tensor:
        """Outputs of shape (S, b, n_outputs) for inputs of shape (S, b, n_inputs)."""
        return self._forward(X, None)[-1]

    def _forward(self, X: Tensor, scratch: _Scratch | None) -> list[Tensor]:
        acts, last = [X], len(self.weights) - 1
        for i, (w, b) in enumerate(zip(self.weights, self.biases, strict=True)):
            out = _buffer(
                scratch if i < last else None, f"a{i}", (X.shape[0], X.shape[1], w.shape[1])
            )
            z = torch.baddbmm(b.unsqueeze(1), acts[-1], w.transpose(1, 2), out=out)
            acts.append(self._act.forward_(z) if i < last else z)
        return acts

    def _layer_grads(
        self, X: Tensor, y: Tensor, valid: Tensor, loss: Loss, scratch: _Scratch | None
    ) -> tuple[list[Tensor], list[Tensor]]:
        """Layer inputs ``A_l`` (S, b, in_l) and per-sample output gradients ``G_l`` (S, b, out_l)."""
        acts = self._forward(X, scratch)
        g = loss.output_grad(acts[-1], y).mul_(valid.unsqueeze(-1))
        grads = [g]
        for i in range(len(self.weights) - 1, 0, -1):
            h = torch.bmm(g, self.weights[i], out=_buffer(scratch, f"g{i}", acts[i].shape))
            g = self._act.backward_(h, acts[i], _buffer(scratch, "tmp", acts[i].shape))
            grads.append(g)
        return acts[:-1], grads[::-1]

    def per_sample_gradients(
        self, X: Tensor, y: Tensor, valid: Tensor, loss: str | Loss = "cross_entropy"
    ) -> list[Tensor]:
        """Materialised per-sample gradients (S, b, *param.shape), in :meth:`parameters` order.

        A reference for tests; training uses :meth:`clipped_gradient_sum`, which never builds them.
        """
        A, G = self._layer_grads(X, y, valid, _loss(loss), None)
        return [
            t for a, g in zip(A, G, strict=True) for t in (torch.einsum("sbo,sbi->sboi", g, a), g)
        ]

    def clipped_gradient_sum(
        self,
        X: Tensor,
        y: Tensor,
        valid: Tensor,
        loss: str | Loss,
        max_grad_norm: Tensor | None,
        scratch: _Scratch | None = None,
        out: Tensor | None = None,
    ) -> tuple[list[Tensor], Tensor]:
        """Sum over samples of per-sample gradients clipped to ``max_grad_norm`` (ghost clipping).

        Parameters
        ----------
        X : Tensor of shape (S, b, n_inputs)
        y : Tensor of shape (S, b)
        valid : bool Tensor of shape (S, b)
            Rows that take part (padding and unsampled rows contribute nothing).
        loss : str or Loss
        max_grad_norm : Tensor of shape (S,) or None
            Per-site C; ``None`` sums the unclipped gradients.
        scratch : optional
            Reused buffers (internal).
        out : Tensor of shape (S, P), optional
            Flat gradient buffer, laid out as :attr:`flat`, to write into.

        Returns
        -------
        grads : list of Tensor of shape (S, *param.shape), in :meth:`parameters` order
            Views into ``out`` (or into a new flat tensor).
        norms : Tensor of shape (S, b), per-sample gradient norms before clipping (0 if not valid)
        """
        A, G = self._layer_grads(X, y, valid, _loss(loss), scratch)
        sq = torch.zeros(X.shape[0], X.shape[1])
        for a, g in zip(A, G, strict=True):
            a_sq = torch.linalg.vector_norm(a, dim=-1).square_().add_(1.0)
            sq.addcmul_(torch.linalg.vector_norm(g, dim=-1).square_(), a_sq)
        norms = sq.sqrt_()
        if max_grad_norm is not None:
            factor = (max_grad_norm.unsqueeze(1) / (norms + _CLIP_EPS)).clamp_(max=1.0)
            G = [g.mul_(factor.unsqueeze(-1)) for g in G]
        grads = self._views(torch.empty_like(self.flat) if out is None else out)
        for i, (a, g) in enumerate(zip(A, G, strict=True)):
            torch.bmm(g.transpose(1, 2), a, out=grads[2 * i])
            torch.sum(g, 1, out=grads[2 * i + 1])
        return grads, norms


class _StackedOptimizer:
    """torch's Adam or SGD for each site, with per-site step counts and learning rates.

    ``step`` consumes the gradient tensors (they serve as scratch).  Sites not ``active`` keep their
    parameters and state unchanged.
    """

    def __init__(self, params: list[Tensor], kind: str, lr: Tensor) -> None:
        self.params, self.kind, self.lr = params, kind, lr.to(torch.float64)
        self.m = [torch.zeros_like(p) for p in params] if kind == "adam" else []
        self.v = [torch.zeros_like(p) for p in params] if kind == "adam" else []
        self.t = torch.zeros(len(lr), dtype=torch.float64)

    def step(self, grads: list[Tensor], active: Tensor) -> None:
        self.t += active
        if bool(active.all()):
            self._update(self.params, grads, self.m, self.v, self.t, self.lr)
            return
        idx = active.nonzero().squeeze(1)
        ps, gs, ms, vs = ([x[idx] for x in xs] for xs in (self.params, grads, self.m, self.v))
        self._update(ps, gs, ms, vs, self.t[idx], self.lr[idx])
        for full, part in zip(self.params + self.m + self.v, ps + ms + vs, strict=True):
            full[idx] = part

    def _update(
        self,
        params: list[Tensor],
        grads: list[Tensor],
        ms: list[Tensor],
        vs: list[Tensor],
        t: Tensor,
        lr: Tensor,
    ) -> None:
        step_size = (lr / (1 - _BETA1**t)).float() if self.kind == "adam" else lr.float()
        bc2_sqrt = (1 - _BETA2**t).sqrt().float()
        for i, (p, g) in enumerate(zip(params, grads, strict=True)):
            shape = (-1,) + (1,) * (p.dim() - 1)
            if self.kind == "adam":
                m, v = ms[i], vs[i]
                m.lerp_(g, 1 - _BETA1)
                v.mul_(_BETA2).addcmul_(g, g, value=1 - _BETA2)
                g = torch.sqrt(v, out=g).div_(bc2_sqrt.view(shape)).add_(_ADAM_EPS)
                g = torch.div(m, g, out=g)
            p.sub_(g.mul_(step_size.view(shape)))


def _pad(Xs: Sequence[Tensor], ys: Sequence[Tensor]) -> tuple[Tensor, Tensor, list[int]]:
    ns = [_check_data(X, y) for X, y in zip(Xs, ys, strict=True)]
    if len({X.shape[1] for X in Xs}) != 1:
        raise DataValidationError("every site must have the same number of input columns")
    X_pad = torch.zeros(len(ns), max(ns), Xs[0].shape[1])
    y_pad = torch.zeros(len(ns), max(ns), dtype=ys[0].dtype)
    for s, (X, y) in enumerate(zip(Xs, ys, strict=True)):
        X_pad[s, : ns[s]], y_pad[s, : ns[s]] = X, y
    return X_pad, y_pad, ns


def _batch_index(mask: Tensor) -> tuple[Tensor, Tensor]:
    """Indices (S, b_max) of each site's selected rows, and which entries are real (not padding)."""
    counts = mask.sum(1)
    b_max = max(1, int(counts.max()))
    rows, cols = mask.nonzero(as_tuple=True)
    idx = torch.zeros(mask.shape[0], b_max, dtype=torch.long)
    idx[rows, torch.arange(len(rows)) - (torch.cumsum(counts, 0) - counts)[rows]] = cols
    return idx, torch.arange(b_max).unsqueeze(0) < counts.unsqueeze(1)


def train_dp_stacked(
    stack: MLPStack,
    Xs: Sequence[Tensor],
    ys: Sequence[Tensor],
    *,
    configs: DPSGDConfig | Sequence[DPSGDConfig],
    generators: Sequence[torch.Generator],
    loss: str | Loss = "cross_entropy",
) -> list[TrainResult]:
    """Train the ``S`` MLPs of ``stack`` in place, each on its own data, in one batched computation.

    Site ``s`` trains on ``(Xs[s], ys[s])`` with ``configs[s]`` and draws from ``generators[s]``
    exactly what :func:`train_dp` draws, so its model does not depend on the other sites.  Sites
    may differ in size, sample rate, steps, σ, C and learning rate; a site that has run its steps
    stops (no draws, no update) while the others go on.

    Parameters
    ----------
    stack : MLPStack
    Xs : sequence of S Tensor of shape (n_s, n_inputs)
    ys : sequence of S Tensor of shape (n_s,)
    configs : DPSGDConfig or sequence of S DPSGDConfig
        All with the same ``optimizer`` and ``private``.
    generators : sequence of S torch.Generator
    loss : str or Loss, default="cross_entropy"

    Returns
    -------
    list of S TrainResult, each holding its trained site model as an ``nn.Sequential``.

    Raises
    ------
    ValueError
        Lengths that do not match ``stack.n_sites``, or configs that mix optimizers or privacy.
    DataValidationError
        A site whose ``X`` and ``y`` disagree or that has no rows.

    Examples
    --------
    >>> gens = [torch.Generator().manual_seed(s) for s in range(2)]
    >>> stack = MLPStack.init((3, 8, 2), "tanh", gens)
    >>> Xs, ys = [torch.rand(20, 3), torch.rand(30, 3)], [torch.zeros(20, dtype=torch.long)] * 2
    >>> ys[1] = torch.ones(30, dtype=torch.long)
    >>> res = train_dp_stacked(stack, Xs, ys, configs=DPSGDConfig(batch_size=5, epochs=2), generators=gens)
    >>> [(r.steps, r.sample_rate) for r in res]
    [(8, 0.25), (12, 0.16666666666666666)]
    """
    S = stack.n_sites
    cfgs = [configs] * S if isinstance(configs, DPSGDConfig) else list(configs)
    if not len(cfgs) == len(Xs) == len(ys) == len(generators) == S:
        raise ValueError(f"{S} stacked sites need {S} configs, X, y and generators")
    if len({(c.optimizer, c.private) for c in cfgs}) != 1:
        raise ValueError("all sites of a stack must share the optimizer and the privacy setting")
    X_pad, y_pad, ns = _pad(Xs, ys)
    qs = [c.sample_rate_for(n) for c, n in zip(cfgs, ns, strict=True)]
    steps = [c.steps_for(n) for c, n in zip(cfgs, ns, strict=True)]
    opt = _StackedOptimizer([stack.flat], cfgs[0].optimizer, torch.tensor([c.lr for c in cfgs]))
    run = _run_private if cfgs[0].private else _run_minibatch
    sizes = run(stack, opt, X_pad, y_pad, ns, qs, steps, cfgs, generators, _loss(loss))
    private = cfgs[0].private
    return [
        TrainResult(
            module=m,
            steps=steps[s],
            sample_rate=qs[s],
            noise_multiplier=cfgs[s].noise_multiplier if private else 0.0,
            max_grad_norm=cfgs[s].max_grad_norm if private else math.inf,
            private=private,
            batch_sizes=sizes[: steps[s], s].clone(),
        )
        for s, m in enumerate(stack.to_modules())
    ]


def _run_private(
    stack: MLPStack,
    opt: _StackedOptimizer,
    X_pad: Tensor,
    y_pad: Tensor,
    ns: list[int],
    qs: list[float],
    steps: list[int],
    cfgs: list[DPSGDConfig],
    generators: Sequence[torch.Generator],
    loss: Loss,
) -> Tensor:
    S, scratch = len(ns), _Scratch()
    q = torch.tensor(qs, dtype=torch.float32)
    clip = torch.tensor([c.max_grad_norm for c in cfgs], dtype=torch.float32)
    noise_std = torch.tensor([c.noise_multiplier for c in cfgs], dtype=torch.float32) * clip
    expected = q * torch.tensor(ns, dtype=torch.float32)
    uniforms = torch.full((S, X_pad.shape[1]), 2.0)  # padding keeps 2.0: never sampled
    noise, grad = torch.empty_like(stack.flat), torch.empty_like(stack.flat)
    sites, steps_t = torch.arange(S).unsqueeze(1), torch.tensor(steps)
    sizes = torch.zeros(max(steps), S, dtype=torch.long)
    for t in range(max(steps)):
        active = steps_t > t
        running = range(S) if bool(active.all()) else active.nonzero().squeeze(1).tolist()
        for s in running:
            torch.rand(ns[s], generator=generators[s], out=uniforms[s, : ns[s]])
        idx, valid = _batch_index((uniforms < q.unsqueeze(1)) & active.unsqueeze(1))
        sizes[t] = valid.sum(1)
        stack.clipped_gradient_sum(
            X_pad[sites, idx], y_pad[sites, idx], valid, loss, clip, scratch, out=grad
        )
        for s in running:
            torch.randn(noise.shape[1], generator=generators[s], out=noise[s])
        grad.addcmul_(noise, noise_std.unsqueeze(1)).div_(expected.unsqueeze(1))
        opt.step([grad], active)
    return sizes


def _run_minibatch(
    stack: MLPStack,
    opt: _StackedOptimizer,
    X_pad: Tensor,
    y_pad: Tensor,
    ns: list[int],
    qs: list[float],
    steps: list[int],
    cfgs: list[DPSGDConfig],
    generators: Sequence[torch.Generator],
    loss: Loss,
) -> Tensor:
    S, n_max, scratch = len(ns), X_pad.shape[1], _Scratch()
    batch = torch.tensor([c.batch_size for c in cfgs]).unsqueeze(1)
    n_batches = torch.tensor([math.ceil(n / c.batch_size) for n, c in zip(ns, cfgs, strict=True)])
    epochs = torch.tensor([c.epochs for c in cfgs])
    n_t, sites = torch.tensor(ns).unsqueeze(1), torch.arange(S)
    perm = torch.zeros(S, n_max, dtype=torch.long)
    sizes, done = torch.zeros(max(steps), S, dtype=torch.long), torch.zeros(S, dtype=torch.long)
    grad = torch.empty_like(stack.flat)
    for epoch in range(int(epochs.max())):
        training = epochs > epoch
        for s in training.nonzero().squeeze(1).tolist():
            perm[s, : ns[s]] = torch.randperm(ns[s], generator=generators[s])
        for k in range(int(n_batches[training].max())):
            active = training & (n_batches > k)
            pos = k * batch + torch.arange(int(batch.max())).unsqueeze(0)
            valid = (pos < n_t) & (pos < (k + 1) * batch) & active.unsqueeze(1)
            idx = perm[sites.unsqueeze(1), pos.clamp(max=n_max - 1)]
            rows = sites.unsqueeze(1), idx
            stack.clipped_gradient_sum(
                X_pad[rows], y_pad[rows], valid, loss, None, scratch, out=grad
            )
            count = valid.sum(1)
            sizes[done[active], sites[active]] = count[active]
            done += active
            opt.step([grad.div_(count.clamp(min=1).unsqueeze(1))], active)
    return sizes
