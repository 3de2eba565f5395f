"""Tests of pubsubml.artifacts.validation: ε recomputed for the registry, and untrusted weights."""

from __future__ import annotations

import itertools
import math
import pickle

import numpy as np
import pytest

from pubsubml.artifacts import Artifact, PrivacyRecord, make_artifact
from pubsubml.artifacts.card import MLPArchitecture, ModelCard
from pubsubml.artifacts.safetensors_codec import mlp_to_safetensors
from pubsubml.artifacts.signing import generate_signing_key
from pubsubml.artifacts.validation import (
    MAX_CARD_EPSILON,
    MAX_DISTINCT_EVENTS,
    recompute_epsilon,
    validate_untrusted,
)
from pubsubml.errors import InvalidPrivacyParameterError, UntrustedArtifactError
from pubsubml.privacy.accountants import release_epsilon
from pubsubml.privacy.events import DPEvent
from pubsubml.schema import FeatureSchema

DELTA = 1e-5
GAUSSIAN = DPEvent(mechanism="gaussian", noise_multiplier=4.0)
KEY = generate_signing_key()
SIZES = [2, 3, 2]


def _weights() -> bytes:
    rng = np.random.default_rng(0)
    return mlp_to_safetensors(
        [
            (rng.normal(size=(n_out, n_in)).astype(np.float32), np.zeros(n_out, np.float32))
            for n_in, n_out in itertools.pairwise(SIZES)
        ]
    )


def _artifact(privacy: PrivacyRecord, weights: bytes | None = None) -> Artifact:
    return make_artifact(
        _weights() if weights is None else weights,
        format="safetensors",
        publisher="site-a",
        schema=FeatureSchema.numeric(["a", "b"]),
        classes=[0, 1],
        privacy=privacy,
        signing_key=KEY,
        architecture=MLPArchitecture(
            layer_sizes=SIZES, activation="relu", output_activation="softmax"
        ),
    )


def _card(events: list[DPEvent], epsilon: float, delta: float = DELTA) -> ModelCard:
    accountant = "pure" if delta == 0.0 else "pld"
    record = PrivacyRecord.from_events(events, epsilon=epsilon, delta=delta, accountant=accountant)
    return _artifact(record).card


@pytest.fixture(scope="module")
def gaussian_epsilon() -> float:
    return release_epsilon([GAUSSIAN], DELTA, "pld")


# ---- recompute_epsilon ----------------------------------------------------------------------
def test_an_honest_card_gets_its_epsilon(gaussian_epsilon: float) -> None:
    card = _card([GAUSSIAN], gaussian_epsilon)

    assert recompute_epsilon(card, site_delta=DELTA) == pytest.approx(gaussian_epsilon)


def test_an_overstated_epsilon_is_accepted_and_the_recomputed_one_returned(
    gaussian_epsilon: float,
) -> None:
    card = _card([GAUSSIAN], 3 * gaussian_epsilon)

    assert recompute_epsilon(card, site_delta=DELTA) == pytest.approx(gaussian_epsilon)


def test_an_understated_epsilon_is_refused(gaussian_epsilon: float) -> None:
    card = _card([GAUSSIAN], 0.9 * gaussian_epsilon)

    with pytest.raises(InvalidPrivacyParameterError, match="may not claim less"):
        recompute_epsilon(card, site_delta=DELTA)


def test_non_private_cards_are_refused() -> None:
    card = _artifact(PrivacyRecord.from_events([], epsilon=math.inf, delta=0.0)).card

    with pytest.raises(InvalidPrivacyParameterError, match="differentially private models only"):
        recompute_epsilon(card, site_delta=DELTA)


def test_a_card_delta_above_the_site_delta_is_refused(gaussian_epsilon: float) -> None:
    card = _card([GAUSSIAN], gaussian_epsilon)

    with pytest.raises(InvalidPrivacyParameterError, match="exceeds the publisher's δ = 1e-06"):
        recompute_epsilon(card, site_delta=1e-6)
    assert recompute_epsilon(card, site_delta=1e-3) == pytest.approx(gaussian_epsilon)


