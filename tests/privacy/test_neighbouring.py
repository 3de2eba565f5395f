"""Neighbouring relations: recorded in every DP event, and never mixed without conversion."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from pubsubml.errors import InvalidPrivacyParameterError
from pubsubml.privacy.accountants import compute_epsilon, neighbouring_of, release_epsilon
from pubsubml.privacy.events import DPEvent
from pubsubml.privacy.ledger import PrivacyLedger, Release
from pubsubml.privacy.mechanisms import laplace_mechanism

DELTA = 1e-5
SGD = DPEvent(mechanism="subsampled_gaussian", noise_multiplier=1.1, sample_rate=0.01, count=500)


def _gauss(sigma: float, relation: str = "add_remove") -> DPEvent:
    return DPEvent(mechanism="gaussian", noise_multiplier=sigma, neighbouring=relation)


def test_add_remove_events_serialize_as_before_and_replace_one_round_trips() -> None:
    assert "neighbouring" not in json.loads(SGD.model_dump_json())  # signed cards still verify
    event = DPEvent(mechanism="approx_dp", epsilon=0.5, delta=0.0, neighbouring="replace_one")
    data = json.loads(event.model_dump_json())
    assert data["neighbouring"] == "replace_one"
    assert DPEvent.model_validate(data) == event


@pytest.mark.parametrize(
    "bad",
    [
        {"mechanism": "subsampled_gaussian", "noise_multiplier": 1.0, "sample_rate": 0.1},
        {"mechanism": "gaussian", "noise_multiplier": 1.0, "neighbouring": "swap_two"},
    ],
)
def test_relations_without_an_accountant_are_refused(bad: dict[str, object]) -> None:
    bad = {"neighbouring": "replace_one", **bad}
    with pytest.raises(InvalidPrivacyParameterError):
        DPEvent(**bad)  # type: ignore[arg-type]


def test_one_relation_composes_as_before() -> None:
    add, rep = [_gauss(4.0), _gauss(6.0)], [_gauss(4.0, "replace_one"), _gauss(6.0, "replace_one")]
    assert compute_epsilon(rep, DELTA) == compute_epsilon(add, DELTA)
    assert neighbouring_of(add) == "add_remove" and neighbouring_of(rep) == "replace_one"


def test_a_mixed_gaussian_pair_halves_the_add_remove_noise() -> None:
    mixed = compute_epsilon([_gauss(4.0), _gauss(6.0, "replace_one")], DELTA)
    converted = compute_epsilon([_gauss(2.0, "replace_one"), _gauss(6.0, "replace_one")], DELTA)
    assert mixed == converted
    assert mixed > compute_epsilon([_gauss(4.0), _gauss(6.0)], DELTA)  # never the naive value


@pytest.mark.parametrize("backend", ["pld", "rdp"])
def test_dp_sgd_with_a_replace_one_release_is_converted_by_group_privacy(backend: str) -> None:
    nb = DPEvent(mechanism="approx_dp", epsilon=0.3, delta=0.0, neighbouring="replace_one")
    naive = compute_epsilon([SGD, nb.model_copy(update={"neighbouring": "add_remove"})], DELTA)
    mixed = compute_epsilon([SGD, nb], DELTA, backend=backend)  # type: ignore[arg-type]
    sgd_alone = compute_epsilon([SGD], DELTA, backend=backend)  # type: ignore[arg-type]
    assert math.isfinite(mixed) and mixed > naive
    # Replace-one ε of the DP-SGD part is at least its add/remove ε, doubled at a smaller δ.
    assert mixed >= 2 * sgd_alone + 0.3 - 1e-9
    assert neighbouring_of([SGD, nb]) == "replace_one"


def test_pure_composition_doubles_the_add_remove_part_when_mixed() -> None:
    add = DPEvent(mechanism="laplace", noise_multiplier=2.0)  # ε = 0.5
    rep = DPEvent(mechanism="approx_dp", epsilon=0.25, delta=0.0, neighbouring="replace_one")
    assert release_epsilon([add, add], 0.0, "pure") == pytest.approx(1.0)
    assert release_epsilon([add, rep], 0.0, "pure") == pytest.approx(2 * 0.5 + 0.25)


def test_a_ledger_says_which_relation_its_epsilon_holds_for() -> None:
    ledger = PrivacyLedger(site="h", epsilon_budget=10.0, delta=DELTA)
    ledger.charge(Release(release_id="sgd", events=(SGD,)))
    before = ledger.spent_epsilon()
    assert ledger.neighbouring() == "add_remove"
    _, answer = laplace_mechanism(
        1.0, sensitivity=0.1, epsilon=0.2, rng=np.random.default_rng(0), neighbouring="replace_one"
    )
    assert answer.neighbouring == "replace_one"
    ledger.charge(Release(release_id="answer", events=(answer,)))
    assert ledger.neighbouring() == "replace_one"
    assert ledger.spent_epsilon() > 2 * before  # the DP-SGD part counts twice, and more
