"""Tests of pubsubml.methods.pubsub.subscription: the subscriber's inputs to CUSTOMIZE, prepared
one way for ``Site.pull`` users and for ``pubsubml customize`` (whose agreement with the library on
the same inbox is tested in ``tests/cli/test_customize.py``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LogisticRegression, Ridge

from pubsubml.artifacts import PublishedModel, export_model, generate_signing_key, key_id
from pubsubml.artifacts.signing import public_key_to_base64
from pubsubml.errors import SignatureError
from pubsubml.learners import LocalModel
from pubsubml.methods.pubsub.subscription import (
    SubscriptionError,
    check_trusted,
    prepare_subscription,
    read_trusted_keys,
)
from pubsubml.schema import FeatureSchema

SCHEMA = FeatureSchema.numeric(["a", "b", "c"])
KEY = generate_signing_key()
KEYS = {key_id(KEY.public_key()): KEY.public_key()}


def _rows(n: int = 80, seed: int = 0) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(rng.random((n, 3)), columns=SCHEMA.names)
    return X, (X["a"] + X["b"] > 1).to_numpy().astype(int)


def _received(
    columns: list[str], *, schema: FeatureSchema = SCHEMA, regression: bool = False
) -> PublishedModel:
    X, y = _rows()
    if regression:
        local = LocalModel(estimator=Ridge(), schema=schema.subset(columns))
        local.fit(X[columns], y.astype(float))
    else:
        local = LocalModel(
            estimator=LogisticRegression(), schema=schema.subset(columns), classes=[0, 1, 2]
        )
        local.fit(X[columns], y)
    artifact = export_model(local, publisher="p", signing_key=KEY)
    return PublishedModel.load(artifact.card, artifact.weights, KEYS)


def test_models_of_the_task_are_ordered_by_id_and_the_schema_is_the_cards_union() -> None:
    received = [_received(["a", "b"]), _received(["c"]), _received(["b"], regression=True)]
    X, y = _rows(seed=1)
    sub = prepare_subscription(received[::-1], X[["a", "c"]], y, trusted_keys=KEYS)
    assert [m.model_id for m in sub.models] == sorted(m.model_id for m in received[:2])
    assert sub.skipped == [received[2]]
    assert set(sub.schema.names) == {"a", "b", "c"}
    assert sub.classes == [0, 1, 2]  # the data's labels and the cards' declared ones
    assert sub.target.tolist() == y.tolist()
    customizer = sub.customizer(own_model="logistic", cv=3, random_state=0)
    assert customizer.models == sub.models and customizer.classes == [0, 1, 2]
    assert customizer.fit(X[["a", "c"]], sub.target).selected_ids_[0] == "own"


def test_given_schema_and_classes_are_used_as_they_are() -> None:
    X, y = _rows()
    sub = prepare_subscription(
        [_received(["a"])], X, y, trusted_keys=KEYS, schema=SCHEMA, classes=[1, 0]
    )
    assert sub.schema is SCHEMA and sub.classes == [1, 0]
    reg = prepare_subscription([], X, y, trusted_keys=KEYS, task="regression", schema=SCHEMA)
    assert reg.classes is None and reg.target.dtype == np.float64


def test_bad_inputs_are_subscription_errors_with_the_library_remedy() -> None:
    X, y = _rows()
    with pytest.raises(SubscriptionError, match="no trusted keys: trust") as caught:
        prepare_subscription([_received(["a"])], X, y, trusted_keys={})
    assert caught.value.kind == "no_trusted_keys" and caught.value.problem == "no trusted keys"
    other = FeatureSchema.numeric(["a", "b", "c"], upper=2.0)
    with pytest.raises(SubscriptionError, match="define feature 'a' differently") as caught:
        prepare_subscription(
            [_received(["a"]), _received(["a"], schema=other)], X, y, trusted_keys=KEYS
        )
    assert str(caught.value).endswith("pass the consortium's schema (schema=)")
    with pytest.raises(SubscriptionError, match=r"columns \['b', 'c'\] in the received") as caught:
        prepare_subscription([_received(["a"])], X, y, trusted_keys=KEYS)
    assert caught.value.kind == "undefined_columns"
    with pytest.raises(SubscriptionError, match="mixed types") as caught:
        prepare_subscription([], X, np.array([1, "x"] * 40, dtype=object), trusted_keys=KEYS,
                             schema=SCHEMA)  # fmt: skip
    assert caught.value.kind == "mixed_labels"
    with pytest.raises(ValueError, match="task must be"):
        prepare_subscription([], X, y, trusted_keys=KEYS, task="clustering")


def test_a_model_signed_by_an_untrusted_key_is_refused_as_site_pull_refuses_it() -> None:
    X, y = _rows()
    stranger = generate_signing_key().public_key()
    with pytest.raises(SignatureError, match="not among the trusted keys"):
        prepare_subscription(
            [_received(["a"])], X, y, trusted_keys={key_id(stranger): stranger}, schema=SCHEMA
        )


def test_trusted_keys_are_read_from_pub_files_and_json_maps(tmp_path: Path) -> None:
    other = generate_signing_key().public_key()
    (tmp_path / "p.pub").write_text(public_key_to_base64(KEY.public_key()))
    (tmp_path / "keys.json").write_text(f'{{"x": "{public_key_to_base64(other)}"}}')
    keys = read_trusted_keys([tmp_path / "p.pub", tmp_path / "keys.json"])
    assert set(keys) == {key_id(KEY.public_key()), key_id(other)}
    (tmp_path / "bad.pub").write_text("not a key")
    with pytest.raises(SubscriptionError, match="holds no public key") as caught:
        read_trusted_keys([tmp_path / "bad.pub"])
    assert caught.value.kind == "unreadable_key"
    check_trusted(keys)
    with pytest.raises(SubscriptionError):
        check_trusted({})
