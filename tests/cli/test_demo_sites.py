"""What the demo's sites do: channels, feature labels and the non-private reference models."""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.linear_model import LogisticRegression

from pubsubml.cli.demo_sites import AsPublished, _features_text, _matches
from pubsubml.data import hyperplane


def test_channels_match_the_publishers_features() -> None:
    assert _matches("x4 & x5", [f"x{i}" for i in range(7)])
    assert not _matches("x8 & x9", [f"x{i}" for i in range(7)])
    assert _matches("x0 & x1 | x8 & x9", [f"x{i}" for i in range(3, 10)])


def test_feature_ranges_are_shortened() -> None:
    assert _features_text([f"x{i}" for i in range(10)]) == "x0…x9"
    assert _features_text(["x1", "x2"]) == "x1,x2"


def test_a_reference_model_fills_missing_features_with_the_public_defaults() -> None:
    data = hyperplane(200, seed=0)
    features = [f"x{i}" for i in range(5)]
    schema = data.schema.subset(features)
    model = LogisticRegression().fit(schema.extend(data.X[features]), data.y)
    ref = AsPublished(model, schema, list(data.classes or ()))
    proba = ref.predict_proba(data.X[["x0", "x1"]])  # the subscriber lacks x2…x4
    assert proba.shape == (200, 2) and np.allclose(proba.sum(axis=1), 1.0)
    assert isinstance(ref.predict(pd.DataFrame(data.X[features])), np.ndarray)
