"""Contract tests of the publish path (every backend): success, idempotency, and refusals that
change nothing."""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from typing import Any

import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from pubsubml.privacy.accountants import compute_epsilon
from pubsubml.privacy.ledger import PrivacyLedger, Release

# A pickle of {"a": 1} (protocol 4), written out so the tests never import pickle.
PICKLE_BYTES = b"\x80\x04\x95\n\x00\x00\x00\x00\x00\x00\x00}\x94\x8c\x01a\x94K\x01s."


def test_publish_then_list_get_download(registry: Any, support: Any) -> None:
    sgd = support.privacy_record(events=support.SGD_EVENTS)
    art = registry.artifacts("a", seed=1, privacy=sgd)
    r = registry.publish(art, site="a")
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["model_id"] == art.card.model_id and body["created"] is True
    expected = compute_epsilon(list(support.SGD_EVENTS), art.card.privacy.delta)
    assert body["epsilon"] == pytest.approx(expected)
    assert body["features"] == ["age", "sex"] and body["publisher"] == "a"

    listed = registry.client.get("/v1/models", headers=registry.auth("b")).json()["models"]
    assert [m["model_id"] for m in listed] == [art.card.model_id]
    card = registry.client.get(f"/v1/models/{art.card.model_id}/card", headers=registry.auth("b"))
    assert card.content.decode() == art.card.to_json()
    weights = registry.client.get(
        f"/v1/models/{art.card.model_id}/weights", headers=registry.auth("b")
    )
    assert weights.content == art.weights
    assert weights.headers["x-weights-sha256"] == hashlib.sha256(art.weights).hexdigest()


def test_publish_charges_ledger_once_and_is_idempotent(registry: Any, support: Any) -> None:
    art = registry.artifacts("a", seed=2)
    first = registry.publish(art, site="a")
    again = registry.publish(art, site="a")
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["created"] is False and again.json()["model_id"] == first.json()["model_id"]
    ledger = registry.client.get("/v1/sites/a/ledger", headers=registry.auth("a")).json()
    assert [r["release_id"] for r in ledger["releases"]] == [art.card.model_id]
    reference = PrivacyLedger(site="a", epsilon_budget=50.0, delta=1e-5)
    reference.charge(Release(release_id="x", events=support.EVENTS))
    assert ledger["spent_epsilon"] == pytest.approx(reference.spent_epsilon())
    models = registry.client.get("/v1/models", headers=registry.admin).json()["models"]
    assert len(models) == 1


def test_a_replace_one_release_makes_the_site_ledger_replace_one(
    registry: Any, support: Any
) -> None:
    from pubsubml.privacy.accountants import compute_epsilon
    from pubsubml.privacy.events import DPEvent

    assert registry.publish(registry.artifacts("a", seed=3), site="a").status_code == 201
    path = "/v1/sites/a/ledger"
    assert registry.client.get(path, headers=registry.auth("a")).json()["neighbouring"] == (
        "add_remove"
    )
    laplace = (DPEvent(mechanism="laplace", noise_multiplier=4.0, neighbouring="replace_one"),)
    art = registry.artifacts("a", seed=4, privacy=support.privacy_record(events=laplace))
    r = registry.publish(art, site="a")
    assert r.status_code == 201, r.text
    ledger = registry.client.get(path, headers=registry.auth("a")).json()
    assert ledger["neighbouring"] == "replace_one"
    mixed = compute_epsilon([*support.EVENTS, *laplace], 1e-5)
    naive = compute_epsilon(
        [*support.EVENTS, laplace[0].model_copy(update={"neighbouring": "add_remove"})], 1e-5
    )
    assert ledger["spent_epsilon"] == pytest.approx(mixed) and mixed > naive


def test_filters(registry: Any) -> None:
    a1 = registry.artifacts("a", seed=3, features=("age", "wbc"))
    b1 = registry.artifacts("b", seed=4, features=("age", "sex"), classes=None)
    for art, site in ((a1, "a"), (b1, "b")):
        assert registry.publish(art, site=site).status_code == 201

    def ids(**params: Any) -> list[str]:
        r = registry.client.get("/v1/models", params=params, headers=registry.auth("c"))
        assert r.status_code == 200, r.text
        return [m["model_id"] for m in r.json()["models"]]

    assert ids(publisher="a") == [a1.card.model_id]
    assert ids(task="regression") == [b1.card.model_id]
    assert ids(features=["wbc"]) == [a1.card.model_id]
    assert ids(features=["age"]) == [a1.card.model_id, b1.card.model_id]
    assert ids(min_epsilon=0.0, max_epsilon=1e-3) == []
    assert ids(max_epsilon=1e3) == [a1.card.model_id, b1.card.model_id]
    delta = a1.card.privacy.delta
    assert ids(max_epsilon=1e3, max_delta=delta) == [a1.card.model_id, b1.card.model_id]
    assert ids(max_delta=delta / 10) == []
    bad = registry.client.get("/v1/models", params={"max_delta": 2}, headers=registry.auth("c"))
    assert bad.status_code == 422


