"""The two tasks of the DP-SGD learners: softmax classification and least-squares regression.

:class:`_DPSGDClassifier` and :class:`_DPSGDRegressor` add to
:class:`~pubsubml.learners.dpsgd_base._DPSGDBase` the targets, the output layer's meaning and
``predict``/``predict_proba``; the networks (:mod:`pubsubml.learners.mlp`) and the linear models
(:mod:`pubsubml.learners.dpsgd_linear`) derive from them.

References
----------
pubsub-ml.txt §7.2 (Table 4: softmax outputs for classification, a linear output for the
Housing Market regression), §8.3.2 (regression).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from sklearn.base import ClassifierMixin, RegressorMixin
from sklearn.utils.multiclass import type_of_target

from pubsubml.errors import LabelError
from pubsubml.learners.base import check_labels, check_regression_targets
from pubsubml.learners.dpsgd_base import _DPSGDBase


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
        if self.target_bounds is None:
            return None
        try:
            lo, hi = (float(v) for v in self.target_bounds)
        except (TypeError, ValueError) as exc:
            raise ValueError(
                f"target_bounds must be (lower, upper), got {self.target_bounds!r}"
            ) from exc
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise ValueError(
                f"target_bounds must be finite with lower < upper, got {self.target_bounds!r}"
            )
        return lo, hi

    def _targets(self, y: Any, n: int) -> tuple[torch.Tensor, np.ndarray | None, int]:
        bounds = self._bounds()
        t = check_regression_targets(y, n)
        if bounds is not None:
            lo, hi = bounds
            t = ((np.clip(t, lo, hi) - lo) / (hi - lo)).astype(np.float32)
        return torch.from_numpy(t), None, 1

    def _fold_output(self, module: torch.nn.Sequential) -> torch.nn.Sequential:
        bounds = self._bounds()
        if bounds is not None:
            last = module[-1]
            assert isinstance(last, torch.nn.Linear)
            with torch.no_grad():
                last.weight.mul_(bounds[1] - bounds[0])
                last.bias.mul_(bounds[1] - bounds[0]).add_(bounds[0])
        return module

    def predict(self, X: Any) -> np.ndarray:
        """Predicted values, shape (n_samples,)."""
        out: np.ndarray = self._forward(X)[:, 0].double().numpy()
        return out
