"""A customized model stored without pickle: save_customizer / load_customizer round trips,
the folder's contents, refusals that change nothing, and tampering detected on load."""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pandas as pd
import pytest
import safetensors.numpy
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from sklearn.base import clone
from sklearn.datasets import make_classification, make_friedman1
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LogisticRegression
from sklearn.utils.validation import check_is_fitted

from conftest import one_torch_thread
from pubsubml.artifacts import PublishedModel, export_model, generate_signing_key, key_id
from pubsubml.artifacts.artifact import Artifact
from pubsubml.artifacts.card import ModelCard
from pubsubml.data import hyperplane
from pubsubml.data.synthetic import hyperplane_schema
from pubsubml.errors import DigestMismatchError, SignatureError, UntrustedArtifactError
from pubsubml.learners.catalog import get_learner_spec
from pubsubml.methods.pubsub.customizer import Customizer
from pubsubml.methods.pubsub.own import OwnLearner
from pubsubml.methods.pubsub.saved import (
    MANIFEST_FILE,
    SavedOwnModel,
    load_customizer,
    save_customizer,
)
from pubsubml.schema import FeatureSchema

pytestmark = pytest.mark.usefixtures("one_thread")

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
@pytest.fixture(scope="module")
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


@pytest.fixture(scope="module")
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


# ---- tampering and folders that are not stored models --------------------------------------
@pytest.mark.parametrize(
    "name",
    [
        "fusion.safetensors",
        "models/0/weights.safetensors",
        "models/1/weights.onnx",
        "models/0/card.json",
        "own/weights.onnx",
        "own/card.json",
    ],
)
def test_a_changed_byte_is_a_digest_mismatch(name: str, copied: Path) -> None:
    _flip(copied / name)

    with pytest.raises(DigestMismatchError, match="changed since the model was stored"):
        load_customizer(copied)


def test_changed_weights_with_an_updated_manifest_still_fail_the_signed_digest(
    copied: Path,
) -> None:
    name = "models/1/weights.onnx"
    _flip(copied / name)
    digest = hashlib.sha256((copied / name).read_bytes()).hexdigest()
    _edit_manifest(copied, lambda m: m["files"].__setitem__(name, digest))

    with pytest.raises(DigestMismatchError, match="the signed card says"):
        load_customizer(copied)


@pytest.mark.parametrize("name", ["models/0/card.json", "own/card.json"])
def test_an_edited_card_with_an_updated_manifest_fails_its_signature(
    name: str, copied: Path
) -> None:
    card = json.loads((copied / name).read_text(encoding="utf-8"))
    card["created_at"] = "2001-01-01T00:00:00Z"
    (copied / name).write_text(json.dumps(card), encoding="utf-8")
    digest = hashlib.sha256((copied / name).read_bytes()).hexdigest()
    _edit_manifest(copied, lambda m: m["files"].__setitem__(name, digest))

    with pytest.raises(SignatureError):
        load_customizer(copied)


def test_another_version_is_refused(copied: Path) -> None:
    _edit_manifest(copied, lambda m: m.__setitem__("version", 2))

    with pytest.raises(UntrustedArtifactError, match="version 2") as caught:
        load_customizer(copied)

    assert type(caught.value) is UntrustedArtifactError


@pytest.mark.parametrize("name", ["models/0/card.json", "fusion.safetensors", MANIFEST_FILE])
def test_a_symbolic_link_is_refused_even_to_the_same_bytes(
    name: str, copied: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.write_bytes((copied / name).read_bytes())
    (copied / name).unlink()
    os.symlink(outside, copied / name)

    with pytest.raises(UntrustedArtifactError) as caught:
        load_customizer(copied)

    assert type(caught.value) is UntrustedArtifactError


@pytest.mark.parametrize("name", ["own/weights.onnx", "models/1/card.json", "fusion.safetensors"])
def test_a_missing_file_is_refused(name: str, copied: Path) -> None:
    (copied / name).unlink()

    with pytest.raises(UntrustedArtifactError, match="missing") as caught:
        load_customizer(copied)

    assert type(caught.value) is UntrustedArtifactError


@pytest.mark.parametrize("name", ["../outside.txt", "models/../../outside.txt", "/etc/hostname"])
def test_a_listed_path_outside_the_folder_is_refused(
    name: str, copied: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"outside")
    digest = hashlib.sha256(b"outside").hexdigest()
    _edit_manifest(copied, lambda m: m["files"].__setitem__(name, digest))

    with pytest.raises(UntrustedArtifactError, match="not a path inside the folder"):
        load_customizer(copied)


@pytest.mark.parametrize("outside", ["relative", "absolute"])
def test_a_model_folder_outside_the_stored_folder_is_refused(
    outside: str, copied: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for name in ("card.json", "weights.safetensors"):
        (elsewhere / name).write_bytes((copied / "models" / "0" / name).read_bytes())
    path = "../elsewhere" if outside == "relative" else str(elsewhere)
    _edit_manifest(copied, lambda m: m["models"][0].__setitem__("dir", path))

    with pytest.raises(UntrustedArtifactError):
        load_customizer(copied)


def test_folders_that_hold_no_stored_model_are_refused(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    other = tmp_path / "other"
    other.mkdir()
    (other / MANIFEST_FILE).write_text(json.dumps({"format": "something-else", "version": 1}))
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / MANIFEST_FILE).write_bytes(b"{not json")
    a_file = tmp_path / "file"
    a_file.write_bytes(b"")

    with pytest.raises(FileNotFoundError):
        load_customizer(tmp_path / "absent")
    with pytest.raises(FileNotFoundError):
        load_customizer(a_file)
    with pytest.raises(UntrustedArtifactError, match="missing"):
        load_customizer(empty)
    with pytest.raises(UntrustedArtifactError, match="does not hold a stored customized model"):
        load_customizer(other)
    with pytest.raises(UntrustedArtifactError, match="not valid JSON"):
        load_customizer(broken)


def test_subscribed_models_are_verified_against_the_given_keys(
    world: dict[str, Any], stored: dict[str, tuple[Customizer, Path]]
) -> None:
    folder = stored["stacked"][1]
    other = generate_signing_key().public_key()

    with pytest.raises(SignatureError, match="not among the trusted keys"):
        load_customizer(folder, trusted_keys={key_id(other): other})
    loaded = load_customizer(folder, trusted_keys=world["keys"])

    assert loaded.selected_ids_ == stored["stacked"][0].selected_ids_


def test_no_trusted_key_fails_the_subscribed_models_signatures(
    stored: dict[str, tuple[Customizer, Path]],
) -> None:
    no_keys: dict[str, Ed25519PublicKey] = {}

    with pytest.raises(SignatureError):
        load_customizer(stored["stacked"][1], trusted_keys=no_keys)
