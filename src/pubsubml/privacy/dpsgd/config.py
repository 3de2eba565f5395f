"""A DP-SGD run's hyperparameters (:class:`DPSGDConfig`) and the record of what ran
(:class:`TrainResult`), shared by both training paths.

The generic path lives in :mod:`pubsubml.privacy.dpsgd.generic`, the stacked many-sites path in
:mod:`pubsubml.privacy.dpsgd.stacked`; both import from here, and :mod:`pubsubml.privacy.dpsgd`
re-exports every public name.

References
----------
pubsub-ml.txt §7.2 (Table 4 networks) and §8 (DP-SGD); Abadi et al., "Deep learning with
differential privacy", CCS 2016.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from torch import Tensor, nn

from pubsubml.errors import DataValidationError, InvalidPrivacyParameterError
from pubsubml.privacy.events import DPEvent, NoiseKind

__all__ = ["DPSGDConfig", "TrainResult"]

_CLIP_EPS = 1e-6  # clip factor C / (‖∇‖ + 1e-6), as Opacus


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
    noise : {"secure", "seeded"}
        Where the Poisson draws and the noise came from (:mod:`pubsubml.privacy.noise`).
    """

    module: nn.Module
    steps: int
    sample_rate: float
    noise_multiplier: float
    max_grad_norm: float
    private: bool
    batch_sizes: Tensor
    noise: NoiseKind = "seeded"

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


def _check_data(X: Tensor, y: Tensor) -> int:
    if X.dim() != 2 or y.dim() != 1 or X.shape[0] != y.shape[0] or X.shape[0] == 0:
        raise DataValidationError(
            f"expected X of shape (n, d) and y of shape (n,) with n >= 1, got {tuple(X.shape)} "
            f"and {tuple(y.shape)}"
        )
    return int(X.shape[0])
