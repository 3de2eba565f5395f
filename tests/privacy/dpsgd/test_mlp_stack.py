"""The stacked networks of the fast DP-SGD path: per-sample gradients and ghost clipping, checked
against micro-batches (one backward pass per sample) and the generic DP-SGD path."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch
from torch import Tensor, nn

from pubsubml.privacy.dpsgd import LOSSES, MLPStack, clip_per_sample, per_sample_gradients

SIZES = (5, 7, 4, 3)


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    """Tiny tensors: one intra-op thread avoids OpenMP overhead on the shared cores."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _data(n: int, seed: int, loss: str = "cross_entropy", d: int = 5) -> tuple[Tensor, Tensor]:
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d, generator=g) * 2
    y = (
        torch.randint(0, 3, (n,), generator=g)
        if loss == "cross_entropy"
        else torch.randn(n, generator=g)
    )
    return X, y


def _microbatch_grads(module: nn.Module, X: Tensor, y: Tensor, loss: str) -> list[list[Tensor]]:
    """Ground truth: one forward/backward pass per sample."""
    out = []
    for i in range(len(X)):
        module.zero_grad()
        LOSSES[loss].per_sample(module(X[i : i + 1]), y[i : i + 1]).sum().backward()
        out.append([p.grad.clone() for p in module.parameters()])  # type: ignore[union-attr]
    return out


def _flat_norm(tensors: list[Tensor]) -> Tensor:
    return torch.sqrt(sum(t.pow(2).sum() for t in tensors))  # type: ignore[arg-type]


@pytest.mark.parametrize("activation", ["tanh", "relu", "sigmoid"])
@pytest.mark.parametrize("loss", ["cross_entropy", "mse"])
def test_fast_path_per_sample_gradients_equal_microbatches_on_stacked_sites(
    activation: str, loss: str
) -> None:
    sizes = SIZES if loss == "cross_entropy" else (*SIZES[:-1], 1)
    gens = [torch.Generator().manual_seed(s) for s in range(3)]
    stack = MLPStack.init(sizes, activation, gens)
    modules = stack.to_modules()
    data = [_data(6, seed=10 + s, loss=loss) for s in range(3)]
    X = torch.stack([x for x, _ in data])
    y = torch.stack([t for _, t in data])
    valid = torch.ones(3, 6, dtype=torch.bool)
    valid[1, 4:] = False  # padding rows of a smaller site

    fast = stack.per_sample_gradients(X, y, valid, loss)

    for s, module in enumerate(modules):
        truth = _microbatch_grads(module, X[s], y[s], loss)
        generic = per_sample_gradients(module, dict(module.named_parameters()), X[s], y[s], loss)
        for i in range(6):
            for k, (g, expected, ref) in enumerate(
                zip(fast, truth[i], generic.values(), strict=True)
            ):
                want = expected if valid[s, i] else torch.zeros_like(expected)
                torch.testing.assert_close(g[s, i], want, atol=1e-5, rtol=1e-5, msg=f"{s} {i} {k}")
                if valid[s, i]:
                    torch.testing.assert_close(g[s, i], ref[i], atol=1e-5, rtol=1e-5)


def test_ghost_clipped_sum_equals_generic_clipped_sum() -> None:
    gens = [torch.Generator().manual_seed(s) for s in range(2)]
    stack = MLPStack.init(SIZES, "tanh", gens)
    data = [_data(8, seed=20 + s) for s in range(2)]
    X, y = torch.stack([x for x, _ in data]), torch.stack([t for _, t in data])
    valid = torch.ones(2, 8, dtype=torch.bool)
    clip = torch.tensor([0.05, 0.3])

    grads, norms = stack.clipped_gradient_sum(X, y, valid, "cross_entropy", clip)

    for s, module in enumerate(stack.to_modules()):
        psg = per_sample_gradients(module, dict(module.named_parameters()), X[s], y[s])
        clipped, ref_norms = clip_per_sample(psg, float(clip[s]))
        torch.testing.assert_close(norms[s], ref_norms, atol=1e-5, rtol=1e-5)
        for g, ref in zip(grads, clipped.values(), strict=True):
            torch.testing.assert_close(g[s], ref.sum(0), atol=1e-6, rtol=1e-5)


def test_ghost_clipping_bounds_each_sample_of_each_site() -> None:
    # The clipped sum over a batch holding one sample is that sample's clipped gradient.
    S, b = 3, 5
    stack = MLPStack.init(SIZES, "relu", [torch.Generator().manual_seed(s) for s in range(S)])
    data = [_data(b, seed=30 + s) for s in range(S)]
    X = torch.stack([x for x, _ in data]) * 30
    y = torch.stack([t for _, t in data])
    clip = torch.tensor([0.2, 1.0, 5.0])
    for i in range(b):
        valid = torch.zeros(S, b, dtype=torch.bool)
        valid[:, i] = True

        grads, norms = stack.clipped_gradient_sum(X, y, valid, "cross_entropy", clip)

        for s in range(S):
            norm = _flat_norm([g[s] for g in grads])
            assert float(norm) <= float(clip[s]) * (1 + 1e-5)
            assert float(norm) == pytest.approx(min(float(norms[s, i]), float(clip[s])), rel=1e-4)
