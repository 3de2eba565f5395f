"""The hyperparameters of a DP-SGD estimator's run, resolved from public inputs only.

Hyperparameters left at ``"auto"`` are resolved at ``fit`` from the number of rows, the privacy
target and the encoded width by :func:`~pubsubml.learners.dpsgd_defaults.dp_sgd_defaults`; the
noise multiplier σ is the one given or the one calibrated to the ε target for the run's sample rate
and steps (pubsub-ml.txt §8: DP-SGD, Abadi et al. 2016).  None of it reads the private rows, so
the DP events a run will record are known before it runs (:func:`planned_events`).

The functions here take a :class:`RunSettings`, the estimator's parameters as it holds them
(:class:`~pubsubml.learners.dpsgd_base._DPSGDBase` builds it), and validate them as they resolve
them; they change nothing.

**The privacy parameters' names.**  Every learner of pubsubml takes its privacy target as
``epsilon`` and ``delta``: the parameter names of the scikit-learn-style estimators of diffprivlib
(``LogisticRegression(epsilon=...)``), which the diffprivlib learners here wrap.  Opacus's
``target_epsilon``/``target_delta`` are the arguments of a function that makes a training loop
private (``make_private_with_epsilon``), not an estimator's parameters.  The DP-SGD networks took
``target_epsilon``/``target_delta`` before; :func:`privacy_target` still accepts them, with a
:class:`FutureWarning`, until they are removed in pubsubml 0.3.

References
----------
pubsub-ml.txt §7.2 (Table 4) and §8 (DP-SGD [1], Abadi et al. 2016).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import warnings
from typing import Any, Literal, cast

import numpy as np

from pubsubml.errors import InvalidPrivacyParameterError
from pubsubml.learners.dpsgd_defaults import DPSGDDefaults, dp_sgd_defaults
from pubsubml.privacy.accountants import DEFAULT_DELTA, check_delta, check_epsilon
from pubsubml.privacy.calibration import calibrate_noise
from pubsubml.privacy.dpsgd import ACTIVATIONS, DPSGDConfig
from pubsubml.privacy.events import DPEvent
from pubsubml.schema import FeatureSchema

__all__ = [
    "AUTO",
    "DEPRECATED",
    "RunSettings",
    "check_dp",
    "is_private",
    "noise_multiplier_for",
    "planned_events",
    "privacy_target",
    "resolve_hyperparameters",
    "run_config",
]

Backend = Literal["pld", "rdp"]
_ACCOUNTANTS = ("pld", "rdp")
#: The value of a hyperparameter chosen by :func:`~pubsubml.learners.dpsgd_defaults.dp_sgd_defaults`.
AUTO = "auto"
#: The default of a renamed parameter: it was not given (scikit-learn's deprecation habit).
DEPRECATED = "deprecated"
# What "auto" means for a network trained without DP (the package's setting before DP defaults).
_NON_PRIVATE = DPSGDDefaults(
    batch_size=100, epochs=30, steps=0, learning_rate=1e-3, optimizer="adam", max_grad_norm=1.0
)
_TUNABLE = ("batch_size", "epochs", "learning_rate", "optimizer", "max_grad_norm")
_FORMER_BATCH_SIZE = 100  # a network's batch before "auto"


@dataclasses.dataclass(frozen=True)
class RunSettings:
    """The parameters of a DP-SGD estimator that decide its run, as the estimator holds them.

    Nothing is validated when it is built: the functions of this module validate what they use.

    Attributes
    ----------
    owner : str
        The estimator's class name (for error messages).
    model : {"linear", "mlp"}
    task : {"classification", "regression"}
    hidden_layer_sizes, activation, dp
        The architecture; a linear model has no hidden layer and is always private.
    epochs, batch_size, learning_rate, optimizer, max_grad_norm
        A value or ``"auto"``.
    epsilon, delta
        The privacy target (``epsilon`` is ``None`` when ``noise_multiplier`` is given).
    noise_multiplier : float or None
    accountant : str
    """

    owner: str
    model: Literal["linear", "mlp"]
    task: Literal["classification", "regression"]
    hidden_layer_sizes: Any
    activation: Any
    dp: Any
    epochs: Any
    batch_size: Any
    learning_rate: Any
    optimizer: Any
    max_grad_norm: Any
    epsilon: Any
    delta: Any
    noise_multiplier: Any
    accountant: Any


@functools.lru_cache(maxsize=1024)
def _calibrated_sigma(epsilon: float, delta: float, q: float, steps: int, accountant: str) -> float:
    return calibrate_noise(epsilon, delta, q, steps, accountant=cast(Backend, accountant))


def privacy_target(
    epsilon: float | None, delta: float, target_epsilon: Any, target_delta: Any
) -> tuple[float | None, float]:
    """The (ε, δ) target of an estimator that may still be given the former parameter names.

    Parameters
    ----------
    epsilon, delta : float or None, float
        The ``epsilon`` and ``delta`` parameters.
    target_epsilon, target_delta : Any
        The former names, :data:`DEPRECATED` when not given; a given one is used, with a
        :class:`FutureWarning` (module notes).

    Returns
    -------
    (float or None, float)

    Raises
    ------
    InvalidPrivacyParameterError
        Both names of ε given, or both names of δ with different values.

    Examples
    --------
    >>> privacy_target(1.0, 1e-5, DEPRECATED, DEPRECATED)
    (1.0, 1e-05)
    """
    if not (isinstance(target_epsilon, str) and target_epsilon == DEPRECATED):
        _warn_renamed("target_epsilon", "epsilon")
        if epsilon is not None:
            raise InvalidPrivacyParameterError(
                "target_epsilon is the former name of epsilon: give epsilon only"
            )
        epsilon = target_epsilon
    if not (isinstance(target_delta, str) and target_delta == DEPRECATED):
        _warn_renamed("target_delta", "delta")
        if delta != DEFAULT_DELTA and delta != target_delta:
            raise InvalidPrivacyParameterError(
                "target_delta is the former name of delta: give delta only"
            )
        delta = target_delta
    return epsilon, delta


def _warn_renamed(old: str, new: str) -> None:
    warnings.warn(
        f"{old} was renamed {new} (the name every pubsubml learner uses) and will be removed in "
        f"pubsubml 0.3; pass {new}= instead",
        FutureWarning,
        stacklevel=4,
    )


def check_dp(dp: Any) -> bool:
    """``dp`` as a bool; refuses anything but a bool.

    Raises
    ------
    ValueError
        ``dp`` is not True or False.
    """
    if not isinstance(dp, bool | np.bool_):
        raise ValueError(f"dp must be True or False, got {dp!r}")
    return bool(dp)


def is_private(settings: RunSettings) -> bool:
    """Whether the run is DP-SGD (``dp=True``)."""
    return check_dp(settings.dp)


def _defaults(settings: RunSettings, n: int, width: int) -> DPSGDDefaults:
    """What ``"auto"`` resolves to: :func:`dp_sgd_defaults` (private) or the non-private setting.

    A network whose learning rate is set by hand keeps the batch of 100 it was set for: the DP
    learning rate was chosen for batches of n/3, so such code trains exactly as before ``"auto"``.
    """
    epsilon = settings.epsilon
    if is_private(settings):
        defaults = dp_sgd_defaults(
            n,
            epsilon if isinstance(epsilon, int | float) else None,
            settings.delta,
            width,
            model=settings.model,
            task=settings.task,
        )
    else:
        defaults = _NON_PRIVATE
    if settings.model == "mlp" and settings.learning_rate != AUTO:
        return dataclasses.replace(defaults, batch_size=_FORMER_BATCH_SIZE)
    return defaults


def resolve_hyperparameters(settings: RunSettings, n: int, width: int) -> DPSGDDefaults:
    """The hyperparameters of a run on ``n`` rows of ``width`` encoded columns.

    Parameters left at ``"auto"`` come from :func:`dp_sgd_defaults` (private runs) or from the
    package's non-private setting; explicit values are used as given.

    Raises
    ------
    ValueError
        A tunable hyperparameter that is a string other than ``"auto"``.
    """
    defaults = _defaults(settings, n, width)
    chosen: dict[str, Any] = {}
    for name in _TUNABLE:
        value = getattr(settings, name)
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
        private=is_private(settings),
    )
    return DPSGDDefaults(
        batch_size=config.batch_size,
        epochs=config.epochs,
        steps=config.steps_for(n),
        learning_rate=config.lr,
        optimizer=config.optimizer,
        max_grad_norm=config.max_grad_norm,
    )


def _check_noise_multiplier(sigma: Any) -> float:
    if isinstance(sigma, bool) or not isinstance(sigma, int | float) or not 0 < sigma < math.inf:
        raise InvalidPrivacyParameterError(
            f"noise_multiplier must be finite and > 0, got {sigma!r}"
        )
    return float(sigma)


def noise_multiplier_for(settings: RunSettings, n: int, config: DPSGDConfig) -> float:
    """σ of the run: the one given, the one calibrated to ε for its steps, or 0 without DP.

    Raises
    ------
    InvalidPrivacyParameterError
        Both or neither of ε and σ in a private run, either with ``dp=False``, δ ∉ (0, 1/n),
        ε ≤ 0 or σ ≤ 0.
    """
    epsilon, delta = settings.epsilon, settings.delta
    names = {"epsilon": epsilon, "noise_multiplier": settings.noise_multiplier}
    given = [k for k, v in names.items() if v is not None]
    if not is_private(settings):
        if given:
            raise InvalidPrivacyParameterError(
                f"dp=False trains without noise; {given[0]} does not apply"
            )
        return 0.0
    if len(given) != 1:
        raise InvalidPrivacyParameterError(
            f"{settings.owner} needs exactly one of epsilon (noise calibrated to it) or "
            f"noise_multiplier (ε reported), got {'both' if given else 'neither'}"
        )
    check_delta(delta, n)
    if settings.noise_multiplier is not None:
        return _check_noise_multiplier(settings.noise_multiplier)
    check_epsilon(epsilon)
    q, steps = config.sample_rate_for(n), config.steps_for(n)
    return _calibrated_sigma(float(epsilon), float(delta), q, steps, settings.accountant)


def _check_architecture(settings: RunSettings) -> None:
    hidden = tuple(settings.hidden_layer_sizes)
    if not all(
        isinstance(h, int | np.integer) and not isinstance(h, bool) and h > 0 for h in hidden
    ):
        raise ValueError(f"hidden_layer_sizes must be positive integers, got {hidden!r}")
    if settings.activation not in ACTIVATIONS:
        raise ValueError(
            f"activation must be one of {sorted(ACTIVATIONS)}, got {settings.activation!r}"
        )
    if settings.accountant not in _ACCOUNTANTS:
        raise InvalidPrivacyParameterError(
            f"accountant must be one of {_ACCOUNTANTS}, got {settings.accountant!r}"
        )


def run_config(settings: RunSettings, n: int, width: int) -> tuple[DPSGDConfig, DPSGDDefaults]:
    """The validated run configuration (σ included) for ``n`` rows of ``width`` columns.

    Returns
    -------
    (DPSGDConfig, DPSGDDefaults)
        What the engine runs, and the resolved hyperparameters recorded as ``hyperparameters_``.

    Raises
    ------
    InvalidPrivacyParameterError, ValueError
        As :meth:`~pubsubml.learners.dpsgd_base._DPSGDBase.fit` for the same parameters.
    """
    _check_architecture(settings)
    chosen = resolve_hyperparameters(settings, n, width)
    config = DPSGDConfig(
        max_grad_norm=chosen.max_grad_norm,
        batch_size=chosen.batch_size,
        epochs=chosen.epochs,
        lr=chosen.learning_rate,
        optimizer=chosen.optimizer,
        private=is_private(settings),
    )
    config = dataclasses.replace(config, noise_multiplier=noise_multiplier_for(settings, n, config))
    return config, chosen


def planned_events(
    settings: RunSettings, schema: Any, n_samples: int, n_features: int
) -> list[DPEvent]:
    """The DP events that a fit on ``n_samples`` rows will record, computed without data.

    Parameters
    ----------
    settings : RunSettings
    schema : FeatureSchema or None
        The estimator's ``schema`` parameter; its encoded width replaces ``n_features``.
    n_samples, n_features : int

    Returns
    -------
    list of DPEvent
        One ``subsampled_gaussian`` event, or none when the model is not private.

    Raises
    ------
    TypeError
        ``schema`` is not a FeatureSchema or None.
    InvalidPrivacyParameterError, ValueError
        As ``fit`` for the same parameters, or counts below 1.
    """
    if schema is not None and not isinstance(schema, FeatureSchema):
        raise TypeError(f"schema must be a FeatureSchema or None, got {type(schema).__name__}")
    width = schema.n_encoded if schema is not None else n_features
    for name, value in (("n_samples", n_samples), ("n_features", width)):
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
            raise ValueError(f"{name} must be an int >= 1, got {value!r}")
    n_samples, width = int(n_samples), int(width)
    config, _ = run_config(settings, n_samples, width)
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
