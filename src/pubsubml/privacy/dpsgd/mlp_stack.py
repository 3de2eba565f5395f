"""The ``S`` networks of the fast DP-SGD path, stacked: forward pass and ghost clipping.

:class:`MLPStack` holds ``S`` MLPs (Linear + elementwise activation) of one architecture, their
parameters stacked along a leading site dimension, and never materialises per-sample gradients:
the per-sample gradient of a linear layer is the outer product ``g_i a_iᵀ``, so
``‖∇_i‖² = Σ_layers ‖g_i‖²(‖a_i‖² + 1)`` and the clipped sum is ``(c ∘ G)ᵀ A``, one batched matmul
per layer ("ghost clipping").  The clipped sum is step 2 of DP-SGD; the noise, the sampling and
the optimizer are :func:`~pubsubml.privacy.dpsgd.stacked.train_dp_stacked`'s.

References
----------
pubsub-ml.txt §7.2 (Table 4 networks) and §8 (DP-SGD); Abadi et al., "Deep learning with
differential privacy", CCS 2016.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import torch
from torch import Tensor, nn

from pubsubml.privacy.dpsgd.config import _CLIP_EPS
from pubsubml.privacy.dpsgd.functions import ACTIVATIONS, Loss, _activation, _loss

__all__ = ["MLPStack"]


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
