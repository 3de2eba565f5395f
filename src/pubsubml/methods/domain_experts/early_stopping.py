"""Noise-free local training with early stopping: FT-FL / FT-DP-FL and the domain-only baseline.

After federation each user keeps training its own copy of the global model on its private data,
without noise, and stops when its validation loss stops improving (fl-domain-experts.txt §3.3:
"care must be taken to ensure that the fine-tuned model does not deteriorate").  Started from a
fresh model instead, the same routine trains the domain-only baseline (§4.1, "each user fitting a
single linear model to their training data").  Nothing trained here is released, so it costs no
privacy beyond what the global model already cost.
"""

from __future__ import annotations

import copy

import torch
from torch import Tensor, nn

from pubsubml.methods.domain_experts.gate import Task, mixture_loss

__all__ = ["train_with_early_stopping"]


def _loss(module: nn.Module, X: Tensor, y: Tensor, task: Task) -> Tensor:
    out = module(X)
    pred = torch.softmax(out, dim=-1) if task == "classification" else out[:, 0]
    return mixture_loss(pred, y, task).mean()


def _validation_loss(module: nn.Module, X_val: Tensor, y_val: Tensor, task: Task) -> float:
    with torch.no_grad():
        return float(_loss(module, X_val, y_val, task))


def _train_one_epoch(
    model: nn.Module,
    opt: torch.optim.Optimizer,
    X: Tensor,
    y: Tensor,
    task: Task,
    batch_size: int,
    gen: torch.Generator,
) -> None:
    """One pass over (X, y) in shuffled minibatches of ``batch_size``."""
    order = torch.randperm(len(X), generator=gen)
    for start in range(0, len(X), batch_size):
        rows = order[start : start + batch_size]
        opt.zero_grad()
        _loss(model, X[rows], y[rows], task).backward()
        opt.step()


def train_with_early_stopping(
    module: nn.Module,
    X: Tensor,
    y: Tensor,
    X_val: Tensor,
    y_val: Tensor,
    *,
    task: Task,
    lr: float = 1e-2,
    max_epochs: int = 100,
    batch_size: int = 32,
    patience: int = 5,
    seed: int = 0,
) -> nn.Module:
    """A copy of ``module`` trained with Adam on (X, y), kept at its best validation loss.

    Parameters
    ----------
    module : nn.Module
        Starting point (the global model for FT-(DP-)FL; a fresh model for the baseline).  It is
        not modified.
    X : Tensor of shape (n, d)
    y : Tensor of shape (n,)
    X_val : Tensor of shape (n_val, d)
    y_val : Tensor of shape (n_val,)
        The user's validation split, used only for early stopping.
    task : {"classification", "regression"}
    lr : float, default=1e-2
    max_epochs : int, default=100
    batch_size : int, default=32
    patience : int, default=5
        Epochs without a better validation loss before stopping.
    seed : int, default=0

    Returns
    -------
    nn.Module
        The copy at the epoch of lowest validation loss (the starting point if none improved).

    Raises
    ------
    ValueError
        Empty training or validation data, or non-positive sizes.

    References
    ----------
    fl-domain-experts.txt §3.3 (FT-FL and FT-DP-FL).

    Examples
    --------
    >>> _ = torch.manual_seed(0)
    >>> X = torch.rand(40, 2); y = X @ torch.tensor([2.0, -1.0])
    >>> start = nn.Linear(2, 1)
    >>> before = float(((start(X)[:, 0] - y) ** 2).mean().detach())
    >>> m = train_with_early_stopping(start, X, y, X, y, task="regression", max_epochs=50)
    >>> float(((m(X)[:, 0] - y) ** 2).mean().detach()) < before
    True
    """
    if len(X) == 0 or len(X_val) == 0:
        raise ValueError("fine-tuning needs training and validation rows")
    if max_epochs < 1 or batch_size < 1 or patience < 1:
        raise ValueError("max_epochs, batch_size and patience must be >= 1")
    model = copy.deepcopy(module)
    best = copy.deepcopy(model.state_dict())
    best_loss = _validation_loss(model, X_val, y_val, task)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    gen = torch.Generator().manual_seed(seed)
    stale = 0
    for _ in range(max_epochs):
        _train_one_epoch(model, opt, X, y, task, batch_size, gen)
        val = _validation_loss(model, X_val, y_val, task)
        if val < best_loss:
            best_loss, best, stale = val, copy.deepcopy(model.state_dict()), 0
        else:
            stale += 1
            if stale >= patience:
                break
    model.load_state_dict(best)
    return model
