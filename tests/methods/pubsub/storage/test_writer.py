"""Tests of pubsubml.methods.pubsub.storage.writer: a fitted customizer stored without pickle and
read back predicting as before (pubsub-ml.txt §4: C^s = f_c ∘ m), and what cannot be stored."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pandas as pd
import pytest
import safetensors.numpy
from sklearn.base import clone
from sklearn.datasets import make_classification, make_friedman1
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LogisticRegression
from sklearn.utils.validation import check_is_fitted

from methods.pubsub.storage.conftest import (
    COLS,
    F_COLS,
    OWN_KINDS,
    PARTS,
    SUBSCRIBED,
    _assert_same_fit,
    _files,
    _is_pickle,
    _manifest,
    _own,
)
from pubsubml.artifacts import PublishedModel, generate_signing_key, key_id
from pubsubml.artifacts.artifact import Artifact
from pubsubml.artifacts.card import ModelCard
from pubsubml.methods.pubsub.customizer import Customizer
from pubsubml.methods.pubsub.own import OwnLearner
from pubsubml.methods.pubsub.storage import (
    MANIFEST_FILE,
    SavedOwnModel,
    load_customizer,
    save_customizer,
)
from pubsubml.schema import FeatureSchema

pytestmark = pytest.mark.usefixtures("one_thread")


# ---- round trips: classification ------------------------------------------------------------
@pytest.mark.parametrize("fusion", list(OWN_KINDS))
def test_a_classifier_predicts_as_before_after_the_round_trip(
    fusion: str, world: dict[str, Any], stored: dict[str, tuple[Customizer, Path]]
) -> None:
    original, folder = stored[fusion]
    test = world["test"]

    loaded = load_customizer(folder)

    check_is_fitted(loaded, "fusion_model_")
    np.testing.assert_array_equal(loaded.predict(test), original.predict(test))
    np.testing.assert_allclose(loaded.predict_proba(test), original.predict_proba(test), atol=1e-5)
    np.testing.assert_allclose(loaded.meta_features(test), original.meta_features(test), atol=1e-4)
    assert loaded.classes_.tolist() == original.classes_.tolist() == [0, 1]
    assert loaded.get_params()["fusion_model"] == fusion
    _assert_same_fit(loaded, original)
    assert loaded.metadata_ == {}


@pytest.mark.parametrize("fusion", list(OWN_KINDS))
def test_the_own_model_is_read_back_as_a_black_box_of_the_same_choice(
    fusion: str, world: dict[str, Any], stored: dict[str, tuple[Customizer, Path]]
) -> None:
    original, folder = stored[fusion]
    test = world["test"]

    own = load_customizer(folder).own_model_

    assert isinstance(own, SavedOwnModel)
    assert own.choice_ == _own(original).choice_
    if OWN_KINDS[fusion] != "auto":
        assert own.choice_ == OWN_KINDS[fusion]
    assert own.cv_scores_ == pytest.approx(_own(original).cv_scores_)
    np.testing.assert_array_equal(own.predict(test), _own(original).predict(test))
    np.testing.assert_allclose(
        own.predict_proba(test), _own(original).predict_proba(test), atol=1e-5
    )


def test_the_stacked_fusion_keeps_its_publishers_weights_and_penalty(
    world: dict[str, Any], stored: dict[str, tuple[Customizer, Path]]
) -> None:
    original, folder = stored["stacked"]

    loaded = load_customizer(folder)

    assert not original.fallback_ and any(
        w > 0 for i, w in original.fusion_weights_.items() if i != "own"
    )
    np.testing.assert_array_equal(loaded.fusion_model_.weights_, original.fusion_model_.weights_)
    np.testing.assert_array_equal(
        loaded.fusion_model_.intercept_, original.fusion_model_.intercept_
    )
    assert loaded.fusion_model_.penalty_ == original.fusion_model_.penalty_
    assert loaded.fusion_model_.cv_losses_ == pytest.approx(original.fusion_model_.cv_losses_)


@pytest.mark.parametrize("fusion", ["stacked", "linear"])
def test_string_labels_and_a_declared_class_absent_from_y_keep_their_order(
    fusion: str, tmp_path: Path
) -> None:
    X, codes = make_classification(
        300, n_features=4, n_informative=3, n_redundant=0, n_classes=3, random_state=0
    )
    frame = pd.DataFrame(1.0 / (1.0 + np.exp(-X)), columns=F_COLS[:4])
    labels = np.array(["c", "a", "b"])[codes]  # "d" is declared but never seen
    schema = FeatureSchema.numeric(F_COLS[:4], lower=0.0, upper=1.0)
    original = Customizer(
        own_model="logistic",
        schema=schema,
        classes=["a", "b", "c", "d"],
        fusion_model=fusion,
        random_state=0,
    ).fit(frame.iloc[:200], labels[:200])
    test = frame.iloc[200:]

    loaded = load_customizer(save_customizer(original, tmp_path / "c"))

    assert loaded.classes_.tolist() == original.classes_.tolist() == ["a", "b", "c", "d"]
    assert _manifest(tmp_path / "c")["classes"] == ["a", "b", "c", "d"]
    np.testing.assert_array_equal(loaded.predict(test), original.predict(test))
    np.testing.assert_allclose(loaded.predict_proba(test), original.predict_proba(test), atol=1e-5)
    assert loaded.meta_feature_names_ == ["own:a", "own:b", "own:c", "own:d"]
    np.testing.assert_array_equal(_own(loaded).predict(test), _own(original).predict(test))
    assert set(loaded.predict(test)) <= {"a", "b", "c"}


# ---- round trips: regression ----------------------------------------------------------------
@pytest.fixture(scope="module")
def friedman() -> dict[str, Any]:
    """Friedman #1 on five features in [0, 1]: 250 rows to fit and 100 to test."""
    X, y = make_friedman1(350, n_features=5, random_state=0)
    frame = pd.DataFrame(X, columns=F_COLS)
    return {
        "schema": FeatureSchema.numeric(F_COLS, lower=0.0, upper=1.0),
        "X": frame.iloc[:250],
        "y": y[:250],
        "test": frame.iloc[250:],
    }


