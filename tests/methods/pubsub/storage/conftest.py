"""Fitted customizers stored once for the storage tests, and helpers to read and edit folders."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LogisticRegression

from conftest import one_torch_thread
from pubsubml.artifacts import export_model, generate_signing_key, key_id
from pubsubml.data import hyperplane
from pubsubml.data.synthetic import hyperplane_schema
from pubsubml.learners.catalog import get_learner_spec
from pubsubml.methods.pubsub.customizer import Customizer
from pubsubml.methods.pubsub.storage import (
    MANIFEST_FILE,
    save_customizer,
)

COLS = [f"x{i}" for i in range(10)]
SUBSCRIBED = COLS[:5]  # the subscriber's columns; the publishers see x0..x6 and x3..x9
#: The own-model kind fitted with each fusion model of the classification fixtures.
OWN_KINDS = {"stacked": "logistic", "linear": "auto", "forest": "forest"}
F_COLS = [f"f{i}" for i in range(5)]
#: Files of a stored customizer with an own model and the two publishers of ``world``.
PARTS = {
    MANIFEST_FILE,
    "own/card.json",
    "own/weights.onnx",
    "models/0/card.json",
    "models/0/weights.safetensors",
    "models/1/card.json",
    "models/1/weights.onnx",
}


# ---- fixtures -------------------------------------------------------------------------------
@pytest.fixture(scope="package")
def world() -> dict[str, Any]:
    """A Hyperplane concept, two signed publishers (a DP network as safetensors, a plain
    logistic regression as ONNX), the subscriber's 300 rows on five columns and 200 test rows."""
    schema = hyperplane_schema(10)
    data = hyperplane(1000, seed=0)
    X = pd.DataFrame(np.asarray(data.X), columns=COLS)
    y = np.asarray(data.y)
    key = generate_signing_key()
    keys = {key_id(key.public_key()): key.public_key()}
    dp = get_learner_spec("dp_sgd_logistic").factory(
        schema=schema.subset(COLS[:7]),
        classes=[0, 1],
        epsilon=1.0,
        delta=1e-5,
        random_state=0,
    )
    with one_torch_thread():
        dp.fit(X.iloc[:250][COLS[:7]], y[:250])
    second = schema.subset(COLS[3:])
    plain = LogisticRegression().fit(second.encode(X.iloc[250:500][COLS[3:]]), y[250:500])
    publishers = [
        export_model(dp, publisher="p0", signing_key=key).open(keys),
        export_model(plain, publisher="p1", signing_key=key, schema=second).open(keys),
    ]
    return {
        "schema": schema,
        "key": key,
        "keys": keys,
        "publishers": publishers,
        "X": X.iloc[500:800][SUBSCRIBED].reset_index(drop=True),
        "y": y[500:800],
        "test": X.iloc[800:][SUBSCRIBED].reset_index(drop=True),
    }


def _fit_classifier(world: dict[str, Any], fusion: str) -> Customizer:
    customizer = Customizer(
        models=world["publishers"],
        schema=world["schema"],
        own_model=OWN_KINDS[fusion],
        fusion_model=fusion,
        random_state=0,
    )
    with one_torch_thread():
        return customizer.fit(world["X"], world["y"])


@pytest.fixture(scope="package")
def stored(
    world: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, tuple[Customizer, Path]]:
    """Per fusion model: the fitted customizer and the folder it was saved to."""
    out = {}
    for fusion in OWN_KINDS:
        customizer = _fit_classifier(world, fusion)
        folder = tmp_path_factory.mktemp(fusion) / "customized"
        out[fusion] = (customizer, save_customizer(customizer, folder, trusted_keys=world["keys"]))
    return out


@pytest.fixture
def copied(stored: dict[str, tuple[Customizer, Path]], tmp_path: Path) -> Path:
    """A private copy of the stored stacked customizer, to tamper with."""
    target = tmp_path / "copy"
    source = stored["stacked"][1]
    for path in sorted(source.rglob("*")):
        if path.is_file():
            (target / path.relative_to(source)).parent.mkdir(parents=True, exist_ok=True)
            (target / path.relative_to(source)).write_bytes(path.read_bytes())
    return target


# ---- helpers --------------------------------------------------------------------------------
def _files(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def _manifest(folder: Path) -> dict[str, Any]:
    return dict(json.loads((folder / MANIFEST_FILE).read_text(encoding="utf-8")))


def _edit_manifest(folder: Path, change: Callable[[dict[str, Any]], None]) -> None:
    manifest = _manifest(folder)
    change(manifest)
    (folder / MANIFEST_FILE).write_text(json.dumps(manifest), encoding="utf-8")


def _flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


def _own(customizer: Customizer) -> Any:
    """The fitted own model (an OwnLearner, or a SavedOwnModel once loaded)."""
    assert customizer.own_model_ is not None
    return customizer.own_model_


def _is_pickle(data: bytes) -> bool:
    """Protocol 2+ pickles open with PROTO (0x80) and the protocol number.  A safetensors file
    may open with 0x80 too (a 128-byte header), followed by a zero byte."""
    return data[:1] == b"\x80" and data[1:2] in {b"\x02", b"\x03", b"\x04", b"\x05"}


def _assert_same_fit(loaded: Customizer, original: Customizer) -> None:
    assert loaded.selected_ids_ == original.selected_ids_
    assert loaded.candidate_ids_ == original.candidate_ids_
    assert loaded.fusion_weights_ == pytest.approx(original.fusion_weights_, abs=0)
    assert loaded.fallback_ == original.fallback_
    assert loaded.meta_feature_names_ == original.meta_feature_names_
    np.testing.assert_array_equal(loaded.meta_std_, original.meta_std_)
    np.testing.assert_array_equal(loaded.selected_, original.selected_)
    np.testing.assert_array_equal(loaded.selection_scores_, original.selection_scores_)
    assert loaded.selection_metric_ == original.selection_metric_
    assert loaded.stacked_ == original.stacked_
    assert loaded.target_scale_ == original.target_scale_
    assert list(loaded.feature_names_in_) == list(original.feature_names_in_)
    assert loaded.n_features_in_ == original.n_features_in_
    assert [b.start for b in loaded.meta_blocks_] == [b.start for b in original.meta_blocks_]
    assert [b.stop for b in loaded.meta_blocks_] == [b.stop for b in original.meta_blocks_]
    for name in ("task", "own_model", "cv", "top_m", "classes", "random_state"):
        assert loaded.get_params()[name] == original.get_params()[name], name
