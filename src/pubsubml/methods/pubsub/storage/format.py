"""The file format of a stored customized model: its folder, manifest, limits and read-back parts.

:func:`~pubsubml.methods.pubsub.storage.writer.save_customizer` writes a fitted
:class:`~pubsubml.methods.pubsub.customizer.Customizer` as a folder of safe parts, and
:func:`~pubsubml.methods.pubsub.storage.reader.load_customizer` reads it back as a fitted
``Customizer`` whose ``predict`` / ``predict_proba`` give the same outputs (to float32 rounding of
the ONNX parts)::

    customized.json          the manifest: task, classes, the public schema, the meta-feature
                             layout and scaling, the fusion's kind and parameters, the Customizer's
                             parameters, the keys that verify the artifacts, the SHA-256 of every
                             file below
    own/                     M^s as an artifact (card.json + weights.onnx): its fitted
                             scikit-learn model on the schema-encoded inputs, signed (never
                             published: the card says ε = ∞, and it never leaves the site)
    models/0, models/1, …    the selected subscribed models, as they were received (signed
                             cards and ONNX or safetensors weights)
    fusion.safetensors       the stacked fusion's weights and intercepts, or
    fusion.onnx              any other fusion model (a logistic/ridge layer, a forest)

Loading checks every file's digest against the manifest, re-verifies every card's signature and
weights digest, and runs the ONNX safety checks of :mod:`~pubsubml.artifacts.onnx_codec` on the
fusion graph: nothing is unpickled and nothing is executed but ONNX graphs and numpy arithmetic
(DESIGN.md, "Never unpickle what crosses a site boundary"; the folder is the subscriber's own, but
it holds models from other sites).  The folder is written to a temporary sibling and renamed into
place, so a failed save leaves nothing behind.

This module holds what both sides share: the names, version and size limits, the JSON encoding of
values, and the parts a loaded folder holds in place of fitted scikit-learn objects
(:class:`SavedOwnModel` for M^s, :class:`OnnxFusion` for an ONNX fusion model).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from pubsubml.artifacts import PublishedModel
from pubsubml.artifacts.onnx_codec import OnnxRunner

__all__ = [
    "FORMAT",
    "MANIFEST_FILE",
    "MAX_MANIFEST_BYTES",
    "MAX_PART_BYTES",
    "PARAMS",
    "VERSION",
    "OnnxFusion",
    "SavedOwnModel",
    "finite_or_text",
    "jsonable",
]

MANIFEST_FILE = "customized.json"
FORMAT = "pubsubml-customized"
VERSION = 1
MAX_MANIFEST_BYTES = 16 * 2**20
MAX_PART_BYTES = 256 * 2**20
PARAMS = (
    "task",
    "own_model",
    "fusion_model",
    "cv",
    "top_m",
    "selection_metric",
    "train_split",
    "fusion_split",
    "classes",
    "target_bounds",
    "random_state",
)
"""The Customizer parameters the manifest records (all JSON values)."""


def finite_or_text(value: float) -> float | str:
    """``value``, or its text (``"inf"``) where JSON has no number for it."""
    return value if math.isfinite(value) else str(value)


def jsonable(value: Any) -> Any:
    """``value`` as JSON values (numpy scalars and arrays as numbers and lists, ∞ as text).

    Raises
    ------
    TypeError
        A value JSON cannot hold.
    """
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, tuple | list | np.ndarray):
        return [jsonable(v) for v in np.asarray(value, dtype=object).tolist()]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if value is None or isinstance(value, bool | int | float | str):
        return value
    raise TypeError(f"{type(value).__name__} value {value!r} cannot be stored as JSON")


# ---- the parts of a loaded folder -----------------------------------------------------------
class SavedOwnModel:
    """M^s read back from its artifact: the same interface as a fitted ``OwnLearner``.

    Parameters
    ----------
    model : PublishedModel
        The own artifact (outputs in class-code order 0..K-1, or the model's target scale).
    classes : ndarray or None
        The subscriber's labels (classification).
    target_affine : (float, float), optional
        ``(offset, scale)``: a regression output ``t`` is ``offset + scale · t`` in target units.
    choice : str
        The own-model kind that was chosen (``"mlp"``, ``"forest"``, ``"logistic"``).
    cv_scores : dict of str to float, optional
        The candidates' out-of-fold losses of that choice.
    """

    def __init__(
        self,
        model: PublishedModel,
        classes: np.ndarray | None,
        target_affine: tuple[float, float] | None,
        choice: str,
        cv_scores: Mapping[str, float] | None = None,
    ) -> None:
        self.model = model
        self.choice_ = choice
        self.cv_scores_ = dict(cv_scores or {})
        self.target_affine = target_affine
        self.input_features = model.input_features
        self.feature_names_in_ = np.asarray(model.input_features, dtype=object)
        if classes is not None:
            self.classes_ = classes

    def predict_proba(self, X: pd.DataFrame) -> np.ndarray:
        """Class probabilities, columns in ``classes_`` order."""
        return np.asarray(self.model.predict_outputs(X), dtype=np.float64)

    def predict(self, X: pd.DataFrame) -> np.ndarray:
        """Labels (classification) or values (regression)."""
        out = np.asarray(self.model.predict_outputs(X), dtype=np.float64)
        if hasattr(self, "classes_"):
            return np.asarray(self.classes_[np.argmax(out, axis=1)])
        offset, scale = self.target_affine or (0.0, 1.0)
        return offset + scale * out[:, 0]


class OnnxFusion:
    """A fusion model f_c read back from ONNX: probabilities for every class, or one output."""

    def __init__(self, runner: OnnxRunner, n_classes: int | None) -> None:
        self._runner = runner
        self.n_features_in_ = runner.n_inputs
        if n_classes is not None:
            self.classes_ = np.arange(n_classes)

    def predict_proba(self, M: np.ndarray) -> np.ndarray:
        """Class probabilities of the meta-features."""
        return np.asarray(self._runner.run(np.asarray(M, dtype=np.float32)), dtype=np.float64)

    def predict(self, M: np.ndarray) -> np.ndarray:
        """Class indices (classification) or the prediction on the fusion's target scale."""
        out = self.predict_proba(M)
        return np.argmax(out, axis=1) if hasattr(self, "classes_") else out[:, 0]
