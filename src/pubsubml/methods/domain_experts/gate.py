"""The mixture of a general model and a private expert, and the gradients a user sends.

Pure per-sample math of FL with private domain experts (fl-domain-experts.txt §3.2): the gate
α_i(x) = sigmoid(w_iᵀx + b_i), the mixture of Eq. 3, its loss, and the clipped per-sample
gradients with respect to the general model's parameters Θ_G that Algorithm 1 (mixture loss) or
Algorithm 2 (the general model's own loss, §3.2.1) sends to the server.  They come from one
backward pass through per-sample parameter copies (exact, and about twice as fast as ``vmap`` at
these batch sizes); the clipping reuses :func:`pubsubml.privacy.dpsgd.clip_per_sample`.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor, nn

from pubsubml.privacy.dpsgd import clip_per_sample

__all__ = ["Task", "general_gradients", "mixture_loss", "mixture_output"]

Task = Literal["classification", "regression"]


def _model_output(out: Tensor, task: Task) -> Tensor:
    """Probabilities (classification) or the regressed value of shape (b,) (regression)."""
    return torch.softmax(out, dim=-1) if task == "classification" else out[..., 0]


def mixture_output(general_out: Tensor, private_out: Tensor, alpha: Tensor, task: Task) -> Tensor:
    """Eq. 3: ŷ = α·M_G(x) + (1 − α)·M_P(x).

    For classification the two models' class *probabilities* are mixed (the multiclass extension
    of fl-domain-experts.txt §3.2, footnote 1; for two classes it is the paper's mixture of
    positive-class probabilities).

    Parameters
    ----------
    general_out, private_out : Tensor of shape (b, n_outputs)
        Raw outputs (logits, or the value in column 0 for regression).
    alpha : Tensor of shape (b,)
        Gate values in (0, 1).
    task : {"classification", "regression"}

    Returns
    -------
    Tensor of shape (b, n_classes) (probabilities) or (b,) (values)

    Examples
    --------
    >>> g, p = torch.tensor([[1.0]]), torch.tensor([[3.0]])
    >>> mixture_output(g, p, torch.tensor([0.25]), "regression")
    tensor([2.5000])
    """
    a = alpha if task == "regression" else alpha.unsqueeze(-1)
    return a * _model_output(general_out, task) + (1 - a) * _model_output(private_out, task)


def mixture_loss(pred: Tensor, y: Tensor, task: Task) -> Tensor:
    """Per-sample loss of a prediction: squared error, or −log of the true class's probability.

    Parameters
    ----------
    pred : Tensor of shape (b,) or (b, n_classes)
        Output of :func:`mixture_output` (or of one model through the same transform).
    y : Tensor of shape (b,)
        Targets (float) or class codes (long).

    Returns
    -------
    Tensor of shape (b,)
    """
    if task == "regression":
        return (pred - y) ** 2
    p = pred.gather(-1, y.long().unsqueeze(-1)).squeeze(-1)
    return -torch.log(p.clamp_min(1e-12))


def general_gradients(
    general: nn.Module,
    private: nn.Module,
    gate: nn.Module,
    X: Tensor,
    y: Tensor,
    *,
    algorithm: Literal[1, 2],
    task: Task,
    max_grad_norm: float | None,
) -> tuple[dict[str, Tensor], Tensor]:
    """Per-sample gradients with respect to Θ_G, clipped to norm C: what a user's batch sends.

    Algorithm 1 differentiates the mixture loss ℓ(y, ŷ) of Eq. 3, so the gate scales the general
    model's gradient by α(x); Algorithm 2 differentiates the general model's own loss
    ℓ(y, M_G(x)) regardless of the gate (fl-domain-experts.txt §3.2 Algorithm 1 line 8, §3.2.1).

    Parameters
    ----------
    general : nn.Sequential
        M_G: ``Linear`` layers and elementwise activations (as :func:`init_mlp` builds).
    private, gate : nn.Module
        M_P and the gate (a ``Linear(d, 1)`` whose sigmoid is α); not differentiated.
    X : Tensor of shape (b, d)
    y : Tensor of shape (b,)
    algorithm : {1, 2}
    task : {"classification", "regression"}
    max_grad_norm : float or None
        C; ``None`` leaves the gradients unclipped (non-private runs).

    Raises
    ------
    TypeError
        A general model with a layer other than ``Linear`` or an elementwise activation.

    Returns
    -------
    grads : dict of str to Tensor of shape (b, *param.shape)
        Keyed by ``general``'s parameter names.
    norms : Tensor of shape (b,)
        The per-sample norms before clipping.

    Examples
    --------
    >>> g, p, a = nn.Sequential(nn.Linear(2, 1)), nn.Linear(2, 1), nn.Linear(2, 1)
    >>> grads, norms = general_gradients(g, p, a, torch.ones(3, 2), torch.zeros(3), algorithm=2,
    ...                                  task="regression", max_grad_norm=1.0)
    >>> tuple(grads["0.weight"].shape), tuple(norms.shape)
    ((3, 1, 2), (3,))
    """
    if not isinstance(general, nn.Sequential):
        raise TypeError("the general model must be an nn.Sequential of Linear and activations")
    with torch.no_grad():
        private_out = private(X)
        alpha = torch.sigmoid(gate(X)[:, 0])
    b = len(X)
    # Per-sample copies of every parameter: the gradient of the summed loss with respect to copy
    # j is exactly sample j's gradient (samples do not interact), at one backward pass.
    copies: dict[str, Tensor] = {
        k: v.detach().unsqueeze(0).expand(b, *v.shape).clone().requires_grad_(True)
        for k, v in general.named_parameters()
    }
    h = X
    for idx, layer in enumerate(general):
        if isinstance(layer, nn.Linear):
            h = torch.einsum("bi,boi->bo", h, copies[f"{idx}.weight"])
            if layer.bias is not None:
                h = h + copies[f"{idx}.bias"]
        elif isinstance(layer, (nn.Tanh, nn.ReLU, nn.Sigmoid, nn.Identity)):
            h = layer(h)
        else:
            raise TypeError(f"unsupported layer {type(layer).__name__} in the general model")
    pred = mixture_output(h, private_out, alpha, task) if algorithm == 1 else _model_output(h, task)
    loss = mixture_loss(pred, y, task).sum()
    names = list(copies)
    grads = dict(zip(names, torch.autograd.grad(loss, [copies[k] for k in names]), strict=True))
    if max_grad_norm is None:
        norms = torch.stack([g.reshape(b, -1).pow(2).sum(1) for g in grads.values()])
        return grads, norms.sum(0).sqrt()
    return clip_per_sample(grads, max_grad_norm)