@pytest.mark.parametrize("fusion", ["stacked", "linear"])
@pytest.mark.parametrize("bounds", [None, (0.0, 30.0)], ids=["unbounded", "bounded"])
@pytest.mark.parametrize("own", ["mlp", "forest", "logistic"])
def test_a_regressor_predicts_as_before_after_the_round_trip(
    own: str,
    bounds: tuple[float, float] | None,
    fusion: str,
    friedman: dict[str, Any],
    tmp_path: Path,
) -> None:
    original = Customizer(
        task="regression",
        own_model=own,
        schema=friedman["schema"],
        target_bounds=bounds,
        fusion_model=fusion,
        cv=3,
        random_state=0,
    ).fit(friedman["X"], friedman["y"])
    test = friedman["test"]

    loaded = load_customizer(save_customizer(original, tmp_path / "c"))

    assert not hasattr(loaded, "classes_")
    np.testing.assert_allclose(loaded.predict(test), original.predict(test), rtol=1e-4)
    np.testing.assert_allclose(_own(loaded).predict(test), _own(original).predict(test), rtol=1e-4)
    assert _own(loaded).choice_ == own
    assert loaded.get_params()["target_bounds"] == bounds
    _assert_same_fit(loaded, original)
    with pytest.raises(AttributeError, match="only available for classification"):
        loaded.predict_proba(test)


def test_a_regressor_with_a_forest_fusion_is_stored_as_onnx(
    friedman: dict[str, Any], tmp_path: Path
) -> None:
    original = Customizer(
        task="regression",
        own_model="logistic",
        schema=friedman["schema"],
        fusion_model="forest",
        cv=3,
        random_state=0,
    ).fit(friedman["X"], friedman["y"])

    loaded = load_customizer(save_customizer(original, tmp_path / "c"))

    assert (tmp_path / "c" / "fusion.onnx").is_file()
    test = friedman["test"]
    np.testing.assert_allclose(loaded.predict(test), original.predict(test), rtol=1e-4)


# ---- what is stored -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("fusion", "fusion_file"), [("stacked", "fusion.safetensors"), ("linear", "fusion.onnx")]
)
def test_the_folder_holds_only_safe_parts_whose_digests_the_manifest_lists(
    fusion: str, fusion_file: str, stored: dict[str, tuple[Customizer, Path]]
) -> None:
    folder = stored[fusion][1]

    files = _files(folder)

    assert set(files) == PARTS | {fusion_file}
    assert {p.name for p in folder.parent.iterdir()} == {folder.name}  # no temporary sibling
    assert not any(_is_pickle(data) for data in files.values())
    for name, data in files.items():  # every part parses as what its name says
        if name.endswith(".json"):
            json.loads(data)
        elif name.endswith(".onnx"):
            onnx.load_from_string(data)
        else:
            assert safetensors.numpy.load(data)
    manifest = json.loads(files.pop(MANIFEST_FILE))
    assert manifest["files"] == {n: hashlib.sha256(d).hexdigest() for n, d in files.items()}
    assert manifest["fusion"]["file"] == fusion_file
    assert [m["dir"] for m in manifest["models"]] == ["models/0", "models/1"]
    assert [m["id"] for m in manifest["models"]] == stored[fusion][0].selected_ids_[1:]


