"""Tests of pubsubml.methods.domain_experts.early_stopping: noise-free local training, early stopping."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from pubsubml.methods.domain_experts.early_stopping import train_with_early_stopping


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _regression(n: int, seed: int) -> tuple[Tensor, Tensor]:
    gen = torch.Generator().manual_seed(seed)
    X = torch.rand(n, 2, generator=gen)
    return X, X @ torch.tensor([1.5, -2.0]) + 0.3 + 0.1 * torch.randn(n, generator=gen)


def _val_mse(module: nn.Module, X: Tensor, y: Tensor) -> float:
    with torch.no_grad():
        return float(((module(X)[:, 0] - y) ** 2).mean())


def _params(module: nn.Module) -> list[Tensor]:
    return [p.detach().clone() for p in module.parameters()]


def test_more_epochs_never_return_a_worse_validation_loss() -> None:
    # Prepare: one seed fixes the shuffling, so a longer run extends a shorter one.
    X, y = _regression(60, 0)
    X_val, y_val = _regression(30, 1)
    torch.manual_seed(0)
    start = nn.Sequential(nn.Linear(2, 4), nn.Tanh(), nn.Linear(4, 1))
    # Execute
    losses = [
        _val_mse(
            train_with_early_stopping(
                start, X, y, X_val, y_val, task="regression", lr=0.05, max_epochs=k, patience=50
            ),
            X_val,
            y_val,
        )
        for k in (1, 2, 4, 8)
    ]
    # Assert: each result is the best epoch so far, never worse than the start.
    assert losses == sorted(losses, reverse=True)
    assert losses[0] <= _val_mse(start, X_val, y_val)
    assert losses[-1] < 0.5 * _val_mse(start, X_val, y_val)


def test_the_starting_module_is_left_unchanged_and_runs_are_reproducible() -> None:
    X, y = _regression(40, 2)
    start = nn.Sequential(nn.Linear(2, 1))
    before = _params(start)
    a = train_with_early_stopping(start, X, y, X, y, task="regression", max_epochs=5, seed=3)
    b = train_with_early_stopping(start, X, y, X, y, task="regression", max_epochs=5, seed=3)
    c = train_with_early_stopping(
        start, X, y, X, y, task="regression", max_epochs=5, seed=4, batch_size=7
    )
    assert all(torch.equal(p, q) for p, q in zip(before, start.parameters(), strict=True))
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(), strict=True))
    assert not all(torch.equal(p, q) for p, q in zip(a.parameters(), c.parameters(), strict=True))


def test_classification_keeps_the_start_when_training_only_hurts_validation() -> None:
    # Validation labels are the opposite of the training labels: every epoch makes the
    # validation loss worse, so the starting point is returned exactly.
    gen = torch.Generator().manual_seed(5)
    X = torch.rand(50, 2, generator=gen) - 0.5
    y = (X[:, 0] > 0).long()
    start = nn.Sequential(nn.Linear(2, 2))
    with torch.no_grad():
        for p in start.parameters():
            p.zero_()
    tuned = train_with_early_stopping(
        start, X, y, X, 1 - y, task="classification", lr=0.05, patience=2
    )
    assert tuned is not start
    assert all(
        torch.equal(p, q) for p, q in zip(tuned.parameters(), start.parameters(), strict=True)
    )
    # With the right validation labels, the same run learns the rule.
    learned = train_with_early_stopping(start, X, y, X, y, task="classification", lr=0.05)
    with torch.no_grad():
        accuracy = float((learned(X).argmax(1) == y).float().mean())
        loss = float(F.cross_entropy(learned(X), y))
    assert accuracy > 0.9 and loss < float(torch.log(torch.tensor(2.0)))


@pytest.mark.parametrize(
    ("rows", "val_rows", "kwargs"),
    [
        (0, 5, {}),
        (5, 0, {}),
        (5, 5, {"max_epochs": 0}),
        (5, 5, {"batch_size": 0}),
        (5, 5, {"patience": 0}),
    ],
)
def test_bad_sizes_are_refused(rows: int, val_rows: int, kwargs: dict[str, int]) -> None:
    X, y = _regression(10, 6)
    with pytest.raises(ValueError):
        train_with_early_stopping(nn.Sequential(nn.Linear(2, 1)), X[:rows], y[:rows], X[:val_rows],
                  y[:val_rows], task="regression", **kwargs)  # fmt: skip
