"""Fixtures of the artifact tests: a public schema, data, keys and small fitted models."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from sklearn.linear_model import LogisticRegression

from pubsubml.artifacts import Artifact, export_model, generate_signing_key, key_id
from pubsubml.privacy.events import DPEvent
from pubsubml.schema import Feature, FeatureSchema


@pytest.fixture(scope="session")
def schema() -> FeatureSchema:
    """Three numeric features and one categorical one (5 encoded columns)."""
    return FeatureSchema(
        features=(
            Feature(name="age", lower=0, upper=100, default=50),
            Feature(name="bmi", lower=10, upper=50, default=25),
            Feature(name="wbc", lower=0, upper=20, default=7.5),
            Feature(name="sex", kind="categorical", categories=("f", "m"), default="f"),
        )
    )


def make_frame(n: int, seed: int = 0) -> pd.DataFrame:
    """``n`` rows over the fixture schema, with a label column ``y`` and a target ``t``."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(
        {
            "age": rng.uniform(0, 100, n),
            "bmi": rng.uniform(10, 50, n),
            "wbc": rng.uniform(0, 20, n),
            "sex": rng.choice(["f", "m"], n),
        }
    )
    frame["y"] = ((frame.age / 100 + frame.wbc / 20 + rng.normal(0, 0.2, n)) > 1).astype(int)
    frame["t"] = frame.age / 100 - frame.bmi / 50 + (frame.sex == "m") * 0.3
    return frame


@pytest.fixture(scope="session")
def frame() -> pd.DataFrame:
    """300 training rows."""
    return make_frame(300)


@pytest.fixture(scope="session")
def X(frame: pd.DataFrame) -> pd.DataFrame:
    """The features of :func:`frame`."""
    return frame[["age", "bmi", "wbc", "sex"]]


@pytest.fixture(scope="session")
def signing_key() -> Ed25519PrivateKey:
    """The publisher's key."""
    return generate_signing_key()


@pytest.fixture(scope="session")
def trusted(signing_key: Ed25519PrivateKey) -> dict[str, Ed25519PublicKey]:
    """The subscriber's trusted keys: the publisher's."""
    public = signing_key.public_key()
    return {key_id(public): public}


class FittedNetwork:
    """A fitted stand-in with the attributes of pubsubml's MLP learners (``module_`` etc.)."""

    def __init__(
        self,
        module: torch.nn.Module,
        schema: FeatureSchema,
        classes: Sequence[Any] | None,
        events: list[DPEvent] | None = None,
        epsilon: float = math.inf,
        delta: float = 0.0,
    ) -> None:
        self.module_ = module
        self.schema_ = schema
        if classes is not None:
            self.classes_ = np.asarray(classes)
        self.privacy_events_ = events or []
        self.epsilon_ = epsilon
        self.delta_ = delta

    def outputs(self, X: pd.DataFrame) -> np.ndarray:
        """Reference outputs in torch: softmax probabilities or (n, 1) predictions."""
        Z = torch.from_numpy(self.schema_.encode(X, extra="ignore"))
        with torch.no_grad():
            out = self.module_(Z)
        if hasattr(self, "classes_"):
            out = torch.softmax(out, dim=1)
        return out.double().numpy()


def build_sequential(sizes: Sequence[int], activation: type[torch.nn.Module], seed: int) -> Any:
    """``nn.Sequential`` of Linear layers of ``sizes`` with ``activation`` in between."""
    torch.manual_seed(seed)
    parts: list[torch.nn.Module] = []
    for i, (n_in, n_out) in enumerate(itertools.pairwise(sizes)):
        parts.append(torch.nn.Linear(n_in, n_out))
        if i < len(sizes) - 2:
            parts.append(activation())
    return torch.nn.Sequential(*parts)


@pytest.fixture(scope="session")
def make_network(schema: FeatureSchema) -> Callable[..., FittedNetwork]:
    """Factory of fitted stand-in networks over the fixture schema."""

    def make(
        hidden: Sequence[int] = (8, 4),
        activation: type[torch.nn.Module] = torch.nn.Tanh,
        classes: Sequence[Any] | None = (0, 1),
        seed: int = 0,
        over: FeatureSchema | None = None,
    ) -> FittedNetwork:
        inputs = over or schema
        n_out = 1 if classes is None else len(classes)
        module = build_sequential([inputs.n_encoded, *hidden, n_out], activation, seed)
        return FittedNetwork(module, inputs, classes)

    return make


@pytest.fixture(scope="session")
def onnx_artifact(
    schema: FeatureSchema, frame: pd.DataFrame, signing_key: Ed25519PrivateKey
) -> Artifact:
    """A non-private logistic regression exported as ONNX."""
    model = LogisticRegression().fit(schema.encode(frame[schema.names]), frame["y"])
    return export_model(model, publisher="site-a", signing_key=signing_key, schema=schema)


@pytest.fixture(scope="session")
def safetensors_artifact(
    make_network: Callable[..., FittedNetwork], signing_key: Ed25519PrivateKey
) -> Artifact:
    """A non-private network exported as safetensors."""
    return export_model(
        make_network(), publisher="site-b", signing_key=signing_key, format="safetensors"
    )


@pytest.fixture(scope="session")
def make_data() -> Callable[[int, int], pd.DataFrame]:
    """Factory of frames: ``make_data(n, seed)`` (see :func:`make_frame`)."""
    return make_frame
