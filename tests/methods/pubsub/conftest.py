"""Helpers shared by the tests of pubsubml.methods.pubsub: a threshold black box and its rows."""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["Threshold", "_frame"]


class Threshold:
    """A black box predicting 1 when ``x0 > t``, with fixed confidence."""

    input_features = ("x0",)
    classes = (0, 1)

    def __init__(self, t: float) -> None:
        self.t = t

    def predict_proba(self, X: pd.DataFrame) -> np.ndarray:
        p = np.where(X["x0"].to_numpy() > self.t, 0.8, 0.2)
        return np.column_stack([1 - p, p])


def _frame(n: int, seed: int) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(rng.random((n, 3)), columns=["x0", "x1", "x2"])
    return X, (X["x0"].to_numpy() > 0.5).astype(int)
