"""The two tasks of the DP-SGD learners: softmax classification and least-squares regression.

:class:`_DPSGDClassifier` and :class:`_DPSGDRegressor` add to
:class:`~pubsubml.learners.dpsgd_base._DPSGDBase` the targets, the output layer's meaning and
``predict``/``predict_proba``; the networks (:mod:`pubsubml.learners.mlp`) and the linear models
(:mod:`pubsubml.learners.dpsgd_linear`) derive from them.  A regressor with public
``target_bounds`` trains on the target scaled to [0, 1] by them (:func:`scale_targets`) and folds
the inverse scaling into its last layer (:func:`fold_target_bounds`); the DP federated baselines
(:mod:`pubsubml.methods.federated.rounds`) do the same.

References
----------
pubsub-ml.txt §7.2 (Table 4: softmax outputs for classification, a linear output for the
Housing Market regression), §8.3.2 (regression).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from sklearn.base import ClassifierMixin, RegressorMixin
from sklearn.utils.multiclass import type_of_target

from pubsubml.errors import LabelError
from pubsubml.learners.base import check_labels, check_regression_targets, check_target_bounds
from pubsubml.learners.dpsgd_base import _DPSGDBase

__all__ = ["check_target_bounds", "fold_target_bounds", "scale_targets", "unfold_target_bounds"]


def scale_targets(t: np.ndarray, bounds: tuple[float, float] | None) -> np.ndarray:
    """Regression targets clipped to the public ``bounds`` and scaled to [0, 1] (float32).

    ``None`` leaves them as they are.  The bounds are public, never read off the targets.

    References
    ----------
    pubsub-ml.txt §8.3.2 (regression with DP publishers and DP federated baselines).

    Examples
    --------
    >>> scale_targets(np.array([-5.0, 15.0, 40.0]), (0.0, 30.0)).tolist()
    [0.0, 0.5, 1.0]
    """
    if bounds is None:
        return np.asarray(t, dtype=np.float32)
    lo, hi = bounds
    return ((np.clip(t, lo, hi) - lo) / (hi - lo)).astype(np.float32)


def _scale_last_layer(module: torch.nn.Sequential, scale: float, shift: float) -> None:
    last = module[-1]
    if not isinstance(last, torch.nn.Linear) or last.bias is None:
        raise ValueError("the network must end with an nn.Linear layer with a bias")
    with torch.no_grad():
        last.weight.mul_(scale)
        last.bias.mul_(scale).add_(shift)


def fold_target_bounds(
    module: torch.nn.Sequential, bounds: tuple[float, float] | None
) -> torch.nn.Sequential:
    """Fold the inverse target scaling into the last Linear layer, in place.

    A network trained on targets scaled by :func:`scale_targets` then predicts in target units:
    ``ŷ = lower + (upper − lower) · out``.  ``None`` leaves it unchanged.

    Returns
    -------
    torch.nn.Sequential
        ``module`` itself.
    """
    if bounds is not None:
        _scale_last_layer(module, bounds[1] - bounds[0], bounds[0])
    return module


def unfold_target_bounds(
    module: torch.nn.Sequential, bounds: tuple[float, float] | None
) -> torch.nn.Sequential:
    """Undo :func:`fold_target_bounds` in place: the network then predicts scaled targets.

    Used to train a published (folded) network further on scaled targets, e.g. fine-tuning.

    Examples
    --------
    >>> net = torch.nn.Sequential(torch.nn.Linear(2, 1))
    >>> x = torch.rand(3, 2)
    >>> before = net(x)
    >>> torch.allclose(unfold_target_bounds(fold_target_bounds(net, (2.0, 5.0)), (2.0, 5.0))(x),
    ...                before, atol=1e-6)
    True
    """
    if bounds is not None:
        lo, hi = bounds
        _scale_last_layer(module, 1.0 / (hi - lo), -lo / (hi - lo))
    return module


class _DPSGDClassifier(ClassifierMixin, _DPSGDBase):
    """A softmax classifier over the public label set ``classes``."""

    _task = "classification"
    classes: Sequence[Any] | None
    classes_: np.ndarray

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.classifier_tags.poor_score = self._poor_score()
        return tags

    def _targets(self, y: Any, n: int) -> tuple[torch.Tensor, np.ndarray | None, int]:
        if self._private() and self.classes is None:
            raise LabelError(
                f"{type(self).__name__} needs the public label set, e.g. classes=[0, 1]: reading "
                "it from the training labels would leak which labels occur"
            )
        if self.classes is None and type_of_target(y) in ("continuous", "continuous-multioutput"):
            raise LabelError("Unknown label type: continuous; a classifier needs discrete labels")
        classes, codes = check_labels(y, self.classes, n)
        return torch.from_numpy(codes), classes, len(classes)

    def predict_proba(self, X: Any) -> np.ndarray:
        """Class probabilities, shape (n_samples, n_classes), columns in ``classes_`` order."""
        return torch.softmax(self._forward(X), dim=1).double().numpy()

    def predict(self, X: Any) -> np.ndarray:
        """Predicted labels, shape (n_samples,)."""
        codes = self._forward(X).argmax(dim=1).numpy()
        return np.asarray(self.classes_[codes])


class _DPSGDRegressor(RegressorMixin, _DPSGDBase):
    """A least-squares regressor with one linear output and optional public target bounds."""

    _task = "regression"
    target_bounds: tuple[float, float] | None

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.regressor_tags.poor_score = self._poor_score()
        return tags

    def _bounds(self) -> tuple[float, float] | None:
        return check_target_bounds(self.target_bounds)

    def _targets(self, y: Any, n: int) -> tuple[torch.Tensor, np.ndarray | None, int]:
        bounds = self._bounds()
        t = scale_targets(check_regression_targets(y, n), bounds)
        return torch.from_numpy(t), None, 1

    def _fold_output(self, module: torch.nn.Sequential) -> torch.nn.Sequential:
        return fold_target_bounds(module, self._bounds())

    def predict(self, X: Any) -> np.ndarray:
        """Predicted values, shape (n_samples,)."""
        out: np.ndarray = self._forward(X)[:, 0].double().numpy()
        return out
