"""Deep mutual learning of a ProxyFL client: its hyperparameters, the proxy's loss, its models.

proxyfl.txt §3.2: a client trains its private model on Eq. 4, ``(1−α)·CE + α·KL(private ‖
proxy)``, and its DP proxy on Eq. 5, ``(1−β)·CE + β·KL(proxy ‖ private)``, with DP-SGD (Eq. 6–7).
:class:`DMLConfig` holds the local-training hyperparameters (§4.1 defaults), :func:`dml_proxy_loss`
is Eq. 5 per sample for the DP-SGD engine, :func:`mlp_factory` builds private models and
:func:`client_seed` derives each client's own seed.  The training itself is
:class:`~pubsubml.methods.proxyfl.local.ClientCohort`.

References
----------
proxyfl.txt §3.2 (Eq. 3–7), §3.3 (privacy budgets), §4.1 (hyperparameters).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn

from pubsubml.errors import InvalidPrivacyParameterError
from pubsubml.privacy.accountants import check_delta
from pubsubml.privacy.dpsgd import DPSGDConfig, Loss

__all__ = ["DMLConfig", "PrivateFactory", "client_seed", "dml_proxy_loss", "mlp_factory"]

#: ``factory(n_features, n_classes) -> nn.Module`` builds one client's private model.
PrivateFactory = Callable[[int, int], nn.Module]


def client_seed(seed: int, client: int) -> int:
    """The seed of client ``client``'s own generator, derived from the run's ``seed``.

    Examples
    --------
    >>> client_seed(0, 1) == client_seed(0, 1) != client_seed(0, 2)
    True
    """
    return int(np.random.SeedSequence([seed, client]).generate_state(1, dtype=np.uint64)[0] >> 1)


@dataclass(frozen=True)
class DMLConfig:
    """Local-training hyperparameters of ProxyFL and its baselines (proxyfl.txt §4.1 defaults).

    Parameters
    ----------
    alpha, beta : float, default=0.5
        DML weights of Eq. 4 (private) and Eq. 5 (proxy), in [0, 1).
    lr : float, default=1e-3
    weight_decay : float, default=1e-4
        Adam's L2 term, applied to both models (after the noise for the proxy: data-independent).
    batch_size : int, default=250
        Expected batch size ``B``; Poisson rate ``q = min(1, B / n_k)``.
    local_epochs : int, default=1
        A round runs ``local_epochs · round(1/q)`` steps.
    noise_multiplier, max_grad_norm : float, default=1.0
        σ and C of Eq. 7.
    dp : bool, default=True
        ``False`` drops clipping and noise (the non-DP ablation, §4.2); nothing is accounted then.
    delta : float, default=1e-5
        δ of each client's (ε, δ); must be below ``1/n_k``.
    epsilon_budget : float or sequence of float, optional
        A client drops out before a round that would take its ε above its budget (§3.3): one
        value for all, or one per client indexed by global client id (``inf`` for none).

    Raises
    ------
    InvalidPrivacyParameterError
        σ ≤ 0 or C ≤ 0 with ``dp``, δ outside (0, 1) or a non-positive budget.
    ValueError
        Other values out of range.
    """

    alpha: float = 0.5
    beta: float = 0.5
    lr: float = 1e-3
    weight_decay: float = 1e-4
    batch_size: int = 250
    local_epochs: int = 1
    noise_multiplier: float = 1.0
    max_grad_norm: float = 1.0
    dp: bool = True
    delta: float = 1e-5
    epsilon_budget: float | tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        for name in ("alpha", "beta"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ValueError(f"{name} must be in [0, 1), got {getattr(self, name)}")
        if not (self.lr > 0 and self.weight_decay >= 0):
            raise ValueError(
                f"need lr > 0 and weight_decay >= 0, got {self.lr}, {self.weight_decay}"
            )
        if self.dp and not self.noise_multiplier > 0:
            raise InvalidPrivacyParameterError(
                f"noise_multiplier must be > 0, got {self.noise_multiplier}"
            )
        if isinstance(self.epsilon_budget, Sequence):  # JSON gives a list: store a tuple
            object.__setattr__(self, "epsilon_budget", tuple(float(b) for b in self.epsilon_budget))
        budgets = self.budgets_or_none()
        if budgets is not None and not all(b > 0 for b in budgets):
            raise InvalidPrivacyParameterError(
                f"epsilon_budget must be > 0, got {self.epsilon_budget}"
            )
        check_delta(self.delta)
        # DPSGDConfig validates C, the batch size and the epochs.
        self.dpsgd()

    def budgets_or_none(self) -> tuple[float, ...] | None:
        """The budget(s) as a tuple, or None when no client has one."""
        if self.epsilon_budget is None:
            return None
        if isinstance(self.epsilon_budget, tuple):
            return self.epsilon_budget
        return (float(self.epsilon_budget),)

    def budget_of(self, client: int) -> float:
        """Client ``client``'s ε budget (``inf`` when it has none).

        Raises
        ------
        InvalidPrivacyParameterError
            Per-client budgets that do not cover this client id.
        """
        budgets = self.budgets_or_none()
        if budgets is None:
            return math.inf
        if not isinstance(self.epsilon_budget, tuple):
            return budgets[0]
        if not 0 <= client < len(budgets):
            raise InvalidPrivacyParameterError(
                f"no ε budget for client {client}: {len(budgets)} given"
            )
        return budgets[client]

    def dpsgd(self) -> DPSGDConfig:
        """The engine's config for one round (``epochs = local_epochs``)."""
        return DPSGDConfig(
            noise_multiplier=self.noise_multiplier,
            max_grad_norm=self.max_grad_norm,
            batch_size=self.batch_size,
            epochs=self.local_epochs,
            lr=self.lr,
        )