def test_pure_events_at_delta_zero_compose_basically() -> None:
    events = [DPEvent(mechanism="approx_dp", epsilon=0.3, delta=0.0, count=5)]

    assert recompute_epsilon(_card(events, 1.5, delta=0.0), site_delta=0.0) == pytest.approx(1.5)


def test_gaussian_events_at_delta_zero_cannot_be_accounted() -> None:
    card = _card([GAUSSIAN], 1.0, delta=0.0)

    with pytest.raises(InvalidPrivacyParameterError, match="cannot be accounted at δ = 0"):
        recompute_epsilon(card, site_delta=DELTA)


def test_too_many_distinct_events_are_refused_but_repeats_are_grouped() -> None:
    distinct = [
        DPEvent(mechanism="approx_dp", epsilon=0.01 * (i + 1), delta=0.0)
        for i in range(MAX_DISTINCT_EVENTS + 1)
    ]
    repeated = [DPEvent(mechanism="approx_dp", epsilon=0.01, delta=0.0)] * 100
    total = sum(e.epsilon or 0.0 for e in distinct)

    with pytest.raises(
        InvalidPrivacyParameterError, match=f"composes at most {MAX_DISTINCT_EVENTS}"
    ):
        recompute_epsilon(_card(distinct, total, delta=0.0), site_delta=0.0)
    assert recompute_epsilon(_card(repeated, 1.0, delta=0.0), site_delta=0.0) == pytest.approx(1.0)


def test_an_epsilon_beyond_the_cap_is_refused_cheaply() -> None:
    weak = [DPEvent(mechanism="gaussian", noise_multiplier=0.05)]

    with pytest.raises(InvalidPrivacyParameterError, match=f"above the {MAX_CARD_EPSILON:g}"):
        recompute_epsilon(_card(weak, 1e6), site_delta=DELTA)


# ---- validate_untrusted ---------------------------------------------------------------------
def test_honest_weights_and_card_give_the_epsilon(gaussian_epsilon: float) -> None:
    artifact = _artifact(
        PrivacyRecord.from_events(
            [GAUSSIAN], epsilon=gaussian_epsilon, delta=DELTA, accountant="pld"
        )
    )

    epsilon = validate_untrusted(
        artifact.card, artifact.weights, site_delta=DELTA, max_weights_bytes=1 << 20
    )

    assert epsilon == pytest.approx(gaussian_epsilon)


def test_weights_are_checked_before_the_privacy_record(gaussian_epsilon: float) -> None:
    understated = PrivacyRecord.from_events(
        [GAUSSIAN], epsilon=gaussian_epsilon / 2, delta=DELTA, accountant="pld"
    )
    payload = pickle.dumps({"0.weight": [[1.0]]}, protocol=4)
    bad_weights, bad_privacy = _artifact(understated, payload), _artifact(understated)

    with pytest.raises(UntrustedArtifactError, match="pickle"):
        validate_untrusted(
            bad_weights.card, bad_weights.weights, site_delta=DELTA, max_weights_bytes=1 << 20
        )
    with pytest.raises(InvalidPrivacyParameterError, match="may not claim less"):
        validate_untrusted(
            bad_privacy.card, bad_privacy.weights, site_delta=DELTA, max_weights_bytes=1 << 20
        )


def test_the_weights_size_limit_applies(gaussian_epsilon: float) -> None:
    artifact = _artifact(
        PrivacyRecord.from_events(
            [GAUSSIAN], epsilon=gaussian_epsilon, delta=DELTA, accountant="pld"
        )
    )
    size = len(artifact.weights)

    with pytest.raises(UntrustedArtifactError, match=f"the limit is {size - 1}"):
        validate_untrusted(
            artifact.card, artifact.weights, site_delta=DELTA, max_weights_bytes=size - 1
        )