def test_received_models_are_stored_as_they_came_and_the_own_card_is_never_published(
    world: dict[str, Any], stored: dict[str, tuple[Customizer, Path]]
) -> None:
    folder = stored["stacked"][1]
    publishers = world["publishers"]

    own_card = ModelCard.from_json((folder / "own" / "card.json").read_bytes())

    for i, model in enumerate(publishers):
        artifact = Artifact(card=model.card, weights=model.weights)
        weights = "weights.onnx" if artifact.card.format == "onnx" else "weights.safetensors"
        assert (folder / f"models/{i}/card.json").read_bytes() == artifact.card.to_json().encode()
        assert (folder / f"models/{i}" / weights).read_bytes() == artifact.weights
    assert math.isinf(own_card.privacy.epsilon)
    assert own_card.publisher == "own" and own_card.format == "onnx"
    assert own_card.input_features == SUBSCRIBED
    publisher_key = key_id(world["key"].public_key())
    assert set(_manifest(folder)["keys"]) == {publisher_key, own_card.signer_key_id}


def test_the_own_card_takes_the_given_key_and_publisher(
    world: dict[str, Any], stored: dict[str, tuple[Customizer, Path]], tmp_path: Path
) -> None:
    key = generate_signing_key()

    folder = save_customizer(
        stored["stacked"][0],
        tmp_path / "c",
        trusted_keys=world["keys"],
        signing_key=key,
        publisher="clinic",
    )

    card = ModelCard.from_json((folder / "own" / "card.json").read_bytes())
    assert card.publisher == "clinic"
    assert card.signer_key_id == key_id(key.public_key())
    assert key_id(key.public_key()) in _manifest(folder)["keys"]
    np.testing.assert_array_equal(
        load_customizer(folder).predict(world["test"]), stored["stacked"][0].predict(world["test"])
    )


def test_metadata_is_kept_in_the_manifest_and_read_back(
    world: dict[str, Any], stored: dict[str, tuple[Customizer, Path]], tmp_path: Path
) -> None:
    metadata = {"label": "y", "rows": 300, "scale": 0.5, "tags": ["a", "b"], "note": None}

    folder = save_customizer(
        stored["forest"][0], tmp_path / "c", trusted_keys=world["keys"], metadata=metadata
    )

    assert _manifest(folder)["metadata"] == metadata
    assert load_customizer(folder).metadata_ == metadata


def test_a_customizer_without_subscribed_models_stores_no_models_folder(
    world: dict[str, Any], tmp_path: Path
) -> None:
    original = Customizer(own_model="logistic", schema=world["schema"], random_state=0).fit(
        world["X"], world["y"]
    )

    loaded = load_customizer(save_customizer(original, tmp_path / "c"))

    assert set(_files(tmp_path / "c")) == {
        MANIFEST_FILE,
        "own/card.json",
        "own/weights.onnx",
        "fusion.safetensors",
    }
    assert _manifest(tmp_path / "c")["models"] == []
    assert loaded.models == [] and loaded.selected_ids_ == ["own"]
    np.testing.assert_allclose(
        loaded.predict_proba(world["test"]), original.predict_proba(world["test"]), atol=1e-5
    )


@pytest.mark.parametrize("with_schema", [True, False], ids=["schema", "no_schema"])
def test_a_customizer_without_an_own_model_stores_a_null_own_entry(
    with_schema: bool, world: dict[str, Any], tmp_path: Path
) -> None:
    original = Customizer(
        models=world["publishers"],
        own_model=None,
        schema=world["schema"] if with_schema else None,
        random_state=0,
    ).fit(world["X"], world["y"])

    loaded = load_customizer(save_customizer(original, tmp_path / "c", trusted_keys=world["keys"]))

    assert _manifest(tmp_path / "c")["own"] is None
    assert not (tmp_path / "c" / "own").exists()
    assert loaded.own_model_ is None and "own" not in loaded.selected_ids_
    assert (loaded.schema is None) is (not with_schema)
    np.testing.assert_allclose(
        loaded.predict_proba(world["test"]), original.predict_proba(world["test"]), atol=1e-5
    )
    _assert_same_fit(loaded, original)


