"""The hyperparameters of a DP-SGD estimator's run, resolved from public inputs only.

Hyperparameters left at ``"auto"`` are resolved at ``fit`` from the number of rows, the privacy
target and the encoded width by :func:`~pubsubml.learners.dpsgd_defaults.dp_sgd_defaults`; the
noise multiplier σ is the one given or the one calibrated to the ε target for the run's sample rate
and steps (pubsub-ml.txt §8: DP-SGD, Abadi et al. 2016).  None of it reads the private rows, so
the DP events a run will record are known before it runs (:meth:`planned_privacy_events`).
:class:`DPSGDHyperparameters` holds this for
:class:`~pubsubml.learners.dpsgd_base._DPSGDBase`.

References
----------
pubsub-ml.txt §7.2 (Table 4) and §8 (DP-SGD [1], Abadi et al. 2016).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any, ClassVar, Literal, cast

import numpy as np

from pubsubml.errors import InvalidPrivacyParameterError
from pubsubml.learners.dpsgd_defaults import DPSGDDefaults, dp_sgd_defaults
from pubsubml.privacy.accountants import check_delta, check_epsilon
from pubsubml.privacy.calibration import calibrate_noise
from pubsubml.privacy.dpsgd import ACTIVATIONS, DPSGDConfig
from pubsubml.privacy.events import DPEvent
from pubsubml.schema import FeatureSchema

__all__ = ["AUTO", "DPSGDHyperparameters"]

Backend = Literal["pld", "rdp"]
_ACCOUNTANTS = ("pld", "rdp")
#: The value of a hyperparameter chosen by :func:`~pubsubml.learners.dpsgd_defaults.dp_sgd_defaults`.
AUTO = "auto"
# What "auto" means for a network trained without DP (the package's setting before DP defaults).
_NON_PRIVATE = DPSGDDefaults(
    batch_size=100, epochs=30, steps=0, learning_rate=1e-3, optimizer="adam", max_grad_norm=1.0
)
_TUNABLE = ("batch_size", "epochs", "learning_rate", "optimizer", "max_grad_norm")


@functools.lru_cache(maxsize=1024)
def _calibrated_sigma(epsilon: float, delta: float, q: float, steps: int, accountant: str) -> float:
    return calibrate_noise(epsilon, delta, q, steps, accountant=cast(Backend, accountant))


class DPSGDHyperparameters:
    """The run configuration of a DP-SGD estimator: layers, privacy, hyperparameters and σ.

    A mixin of :class:`~pubsubml.learners.dpsgd_base._DPSGDBase`; subclasses override the hooks
    of the first section (hidden layers, activation, whether the run is private) and
    :meth:`_adjust_defaults`.
    """

    _model: ClassVar[Literal["linear", "mlp"]]
    _task: ClassVar[Literal["classification", "regression"]]
    _epsilon_param: ClassVar[str]  # the name of the ε target parameter
    _delta_param: ClassVar[str]  # the name of the δ parameter
    schema: FeatureSchema | None
    epochs: Any
    batch_size: Any
    learning_rate: Any
    optimizer: Any
    max_grad_norm: Any
    noise_multiplier: float | None
    accountant: str

    # ---- what differs between the networks and the linear models ----------------------------

    def _hidden(self) -> tuple[int, ...]:
        return ()

    def _activation_name(self) -> str:
        return "tanh"  # a network without hidden layers applies no activation

    def _private(self) -> bool:
        return True

    # ---- hyperparameters and noise (no attribute changes) --------------------------------------
    def _privacy_target(self) -> tuple[float | None, float]:
        return getattr(self, self._epsilon_param), getattr(self, self._delta_param)

    def _resolve(self, n: int, width: int) -> DPSGDDefaults:
        """The hyperparameters of a run on ``n`` rows of ``width`` encoded columns.

        Parameters left at ``"auto"`` come from :func:`dp_sgd_defaults` (private runs) or from the
        package's non-private setting; explicit values are used as given.
        """
        epsilon, delta = self._privacy_target()
        if self._private():
            defaults = dp_sgd_defaults(
                n,
                epsilon if isinstance(epsilon, int | float) else None,
                delta,
                width,
                model=self._model,
                task=self._task,
            )
        else:
            defaults = _NON_PRIVATE
        defaults = self._adjust_defaults(defaults)
        chosen: dict[str, Any] = {}
        for name in _TUNABLE:
            value = getattr(self, name)
            if isinstance(value, str) and name != "optimizer":
                if value != AUTO:
                    raise ValueError(f"{name} must be a number or 'auto', got {value!r}")
                value = getattr(defaults, name)
            elif value == AUTO:
                value = defaults.optimizer
            chosen[name] = value
        config = DPSGDConfig(
            max_grad_norm=float(chosen["max_grad_norm"]),
            batch_size=chosen["batch_size"],
            epochs=chosen["epochs"],
            lr=float(chosen["learning_rate"]),
            optimizer=chosen["optimizer"],
            private=self._private(),
        )
        return DPSGDDefaults(
            batch_size=config.batch_size,
            epochs=config.epochs,
            steps=config.steps_for(n),
            learning_rate=config.lr,
            optimizer=config.optimizer,
            max_grad_norm=config.max_grad_norm,
        )

    def _adjust_defaults(self, defaults: DPSGDDefaults) -> DPSGDDefaults:
        """What ``"auto"`` resolves to, given the parameters that are set explicitly."""
        return defaults

    def _noise_for(self, n: int, config: DPSGDConfig) -> float:
        epsilon, delta = self._privacy_target()
        names = {self._epsilon_param: epsilon, "noise_multiplier": self.noise_multiplier}
        given = [k for k, v in names.items() if v is not None]
        if not self._private():
            if given:
                raise InvalidPrivacyParameterError(
                    f"dp=False trains without noise; {given[0]} does not apply"
                )
            return 0.0
        if len(given) != 1:
            raise InvalidPrivacyParameterError(
                f"{type(self).__name__} needs exactly one of {self._epsilon_param} (noise "
                "calibrated to it) or noise_multiplier (ε reported), got "
                f"{'both' if given else 'neither'}"
            )
        check_delta(delta, n)
        if self.noise_multiplier is not None:
            sigma = self.noise_multiplier
            if (
                isinstance(sigma, bool)
                or not isinstance(sigma, int | float)
                or not 0 < sigma < math.inf
            ):
                raise InvalidPrivacyParameterError(
                    f"noise_multiplier must be finite and > 0, got {sigma!r}"
                )
            return float(sigma)
        assert epsilon is not None
        check_epsilon(epsilon)
        q, steps = config.sample_rate_for(n), config.steps_for(n)
        return _calibrated_sigma(float(epsilon), float(delta), q, steps, self.accountant)

    def _config(self, n: int, width: int) -> tuple[DPSGDConfig, DPSGDDefaults]:
        """The validated run configuration (σ included) for ``n`` rows of ``width`` columns."""
        hidden = self._hidden()
        if not all(
            isinstance(h, int | np.integer) and not isinstance(h, bool) and h > 0 for h in hidden
        ):
            raise ValueError(f"hidden_layer_sizes must be positive integers, got {hidden!r}")
        if self._activation_name() not in ACTIVATIONS:
            raise ValueError(
                f"activation must be one of {sorted(ACTIVATIONS)}, got {self._activation_name()!r}"
            )
        if self.accountant not in _ACCOUNTANTS:
            raise InvalidPrivacyParameterError(
                f"accountant must be one of {_ACCOUNTANTS}, got {self.accountant!r}"
            )
        chosen = self._resolve(n, width)
        config = DPSGDConfig(
            max_grad_norm=chosen.max_grad_norm,
            batch_size=chosen.batch_size,
            epochs=chosen.epochs,
            lr=chosen.learning_rate,
            optimizer=chosen.optimizer,
            private=self._private(),
        )
        config = dataclasses.replace(config, noise_multiplier=self._noise_for(n, config))
        return config, chosen

    def planned_privacy_events(self, n_samples: int, n_features: int) -> list[DPEvent]:
        """The DP events that ``fit`` on ``n_samples`` rows will record, computed without data.

        They depend only on public inputs: the parameters, n and the encoded width.  Used to
        account a procedure before it runs (e.g.
        :class:`~pubsubml.learners.selection.PrivateHyperparameterSearch`).

        Parameters
        ----------
        n_samples : int
        n_features : int
            Columns of ``X``; ignored when a schema is set (its encoded width is used).

        Returns
        -------
        list of DPEvent
            One ``subsampled_gaussian`` event, or none when the model is not private.

        Raises
        ------
        InvalidPrivacyParameterError, ValueError
            As :meth:`fit` for the same parameters.
        """
        schema = self.schema
        if schema is not None and not isinstance(schema, FeatureSchema):
            raise TypeError(f"schema must be a FeatureSchema or None, got {type(schema).__name__}")
        width = schema.n_encoded if schema is not None else n_features
        for name, value in (("n_samples", n_samples), ("n_features", width)):
            if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")
        n_samples, width = int(n_samples), int(width)
        config, _ = self._config(n_samples, width)
        if not config.private:
            return []
        return [
            DPEvent(
                mechanism="subsampled_gaussian",
                noise_multiplier=config.noise_multiplier,
                sample_rate=config.sample_rate_for(n_samples),
                count=config.steps_for(n_samples),
            )
        ]
