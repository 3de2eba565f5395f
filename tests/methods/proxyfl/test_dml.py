"""Deep mutual learning's proxy loss (proxyfl.txt §3.2, Eq. 5) and its ghost-clipped DP-SGD
gradient (Eq. 6–7)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

from pubsubml.methods.proxyfl.dml import dml_proxy_loss
from pubsubml.privacy.dpsgd import MLPStack


@pytest.fixture(autouse=True)
def _one_torch_thread() -> Iterator[None]:
    """One intra-op thread: the 2-core test machine is shared, and spinning threads stall."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


D, C = 6, 3


def test_dml_proxy_loss_gradient_matches_autograd() -> None:
    g = torch.Generator().manual_seed(0)
    z = torch.randn(2, 5, 4, generator=g, dtype=torch.float64, requires_grad=True)
    log_r = torch.log_softmax(torch.randn(2, 5, 4, generator=g, dtype=torch.float64), -1)
    y = torch.randint(0, 4, (2, 5), generator=g)
    loss = dml_proxy_loss(log_r, 0.3)
    loss.per_sample(z, y).sum().backward()
    torch.testing.assert_close(loss.output_grad(z.detach(), y), z.grad)
    # Eq. 5 with β = 0.3: (1 − β)·CE + β·KL(p ‖ r), KL in the proxy-first direction of Eq. 3.
    p = torch.softmax(z.detach(), -1)
    kl = (p * (p.log() - log_r)).sum(-1)
    ce = torch.nn.functional.cross_entropy(
        z.detach().reshape(-1, 4), y.reshape(-1), reduction="none"
    )
    torch.testing.assert_close(loss.per_sample(z.detach(), y), 0.7 * ce.reshape(2, 5) + 0.3 * kl)


def test_ghost_clipped_dml_gradient_equals_per_sample_reference() -> None:
    # The proxy update (Eq. 6–7 before noise) against an independent per-sample autograd loop.
    g = torch.Generator().manual_seed(1)
    module = torch.nn.Sequential(torch.nn.Linear(D, 7), torch.nn.ReLU(), torch.nn.Linear(7, C))
    X, y = torch.randn(9, D, generator=g), torch.randint(0, C, (9,), generator=g)
    log_r = torch.log_softmax(torch.randn(9, C, generator=g), -1)
    stack = MLPStack.from_modules([module])
    grads, _ = stack.clipped_gradient_sum(
        X[None],
        y[None],
        torch.ones(1, 9, dtype=torch.bool),
        dml_proxy_loss(log_r[None], 0.5),
        torch.tensor([0.1]),
    )
    expected = [torch.zeros_like(p) for p in module.parameters()]
    for i in range(9):
        module.zero_grad()
        log_p = torch.log_softmax(module(X[i : i + 1]), -1)
        kl = (log_p.exp() * (log_p - log_r[i])).sum()
        (0.5 * -log_p[0, y[i]] + 0.5 * kl).backward()
        per = [p.grad.clone() for p in module.parameters()]  # type: ignore[union-attr]
        norm = torch.sqrt(sum((t**2).sum() for t in per))
        for e, t in zip(expected, per, strict=True):
            e += t * min(1.0, 0.1 / (float(norm) + 1e-6))
    for got, want in zip(grads, expected, strict=True):
        torch.testing.assert_close(got[0], want, atol=1e-6, rtol=1e-4)