def test_onnx_artifact_accepted(registry: Any) -> None:
    art = registry.artifacts("a", seed=5, fmt="onnx")
    assert registry.publish(art, site="a").status_code == 201


# ---- refusals: each answers 4xx with a clear message and changes nothing ------------------
def _external_data_onnx() -> bytes:
    tensor = TensorProto()
    tensor.name = "0.weight"
    tensor.data_type = TensorProto.FLOAT
    tensor.dims.extend([4, 3])
    tensor.data_location = TensorProto.EXTERNAL
    entry = tensor.external_data.add()
    entry.key, entry.value = "location", "../../etc/passwd"
    bias = numpy_helper.from_array(__import__("numpy").zeros(4, dtype="float32"), "0.bias")
    node = helper.make_node("Gemm", ["input", "0.weight", "0.bias"], ["output"], transB=1)
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 3])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", 4])],
        initializer=[tensor, bias],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    return model.SerializeToString()


def _torch_like_zip() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("archive/data.pkl", PICKLE_BYTES)
    return buf.getvalue()


def _bad_cases(artifacts: Any, support: Any) -> dict[str, tuple[dict[str, Any], int, str, str]]:
    """name → (publish kwargs, status, error code, message fragment)."""
    good = artifacts("a", seed=10)
    other = artifacts("b", seed=11)
    onnx_good = artifacts("a", seed=12, fmt="onnx")
    unsigned = good.card.replace(signature=None)
    tampered = json.loads(good.card.to_json())
    tampered["privacy"]["epsilon"] = tampered["privacy"]["epsilon"] * 2
    neg_eps = json.loads(good.card.to_json())
    neg_eps["privacy"]["epsilon"] = -1.0
    big_delta = json.loads(good.card.to_json())
    big_delta["privacy"]["delta"] = 1.5
    zero_delta = artifacts.resign(
        good.card, good.weights, "a", privacy=support.privacy_record(delta=0.0, accountant="pure")
    )
    loose_delta = artifacts.resign(
        good.card, good.weights, "a", privacy=support.privacy_record(delta=1e-3)
    )
    understated = artifacts.resign(
        good.card, good.weights, "a", privacy=support.privacy_record(epsilon=0.01)
    )
    pickled = artifacts.resign(good.card, PICKLE_BYTES, "a")
    zipped = artifacts.resign(good.card, _torch_like_zip(), "a")
    external = artifacts.resign(
        onnx_good.card,
        _external_data_onnx(),
        "a",
        input_schema=artifacts("a", seed=12, fmt="onnx", features=("age", "sex")).card.input_schema,
    )
    unknown_feature = artifacts("a", seed=13, features=("age", "bmi"))
    over_budget = artifacts("a", seed=14)
    return {
        "malformed card JSON": (
            {"card": b"{not json", "weights": good.weights},
            422,
            "validation_error",
            "malformed model card",
        ),
        "card missing fields": (
            {"card": b'{"model_id": "x"}', "weights": good.weights},
            422,
            "validation_error",
            "malformed model card",
        ),
        "digest mismatch": (
            {"card": good.card.to_json().encode(), "weights": good.weights + b"\x00"},
            422,
            "digest_mismatch",
            "SHA-256",
        ),
        "missing signature": (
            {"card": unsigned.to_json().encode(), "weights": good.weights},
            422,
            "invalid_signature",
            "not signed",
        ),
        "altered after signing": (
            {"card": json.dumps(tampered).encode(), "weights": good.weights},
            422,
            "invalid_signature",
            "does not match",
        ),
        "signed by another key": (
            {
                "card": artifacts.resign(good.card, good.weights, "b").card.to_json().encode(),
                "weights": good.weights,
            },
            422,
            "invalid_signature",
            "registered key",
        ),
        "pickle payload": (
            {"card": pickled.card.to_json().encode(), "weights": pickled.weights},
            422,
            "untrusted_artifact",
            "pickle",
        ),
        "python-object zip payload": (
            {"card": zipped.card.to_json().encode(), "weights": zipped.weights},
            422,
            "untrusted_artifact",
            "zip",
        ),
        "onnx external data": (
            {"card": external.card.to_json().encode(), "weights": external.weights},
            422,
            "untrusted_artifact",
            "external",
        ),
        "unknown features": (
            {"card": unknown_feature.card.to_json().encode(), "weights": unknown_feature.weights},
            422,
            "schema_mismatch",
            "bmi",
        ),
        "epsilon <= 0": (
            {"card": json.dumps(neg_eps).encode(), "weights": good.weights},
            422,
            "validation_error",
            "epsilon",
        ),
        "delta >= 1": (
            {"card": json.dumps(big_delta).encode(), "weights": good.weights},
            422,
            "validation_error",
            "delta",
        ),
        "delta = 0 with gaussian events": (
            {"card": zero_delta.card.to_json().encode(), "weights": zero_delta.weights},
            422,
            "invalid_privacy",
            "δ = 0",
        ),
        "delta above the site's": (
            {"card": loose_delta.card.to_json().encode(), "weights": loose_delta.weights},
            422,
            "invalid_privacy",
            "exceeds the publisher's δ",
        ),
        "understated epsilon": (
            {"card": understated.card.to_json().encode(), "weights": understated.weights},
            422,
            "invalid_privacy",
            "claims ε",
        ),
        "over budget": (
            {"card": over_budget.card.to_json().encode(), "weights": over_budget.weights},
            409,
            "budget_exceeded",
            "budget",
        ),
        "publishing as another site": (
            {"card": other.card.to_json().encode(), "weights": other.weights},
            403,
            "forbidden",
            "may not publish as 'b'",
        ),
        "unknown visible_to site": (
            {
                "card": good.card.to_json().encode(),
                "weights": good.weights,
                "visible_to": ["nobody"],
            },
            422,
            "validation_error",
            "unknown sites",
        ),
        "path-like visible_to": (
            {
                "card": good.card.to_json().encode(),
                "weights": good.weights,
                "visible_to": ["../../etc"],
            },
            422,
            "validation_error",
            "invalid site name",
        ),
    }


