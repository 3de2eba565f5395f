"""FlowerMLP: the run's parameters as our estimator, publishable through a Site."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from methods.flower.conftest import initial
from pubsubml.data.dataset import Dataset
from pubsubml.hub import LocalHub
from pubsubml.learners.dpsgd_base import centred
from pubsubml.methods.flower.client_app import DPClientConfig
from pubsubml.methods.flower.model import FlowerMLP, build
from pubsubml.privacy.accountants import compute_epsilon
from pubsubml.privacy.events import DPEvent
from pubsubml.privacy.ledger import PrivacyLedger
from pubsubml.sites import Site

STEP = DPEvent(mechanism="subsampled_gaussian", noise_multiplier=1.2, sample_rate=0.1, count=20)


def _model(config: DPClientConfig, events: list[DPEvent]) -> FlowerMLP:
    return build(
        schema=config.schema,
        classes=config.classes,
        layer_sizes=config.layer_sizes,
        activation=config.activation,
        params=initial(config),
        events=events,
        delta=config.delta,
        accountant="pld",
        noise="secure",
        defaulted_features=["x1"],
    )


def test_the_global_model_reads_the_plain_encoding(
    config: DPClientConfig, sites: list[Dataset]
) -> None:
    model = _model(config, [STEP])
    net = torch.nn.Sequential(
        torch.nn.Linear(config.layer_sizes[0], 8), torch.nn.Tanh(), torch.nn.Linear(8, 2)
    )
    with torch.no_grad():
        for p, v in zip(net.parameters(), initial(config), strict=True):
            p.copy_(torch.from_numpy(v))
        centred_logits = net(centred(config.schema.encode(sites[0].X)))
    expected = torch.softmax(centred_logits, dim=1).numpy()
    np.testing.assert_allclose(model.predict_proba(sites[0].X), expected, atol=1e-5)
    assert set(model.predict(sites[0].X)) <= {0, 1}


def test_privacy_attributes_come_from_the_events(config: DPClientConfig) -> None:
    model = _model(config, [STEP, STEP])
    assert model.epsilon_ == compute_epsilon([STEP, STEP], config.delta)
    assert model.delta_ == config.delta and model.noise_ == "secure"
    clear = _model(config, [])
    assert math.isinf(clear.epsilon_) and clear.delta_ == 0.0


def test_a_flower_model_is_not_fitted_directly(config: DPClientConfig) -> None:
    with pytest.raises(TypeError, match="outcome of a Flower run"):
        _model(config, [STEP]).fit(None)


def test_the_bridge_card_carries_the_events_and_trained_features(
    config: DPClientConfig,
) -> None:
    hub = LocalHub()
    site = Site("fl", config.schema, PrivacyLedger(site="fl", epsilon_budget=5.0, delta=1e-5))
    card, _ = hub.fetch(site.publish(_model(config, [STEP, STEP]), hub))
    assert list(card.privacy.events) == [STEP, STEP]
    assert card.privacy.epsilon == pytest.approx(compute_epsilon([STEP, STEP], config.delta))
    assert card.defaulted_features == ["x1"] and "x1" not in card.trained_features
