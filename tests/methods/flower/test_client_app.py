"""The DP ClientApp: ε composed over rounds, the budget, column subsets, bad configs."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pandas as pd
import pytest
from flwr.app import RecordDict

from methods.flower.conftest import context, initial, message, train_message
from pubsubml.data.dataset import Dataset
from pubsubml.errors import DataValidationError, InvalidPrivacyParameterError
from pubsubml.hub import LocalHub
from pubsubml.methods.flower.client_app import ClientConfigError, DPClientConfig, dp_client_app
from pubsubml.methods.flower.records import (
    PRIVACY_QUERY,
    STATE_KEY,
    events_from_json,
    params_from_record,
)
from pubsubml.privacy.accountants import compute_epsilon
from pubsubml.privacy.ledger import PrivacyLedger
from pubsubml.sites import Site


def _app(config: DPClientConfig, data: Dataset, **kwargs: Any) -> Any:
    return dp_client_app(config, lambda ctx: (data.X, data.y), **kwargs)


@pytest.mark.parametrize(
    ("change", "error", "match"),
    [
        ({"schema": None}, ClientConfigError, "public FeatureSchema"),
        ({"classes": None}, ClientConfigError, "public label set"),
        ({"classes": [1]}, ClientConfigError, "at least two"),
        ({"planned_rounds": None}, ClientConfigError, "planned_rounds"),
        ({"epsilon_budget": 0.0}, InvalidPrivacyParameterError, "epsilon"),
        ({"noise_multiplier": -1.0}, InvalidPrivacyParameterError, "noise_multiplier"),
        ({"noise_seed": -3}, InvalidPrivacyParameterError, "noise_seed"),
    ],
)
def test_a_config_without_public_schema_or_classes_is_refused_before_training(
    config: DPClientConfig, change: dict[str, Any], error: type[Exception], match: str
) -> None:
    values = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}
    with pytest.raises(error, match=match):
        DPClientConfig(**{**values, **change})


def test_the_app_factory_refuses_anything_but_a_client_config(sites: list[Dataset]) -> None:
    with pytest.raises(ClientConfigError, match="DPClientConfig"):
        dp_client_app({"schema": sites[0].schema}, lambda ctx: (sites[0].X, sites[0].y))  # type: ignore[arg-type]


def test_epsilon_after_k_rounds_is_the_accountant_over_k_rounds(
    config: DPClientConfig, sites: list[Dataset]
) -> None:
    app, ctx, params = _app(config, sites[0]), context(), initial(config)
    reported = []
    for round_ in (1, 2, 3):
        reply = app(train_message(params, round_), ctx)
        assert not reply.has_error()
        params = params_from_record(reply.content["arrays"])
        reported.append(reply.content["metrics"]["epsilon"])
        assert reply.content["metrics"]["num-examples"] == 300
        assert reply.content["metrics"]["rounds"] == round_
    events = events_from_json(str(ctx.state[STATE_KEY]["events"]))
    assert len(events) == 3 and sum(e.count for e in events) == 3 * 6  # round(300 / 50) per round
    assert reported[-1] == pytest.approx(compute_epsilon(events, config.delta), rel=1e-12)
    one_round = compute_epsilon(events[:1], config.delta)
    assert reported[0] == pytest.approx(one_round, rel=1e-12)
    assert reported[0] < reported[1] < reported[2] <= config.epsilon_budget


def test_a_site_over_budget_drops_out_and_stays_within_budget(
    config: DPClientConfig, sites: list[Dataset]
) -> None:
    tight = dataclasses.replace(config, planned_rounds=2)
    app, ctx, params = _app(tight, sites[0]), context(), initial(tight)
    assert not app(train_message(params, 1), ctx).has_error()
    assert not app(train_message(params, 2), ctx).has_error()
    before = str(ctx.state[STATE_KEY]["events"])
    for round_ in (3, 4):
        reply = app(train_message(params, round_), ctx)
        assert reply.has_error() and "over budget" in reply.error.reason
    assert str(ctx.state[STATE_KEY]["events"]) == before  # a refused round records nothing
    assert compute_epsilon(events_from_json(before), tight.delta) <= tight.epsilon_budget


def test_sites_with_different_column_subsets_train_on_the_public_defaults(
    config: DPClientConfig, sites: list[Dataset]
) -> None:
    lacks = ["x0", "x3"]
    data = sites[1]
    partial = Dataset(data.X.drop(columns=lacks), data.y, data.schema, data.task, data.classes)
    app, ctx = _app(config, partial), context()
    reply = app(train_message(initial(config), 1), ctx)
    assert not reply.has_error()
    answer = app(message(PRIVACY_QUERY, RecordDict()), ctx).content["privacy"]
    assert list(answer["defaulted"]) == lacks and answer["rounds"] == 1


def test_the_noise_is_secure_unless_seeded(config: DPClientConfig, sites: list[Dataset]) -> None:
    def weights(cfg: DPClientConfig) -> np.ndarray:
        reply = _app(cfg, sites[0])(train_message(initial(cfg), 1), context())
        return params_from_record(reply.content["arrays"])[0]

    assert not np.array_equal(weights(config), weights(config))
    seeded = dataclasses.replace(config, noise_seed=3)
    assert np.array_equal(weights(seeded), weights(seeded))


@pytest.mark.parametrize(
    ("rows", "match"),
    [
        ((np.zeros((3, 10)), np.zeros(3)), "DataFrame"),
        ((pd.DataFrame({"x0": [0.5]}), ["cat"]), "not among the declared classes"),
        ((pd.DataFrame({"x0": [float("nan")]}), [0]), "NaN"),
    ],
)
def test_bad_rows_are_refused_before_any_training(
    config: DPClientConfig, rows: tuple[Any, Any], match: str
) -> None:
    """Flower turns the exception into the site's error reply (the site sits the round out)."""
    ctx = context()
    with pytest.raises(DataValidationError, match=match):
        dp_client_app(config, lambda c: rows)(train_message(initial(config), 1), ctx)
    assert STATE_KEY not in ctx.state


def test_a_site_publishes_its_last_model_with_every_rounds_events(
    config: DPClientConfig, sites: list[Dataset]
) -> None:
    hub = LocalHub()
    site = Site("h1", config.schema, PrivacyLedger(site="h1", epsilon_budget=1.0, delta=1e-5))
    app = _app(config, sites[0], publish=lambda ctx, model: site.publish(model, hub))
    ctx, params = context(), initial(config)
    for round_ in (1, 2):
        params = params_from_record(app(train_message(params, round_), ctx).content["arrays"])
    answer = app(message(PRIVACY_QUERY, RecordDict()), ctx).content["privacy"]
    card, _ = hub.fetch(str(answer["published"]))
    events = events_from_json(str(answer["events"]))
    assert list(card.privacy.events) == events and len(events) == 2
    assert card.privacy.epsilon == pytest.approx(compute_epsilon(events, config.delta))
    assert card.privacy.noise == "secure"
    assert site.ledger.spent_epsilon() == pytest.approx(card.privacy.epsilon)
