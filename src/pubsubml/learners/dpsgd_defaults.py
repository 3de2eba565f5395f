"""DP-SGD hyperparameters chosen from public inputs only, and the paper's Table 4 setting.

A publisher cannot tune its DP-SGD hyperparameters on its private data without paying for it
(every look at the data is a release, DESIGN.md; accounted tuning is
:class:`~pubsubml.learners.hyperparameter_search.PrivateHyperparameterSearch`).
:func:`dp_sgd_defaults` picks them once, before any data is read, from what is public: the number of
rows n (treated as public, as everywhere in DP-SGD accounting), the privacy target (ε, δ) and the
width of the encoded input.

**The rule**, and where each number comes from (none was tuned on experiment results):

* **Batch.** Larger batches improve DP-SGD's privacy/utility trade-off (Ponomareva et al.
  2023, §5; De et al. 2022): the noise σC is added to a sum of about q·n clipped gradients.  A
  linear model trains full batch (q = 1); a network, whose loss needs more steps, on batches
  of ⌈n/3⌉ (three steps per epoch), the setting that made DP networks useful on public
  proxy streams (generated Hyperplane data, no site's rows: batch ≈ n/3, learning rate 3e-2
  gave accuracy 0.83/0.60 where the paper's setting was at chance).
* **Steps.** A fixed budget of steps with Adam (Ponomareva et al. 2023, §5): 100 full-batch
  steps for a linear model; the paper's 30 epochs (§7.2), i.e. about 90 steps, for a network.
  Full-batch steps compose as one Gaussian release (T steps at σ√T), so the step count is
  set by optimization, not by ε; σ is calibrated to (ε, δ) afterwards by
  :func:`~pubsubml.privacy.calibration.calibrate_noise`.
* **Learning rate.** Under Adam each coordinate moves by about the learning rate η per step,
  whatever the gradient's scale.  (i) *Reach*: η·T must let a weight reach the size that the
  public [0, 1] input scaling needs: a logit swing of 20 (±10) across one feature's range for
  classification, twice the [0, 1] target range for regression.  (ii) *Jitter*: once the
  gradient is mostly noise, the steps point in random directions and move a pre-activation by
  about η·‖(x − ½, 1)‖ ≤ η·√(d/4 + 1) (the learners train on the encoding centred at its
  midpoint, :data:`~pubsubml.learners.dpsgd_base.INPUT_CENTER`, so each column lies in
  [−½, ½]); keeping that below one logit (a tenth of the target range for regression) bounds
  η by 1/√(d/4 + 1).  A linear model takes η = min(reach / T, jitter / √(d/4 + 1)); with
  d = 10 this is 0.2 for classification, the rate that gave 0.84/0.78 accuracy on those
  public proxy streams (full batch, 100 steps, C = 1).
  A network takes η = min(3e-2, 1/√(d/4 + 1)), 3e-2 being the rate measured there.
* **Clipping.** C = 1: with Adam the scale of C cancels (updates are normalized per
  coordinate), and a small C that clips most per-sample gradients is the guide's advice
  (Ponomareva et al. 2023, §5).

ε and δ are validated (δ < 1/n) but do not change the result: the rule depends on them only
through the noise that is calibrated afterwards.

The paper's own setting (pubsub-ml.txt §7.2: Adam, 30 epochs, minibatches of 100) stays available
by name as :data:`TABLE4_HYPERPARAMETERS`.

References
----------
pubsub-ml.txt §7.2 (Table 4) and §8 (DP-SGD [1]); N. Ponomareva et al., "How to DP-fy ML: A
Practical Guide to Machine Learning with Differential Privacy", JAIR 77, 2023, §5 (large batches,
a fixed budget of steps, Adam, a small clipping norm); S. De et al., "Unlocking High-Accuracy
Differentially Private Image Classification through Scale", arXiv:2204.13650, 2022 (large batches).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal

from pubsubml.privacy.accountants import check_delta, check_epsilon

__all__ = ["TABLE4_HYPERPARAMETERS", "DPSGDDefaults", "dp_sgd_defaults"]

Model = Literal["linear", "mlp"]
Task = Literal["classification", "regression"]

#: The training setting of pubsub-ml.txt §7.2 ("30 epochs with a minibatch size of 100", Adam,
#: Table 4), with the learning rate 1e-3 that the package used for it (Adam's customary default,
#: Kingma & Ba 2015; the paper does not print one).  ``DPMLPClassifier(**TABLE4_HYPERPARAMETERS,
#: ...)`` reproduces the paper's publishers; at ε = 1 their DP-SGD runs are near chance level.
TABLE4_HYPERPARAMETERS: Mapping[str, Any] = MappingProxyType(
    {"epochs": 30, "batch_size": 100, "learning_rate": 1e-3, "optimizer": "adam"}
)

# ---- the rule's constants, each fixed once from a principle (see the module notes) ----------
_LINEAR_STEPS = 100  # full-batch steps of a linear model
_MLP_EPOCHS = 30  # the paper's epoch count (§7.2)
_MLP_BATCHES_PER_EPOCH = 3  # batch ≈ n/3
_MLP_LEARNING_RATE = 3e-2
_LOGIT_REACH = 20.0  # classification: a weight must be able to reach a logit swing of ±10
_TARGET_REACH = 2.0  # regression on targets scaled to [0, 1]: twice the target range
_LOGIT_JITTER = 1.0  # classification / hidden units: one unit of pre-activation per step
_TARGET_JITTER = 0.1  # regression: a tenth of the target range per step
_MAX_GRAD_NORM = 1.0


@dataclass(frozen=True)
class DPSGDDefaults:
    """Resolved DP-SGD hyperparameters of one training run.

    Attributes
    ----------
    batch_size : int
        Expected batch size (Poisson sampling rate q = batch_size / n).
    epochs : int
    steps : int
        Optimizer steps that ``epochs`` give on n rows of a private run (``epochs · round(1/q)``,
        as :meth:`~pubsubml.privacy.dpsgd.DPSGDConfig.steps_for` counts them).
    learning_rate : float
    optimizer : {"adam", "sgd"}
    max_grad_norm : float
        Per-sample clipping norm C.
    """

    batch_size: int
    epochs: int
    steps: int
    learning_rate: float
    optimizer: Literal["adam", "sgd"]
    max_grad_norm: float


def _check_count(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an int >= 1, got {value!r}")
    return int(value)


def _check_public_inputs(
    n_rows: int, epsilon: float | None, delta: float, n_features: int, model: Model, task: Task
) -> tuple[int, int]:
    """Validate the public inputs of :func:`dp_sgd_defaults`; return (n, width)."""
    n = _check_count("n_rows", n_rows)
    width = _check_count("n_features", n_features)
    if epsilon is not None:
        check_epsilon(epsilon)
    check_delta(delta, n)
    if model not in ("linear", "mlp"):
        raise ValueError(f"model must be 'linear' or 'mlp', got {model!r}")
    if task not in ("classification", "regression"):
        raise ValueError(f"task must be 'classification' or 'regression', got {task!r}")
    return n, width


def _centred_row_norm(width: int) -> float:
    """‖(x − ½, 1)‖ at most, for x in [0, 1]^width: the jitter scale of one step (module notes)."""
    return math.sqrt(width / 4 + 1)


def _linear_schedule(n: int, width: int, task: Task) -> tuple[int, int, float]:
    """(batch, epochs, learning rate) of a linear model: full batch, 100 steps, reach vs jitter."""
    reach, jitter = (
        (_LOGIT_REACH, _LOGIT_JITTER)
        if task == "classification"
        else (_TARGET_REACH, _TARGET_JITTER)
    )
    lr = min(reach / _LINEAR_STEPS, jitter / _centred_row_norm(width))
    return n, _LINEAR_STEPS, lr


def _mlp_schedule(n: int, width: int) -> tuple[int, int, float]:
    """(batch, epochs, learning rate) of a network: batches of ⌈n/3⌉ for the paper's 30 epochs."""
    lr = min(_MLP_LEARNING_RATE, _LOGIT_JITTER / _centred_row_norm(width))
    return math.ceil(n / _MLP_BATCHES_PER_EPOCH), _MLP_EPOCHS, lr