def dml_proxy_loss(log_r: Tensor, beta: float) -> Loss:
    """Eq. 5 per sample: ``(1−β)·CE(z, y) + β·KL(softmax z ‖ r)`` with ``r`` held fixed.

    Parameters
    ----------
    log_r : Tensor of shape (S, b, k)
        Log-probabilities of the private models on the batch (detached).
    beta : float

    Returns
    -------
    Loss
        For logits ``z`` of shape (S, b, k) and labels (S, b); the output gradient is
        ``(1−β)(p − e_y) + β·p ∘ (log p − log r − KL)`` with ``p = softmax z``.

    Examples
    --------
    >>> z = torch.zeros(1, 2, 3)
    >>> loss = dml_proxy_loss(torch.log_softmax(z, -1), 0.5)
    >>> loss.per_sample(z, torch.zeros(1, 2, dtype=torch.long)).tolist()  # 0.5 · ln 3, KL = 0
    [[0.5493061542510986, 0.5493061542510986]]
    """

    def kl_parts(z: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        log_p = torch.log_softmax(z, -1)
        p = log_p.exp()
        return p, log_p, (p * (log_p - log_r)).sum(-1)

    def per_sample(z: Tensor, y: Tensor) -> Tensor:
        _, log_p, kl = kl_parts(z)
        ce = -log_p.gather(-1, y.unsqueeze(-1)).squeeze(-1)
        return (1.0 - beta) * ce + beta * kl

    def output_grad(z: Tensor, y: Tensor) -> Tensor:
        p, log_p, kl = kl_parts(z)
        ce_grad = p.scatter_add(-1, y.unsqueeze(-1), torch.full_like(p[..., :1], -1.0))
        return (1.0 - beta) * ce_grad + beta * p * (log_p - log_r - kl.unsqueeze(-1))

    return Loss(per_sample, output_grad)


def mlp_factory(hidden: Sequence[int]) -> PrivateFactory:
    """A factory of ReLU MLPs ``n_features → hidden… → n_classes`` (a private model).

    Examples
    --------
    >>> mlp_factory((8,))(4, 3)
    Sequential(
      (0): Linear(in_features=4, out_features=8, bias=True)
      (1): ReLU()
      (2): Linear(in_features=8, out_features=3, bias=True)
    )
    """
    sizes = tuple(hidden)

    def build(n_features: int, n_classes: int) -> nn.Module:
        dims = (n_features, *sizes, n_classes)
        layers: list[nn.Module] = []
        for i in range(len(dims) - 1):
            layers.append(nn.Linear(dims[i], dims[i + 1]))
            if i < len(dims) - 2:
                layers.append(nn.ReLU())
        return nn.Sequential(*layers)

    return build