def test_a_loaded_customizer_can_be_cloned_and_refitted(
    world: dict[str, Any], stored: dict[str, tuple[Customizer, Path]]
) -> None:
    original, folder = stored["stacked"]
    loaded = load_customizer(folder)

    refitted = clone(loaded).fit(world["X"], world["y"])

    models = list(loaded.models or [])
    assert all(isinstance(m, PublishedModel) for m in models)
    assert [m.model_id for m in models] == original.selected_ids_[1:]
    check_is_fitted(refitted, "fusion_model_")
    assert isinstance(refitted.own_model_, OwnLearner)
    assert refitted.candidate_ids_ == original.candidate_ids_
    np.testing.assert_allclose(
        refitted.predict_proba(world["test"]), original.predict_proba(world["test"]), atol=1e-6
    )


# ---- refusals that change nothing ----------------------------------------------------------
def test_a_folder_with_files_is_not_overwritten(
    stored: dict[str, tuple[Customizer, Path]], tmp_path: Path
) -> None:
    target = tmp_path / "c"
    (target / "sub").mkdir(parents=True)
    (target / "notes.txt").write_bytes(b"mine")
    (target / "sub" / "data.bin").write_bytes(b"\x00\x01")
    plain_file = tmp_path / "file"
    plain_file.write_bytes(b"keep")
    before = _files(tmp_path)

    with pytest.raises(FileExistsError, match="not an empty folder"):
        save_customizer(stored["stacked"][0], target)
    with pytest.raises(FileExistsError, match="not an empty folder"):
        save_customizer(stored["stacked"][0], plain_file)

    assert _files(tmp_path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c", "file"]


def test_an_empty_folder_is_filled(
    world: dict[str, Any], stored: dict[str, tuple[Customizer, Path]], tmp_path: Path
) -> None:
    (tmp_path / "c").mkdir()

    folder = save_customizer(stored["forest"][0], tmp_path / "c", trusted_keys=world["keys"])

    assert folder == tmp_path / "c" and (folder / MANIFEST_FILE).is_file()
    assert [p.name for p in tmp_path.iterdir()] == ["c"]


def test_an_unfitted_customizer_is_refused(tmp_path: Path) -> None:
    with pytest.raises(NotFittedError):
        save_customizer(Customizer(own_model="logistic"), tmp_path / "c")

    assert list(tmp_path.iterdir()) == []


def test_an_own_model_without_a_public_schema_is_refused(
    world: dict[str, Any], tmp_path: Path
) -> None:
    customizer = Customizer(own_model="logistic", random_state=0).fit(world["X"], world["y"])

    with pytest.raises(ValueError, match="needs its public schema"):
        save_customizer(customizer, tmp_path / "c")

    assert list(tmp_path.iterdir()) == []


def test_a_plain_scikit_learn_subscribed_model_is_refused(
    world: dict[str, Any], tmp_path: Path
) -> None:
    X, y = world["X"], world["y"]
    plain = LogisticRegression().fit(X[COLS[:3]], y)  # PubSub-ML*: feature_names_in_, classes_
    customizer = Customizer(
        models=[*world["publishers"], plain],
        own_model="logistic",
        schema=world["schema"],
        random_state=0,
    ).fit(X, y)
    assert len(customizer.selected_ids_) == 4

    with pytest.raises(TypeError, match="only PublishedModels"):
        save_customizer(customizer, tmp_path / "c", trusted_keys=world["keys"])

    assert list(tmp_path.iterdir()) == []  # neither the folder nor a temporary sibling


@pytest.mark.parametrize("keys", ["none", "other"])
def test_a_subscribed_model_whose_signer_is_not_trusted_is_refused(
    keys: str, stored: dict[str, tuple[Customizer, Path]], tmp_path: Path
) -> None:
    other = generate_signing_key().public_key()
    trusted = None if keys == "none" else {key_id(other): other}

    with pytest.raises(ValueError, match="no trusted key for the signer"):
        save_customizer(stored["stacked"][0], tmp_path / "c", trusted_keys=trusted)

    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("part", ["own_model", "fusion_model"])
def test_estimators_given_as_parameters_are_refused(
    part: str, world: dict[str, Any], tmp_path: Path
) -> None:
    params: dict[str, Any] = {"own_model": "logistic", "fusion_model": "stacked"}
    params[part] = LogisticRegression()
    customizer = Customizer(**params, schema=world["schema"], random_state=0).fit(
        world["X"], world["y"]
    )

    with pytest.raises(TypeError, match="cannot be stored"):
        save_customizer(customizer, tmp_path / "c")

    assert list(tmp_path.iterdir()) == []
