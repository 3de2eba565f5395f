"""Tests of pubsubml.methods.domain_experts.gate: the mixture of Eq. 3, its loss, the gradients."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from pubsubml.methods.domain_experts.gate import general_gradients, mixture_loss, mixture_output


def _assert_close(
    actual: Tensor, expected: Tensor, *, rtol: float = 1.3e-6, atol: float = 1e-5
) -> None:
    """Same shape and dtype, equal within tolerance (torch.testing's float32 defaults)."""
    assert actual.shape == expected.shape and actual.dtype == expected.dtype
    assert torch.allclose(actual, expected, rtol=rtol, atol=atol), (actual, expected)


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_classification_mixes_probabilities_not_logits() -> None:
    gen = torch.Generator().manual_seed(0)
    g, p = torch.randn(5, 3, generator=gen), torch.randn(5, 3, generator=gen)
    alpha = torch.rand(5, generator=gen)
    mixed = mixture_output(g, p, alpha, "classification")
    expected = alpha[:, None] * g.softmax(-1) + (1 - alpha[:, None]) * p.softmax(-1)
    _assert_close(mixed, expected)
    _assert_close(mixed.sum(-1), torch.ones(5))
    # The gate's ends select one model.
    ones, zeros = torch.ones(5), torch.zeros(5)
    _assert_close(mixture_output(g, p, ones, "classification"), g.softmax(-1))
    _assert_close(mixture_output(g, p, zeros, "classification"), p.softmax(-1))


def test_regression_mixes_the_first_output_column() -> None:
    g = torch.tensor([[1.0, 9.0], [2.0, 9.0]])
    p = torch.tensor([[3.0, -9.0], [6.0, -9.0]])
    out = mixture_output(g, p, torch.tensor([0.5, 0.25]), "regression")
    _assert_close(out, torch.tensor([2.0, 5.0]))


def test_loss_is_squared_error_or_cross_entropy() -> None:
    pred, y = torch.tensor([1.0, -2.0]), torch.tensor([0.5, 1.0])
    _assert_close(mixture_loss(pred, y, "regression"), torch.tensor([0.25, 9.0]))
    logits = torch.randn(6, 4, generator=torch.Generator().manual_seed(1))
    labels = torch.tensor([0, 3, 1, 2, 2, 0])
    _assert_close(
        mixture_loss(logits.softmax(-1), labels, "classification"),
        F.cross_entropy(logits, labels, reduction="none"),
    )
    # Float class codes are read as indices; a zero probability gives a large, finite loss.
    certain = torch.tensor([[1.0, 0.0]])
    loss = mixture_loss(certain, torch.tensor([1.0]), "classification")
    assert torch.isfinite(loss).all() and loss.item() == pytest.approx(
        -torch.log(torch.tensor(1e-12)).item()
    )


def _gate(bias: float, d: int) -> nn.Linear:
    gate = nn.Linear(d, 1)
    with torch.no_grad():
        gate.weight.zero_()
        gate.bias.fill_(bias)
    return gate


@pytest.mark.parametrize("algorithm", [1, 2])
def test_regression_gradients_of_a_linear_model_have_a_closed_form(algorithm: int) -> None:
    # ŷ = α(wᵀx + b) + (1 − α)p(x); Algorithm 1: ∂/∂w (ŷ − y)² = 2(ŷ − y)·α·x,
    # Algorithm 2: ∂/∂w (wᵀx + b − y)² = 2(wᵀx + b − y)·x.
    torch.manual_seed(2)
    general, private = nn.Sequential(nn.Linear(3, 1)), nn.Linear(3, 1)
    alpha = torch.sigmoid(torch.tensor(0.4))
    X, y = torch.rand(7, 3), torch.rand(7)
    grads, norms = general_gradients(
        general, private, _gate(0.4, 3), X, y,
        algorithm=algorithm, task="regression", max_grad_norm=None,  # type: ignore[arg-type]
    )  # fmt: skip
    with torch.no_grad():
        g_out = general(X)[:, 0]
        if algorithm == 1:
            scale = 2 * (alpha * g_out + (1 - alpha) * private(X)[:, 0] - y) * alpha
        else:
            scale = 2 * (g_out - y)
    _assert_close(grads["0.weight"], scale[:, None, None] * X[:, None, :])
    _assert_close(grads["0.bias"], scale[:, None])
    _assert_close(norms, scale.abs() * (X.pow(2).sum(1) + 1).sqrt())


def test_clipping_returns_the_norms_before_clipping_and_keeps_small_gradients() -> None:
    torch.manual_seed(3)
    general = nn.Sequential(nn.Linear(2, 3), nn.Sigmoid(), nn.Linear(3, 1, bias=False))
    private, gate = nn.Linear(2, 1), nn.Linear(2, 1)
    X, y = torch.rand(10, 2), torch.rand(10) * 4
    free, free_norms = general_gradients(
        general, private, gate, X, y, algorithm=1, task="regression", max_grad_norm=None
    )
    clip = float(free_norms.median())
    clipped, norms = general_gradients(
        general, private, gate, X, y, algorithm=1, task="regression", max_grad_norm=clip
    )
    _assert_close(norms, free_norms)
    assert set(clipped) == {"0.weight", "0.bias", "2.weight"}
    factor = (clip / free_norms).clamp(max=1.0)
    for name, g in free.items():
        shape = (-1,) + (1,) * (g.dim() - 1)
        _assert_close(clipped[name], g * factor.view(shape), rtol=1e-5, atol=1e-6)


def test_only_the_general_model_is_differentiated() -> None:
    torch.manual_seed(4)
    general = nn.Sequential(nn.Linear(2, 2), nn.Identity(), nn.Linear(2, 2))
    private, gate = nn.Linear(2, 2), nn.Linear(2, 1)
    before = [p.detach().clone() for p in general.parameters()]
    general_gradients(
        general, private, gate, torch.rand(4, 2), torch.tensor([0, 1, 1, 0]),
        algorithm=1, task="classification", max_grad_norm=1.0,
    )  # fmt: skip
    assert all(p.grad is None for m in (general, private, gate) for p in m.parameters())
    assert all(torch.equal(a, b) for a, b in zip(before, general.parameters(), strict=True))


@pytest.mark.parametrize(
    "general",
    [nn.Linear(2, 1), nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.5), nn.Linear(2, 1))],
)
def test_general_models_other_than_linear_and_activations_are_refused(
    general: nn.Module,
) -> None:
    with pytest.raises(TypeError):
        general_gradients(
            general, nn.Linear(2, 1), nn.Linear(2, 1), torch.rand(3, 2), torch.rand(3),
            algorithm=2, task="regression", max_grad_norm=None,
        )  # fmt: skip