def dp_sgd_defaults(
    n_rows: int,
    epsilon: float | None,
    delta: float,
    n_features: int,
    *,
    model: Model = "linear",
    task: Task = "classification",
) -> DPSGDDefaults:
    """DP-SGD hyperparameters for a run on ``n_rows`` rows, from public inputs only.

    A pure function: the same public inputs give the same hyperparameters whatever the private
    rows are, so choosing them costs no privacy.

    Parameters
    ----------
    n_rows : int
        Number of training rows n (public, as in all DP-SGD accounting: it sets q and the steps).
    epsilon : float or None
        Target ε of the run; ``None`` when the noise multiplier is fixed instead.
    delta : float
        Target δ, below 1/n.
    n_features : int
        Width of the encoded input (``FeatureSchema.n_encoded``, or the columns of a matrix already
        scaled with public bounds).  Every encoded column lies in [0, 1].
    model : {"linear", "mlp"}, default="linear"
        A linear model (logistic/softmax or least squares) or a fully connected network.
    task : {"classification", "regression"}, default="classification"
        Regression assumes targets scaled to [0, 1] by public bounds (``target_bounds``).

    Returns
    -------
    DPSGDDefaults

    Raises
    ------
    InvalidPrivacyParameterError
        ε ≤ 0 or not finite, δ outside (0, 1/n).
    ValueError
        ``n_rows`` or ``n_features`` below 1, an unknown ``model`` or ``task``.

    Notes
    -----
    The rule (batch, steps, learning rate, clipping) and where each of its numbers comes from
    are in the module notes; none was tuned on experiment results.  ε and δ are validated
    (δ < 1/n) but do not change the result.

    References
    ----------
    pubsub-ml.txt §7.2 (Table 4), §8 (DP-SGD); Ponomareva et al. 2023, §5; De et al. 2022.

    Examples
    --------
    >>> d = dp_sgd_defaults(1200, 1.0, 1e-5, 10)
    >>> d.batch_size, d.steps, d.learning_rate, d.max_grad_norm
    (1200, 100, 0.2, 1.0)
    >>> m = dp_sgd_defaults(1500, 1.0, 1e-5, 10, model="mlp")
    >>> m.batch_size, m.epochs, m.steps, m.learning_rate
    (500, 30, 90, 0.03)
    """
    n, width = _check_public_inputs(n_rows, epsilon, delta, n_features, model, task)
    if model == "linear":
        batch, epochs, lr = _linear_schedule(n, width, task)
    else:
        batch, epochs, lr = _mlp_schedule(n, width)
    steps = epochs * max(1, round(1.0 / min(1.0, batch / n)))  # as DPSGDConfig.steps_for
    return DPSGDDefaults(
        batch_size=batch,
        epochs=epochs,
        steps=steps,
        learning_rate=float(lr),
        optimizer="adam",
        max_grad_norm=_MAX_GRAD_NORM,
    )
