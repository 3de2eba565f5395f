"""An artifact on disk (pubsub-ml.txt Algorithm 3 line 2, §3.2): written atomically, read back
with size limits and without following symbolic links."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from pubsubml.artifacts import Artifact, export_model, load_artifact
from pubsubml.errors import UntrustedArtifactError
from pubsubml.learners import create_learner
from pubsubml.schema import FeatureSchema


@pytest.fixture(scope="module")
def dp_artifact(
    schema: FeatureSchema, frame: pd.DataFrame, signing_key: Ed25519PrivateKey
) -> Artifact:
    estimator = create_learner("dp_logistic_regression", schema=schema, classes=[0, 1])
    estimator.set_params(max_iter=50, random_state=0)
    estimator.fit(frame[schema.names], frame["y"])
    return export_model(estimator, publisher="site-c", signing_key=signing_key)


def test_save_is_atomic_and_overwrites(dp_artifact: Artifact, tmp_path: Path) -> None:
    dp_artifact.save(tmp_path)
    dp_artifact.save(tmp_path)

    assert sorted(os.listdir(tmp_path)) == ["card.json", "weights.onnx"]
    assert load_artifact(tmp_path) == dp_artifact


def test_load_artifact_refuses_symlinks_and_oversized_files(
    dp_artifact: Artifact, tmp_path: Path
) -> None:
    directory = dp_artifact.save(tmp_path / "a")
    with pytest.raises(UntrustedArtifactError, match="larger than the limit"):
        load_artifact(directory, max_weights_bytes=100)

    (directory / "weights.onnx").rename(tmp_path / "elsewhere.onnx")
    (directory / "weights.onnx").symlink_to(tmp_path / "elsewhere.onnx")
    with pytest.raises(UntrustedArtifactError, match=r"cannot open weights\.onnx safely"):
        load_artifact(directory)


def test_missing_files_raise_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        load_artifact(tmp_path)