CASES = [
    "malformed card JSON",
    "card missing fields",
    "digest mismatch",
    "missing signature",
    "altered after signing",
    "signed by another key",
    "pickle payload",
    "python-object zip payload",
    "onnx external data",
    "unknown features",
    "epsilon <= 0",
    "delta >= 1",
    "delta = 0 with gaussian events",
    "delta above the site's",
    "understated epsilon",
    "over budget",
    "publishing as another site",
    "unknown visible_to site",
    "path-like visible_to",
]


def test_bad_publications_change_nothing(
    registry_factory: Any, artifacts: Any, support: Any
) -> None:
    reg = registry_factory()
    reg.add_features(["age", "sex", "wbc"])
    reg.add_site("a", epsilon=0.5)
    reg.add_site("b")
    cases = _bad_cases(artifacts, support)
    assert sorted(cases) == sorted(CASES)
    before = reg.snapshot()
    for name in CASES:
        kwargs, status, code, fragment = cases[name]
        r = reg.publish(site="a", **kwargs)
        assert r.status_code == status, (name, r.text)
        body = r.json()
        assert body["error"] == code, (name, body)
        assert fragment in body["detail"], (name, body["detail"])
        assert reg.snapshot() == before, name


def test_subscriber_only_site_cannot_publish(registry: Any) -> None:
    registry.add_site("reader", roles="subscriber")
    art = registry.artifacts("reader", seed=20)
    before = registry.snapshot()
    r = registry.publish(art, site="reader")
    assert r.status_code == 403 and r.json()["error"] == "forbidden"
    assert registry.snapshot() == before


def test_same_weights_by_another_site_conflict(registry: Any, artifacts: Any) -> None:
    art = artifacts("a", seed=21)
    assert registry.publish(art, site="a").status_code == 201
    copy = artifacts.resign(art.card, art.weights, "b", publisher="b")
    before = registry.snapshot()
    r = registry.publish(copy, site="b")
    assert r.status_code == 409 and "already published" in r.json()["detail"]
    assert registry.snapshot() == before


def test_not_multipart_or_missing_parts(registry: Any) -> None:
    r = registry.client.post(
        "/v1/models",
        content=b"{}",
        headers={**registry.auth("a"), "Content-Type": "application/json"},
    )
    assert r.status_code == 422 and "multipart" in r.json()["detail"]
    r = registry.client.post(
        "/v1/models",
        files=[("card", (None, b"{}", "application/json"))],
        headers=registry.auth("a"),
    )
    assert r.status_code == 422 and "weights" in r.json()["detail"]
    r = registry.client.post(
        "/v1/models",
        files=[("card", (None, b"{}", "application/json")), ("extra", (None, b"1", "text/plain"))],
        headers=registry.auth("a"),
    )
    assert r.status_code == 422 and "unexpected form part" in r.json()["detail"]


def test_onnx_external_data_fixture_is_well_formed() -> None:
    model = onnx.load_from_string(_external_data_onnx())
    assert model.graph.initializer[0].data_location == TensorProto.EXTERNAL
