"""Using a federation's global model at one site: its predictions.

:class:`GlobalModelMixin` gives every estimator that holds a federation's global network in
``module_`` (:class:`~pubsubml.methods.federated.rounds.FederatedMLP`,
:class:`~pubsubml.methods.flower.model.FlowerMLP`) its ``predict``/``predict_proba``/``score``,
with the inputs encoded by the public schema (features a site lacks take their public defaults,
pubsub-ml.txt §8.1.3).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import torch
from sklearn.utils.validation import check_is_fitted

if TYPE_CHECKING:
    from pubsubml.schema import FeatureSchema

__all__ = ["GlobalModelMixin"]


class GlobalModelMixin:
    """Predictions of the fitted global model ``module_`` (inputs scaled by the public schema)."""

    module_: torch.nn.Sequential
    schema: FeatureSchema
    task: str
    classes_: np.ndarray

    def _forward(self, X: pd.DataFrame) -> torch.Tensor:
        check_is_fitted(self, "module_")
        Z = torch.from_numpy(self.schema.encode(X, extra="ignore", missing="default"))
        with torch.no_grad():
            out: torch.Tensor = self.module_(Z)
        return out

    def predict_proba(self, X: pd.DataFrame) -> np.ndarray:
        """Class probabilities of the global model, shape (n_samples, n_classes)."""
        return torch.softmax(self._forward(X), dim=1).numpy().astype(np.float64)

    def predict(self, X: pd.DataFrame) -> np.ndarray:
        """Labels (classification) or values (regression), shape (n_samples,)."""
        if self.task == "classification":
            proba = self.predict_proba(X)  # raises NotFittedError before classes_ is read
            return np.asarray(self.classes_[proba.argmax(axis=1)])
        return self._forward(X)[:, 0].numpy().astype(np.float64)

    def score(self, X: pd.DataFrame, y: Any) -> float:
        """Accuracy (classification) or R² (regression)."""
        from sklearn.metrics import accuracy_score, r2_score

        pred = self.predict(X)
        return float(
            accuracy_score(y, pred) if self.task == "classification" else r2_score(y, pred)
        )
