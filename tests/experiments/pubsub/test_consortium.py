"""Sites, scenarios and method settings: the paper's defaults and names that resolve (pubsub-ml.txt §7)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from pubsubml.experiments.pubsub.consortium import (
    APPROXIMATE_DP,
    FL_METHODS,
    LEARNERS,
    METHODS,
    NONPRIVATE_LEARNERS,
    NONPRIVATE_PARAMS,
    OWN_MODELS,
    MethodConfig,
    Scenario,
    SimSite,
)
from pubsubml.learners.catalog import get_learner_spec
from pubsubml.schema import FeatureSchema


def test_method_names_cover_the_papers_comparison() -> None:
    # §7.3: PubSub-ML, PubSub-ML*, Own, three FL methods vanilla and fine-tuned, Joint
    assert len(METHODS) == len(set(METHODS)) == 10
    fl = [m for m in METHODS if m.startswith("Fed")]
    assert sorted(fl) == sorted(f"{name}({v})" for name in FL_METHODS for v in "VF")
    # evaluate_fold reads "FedAvg(V)" as base "FedAvg", variant "V"
    assert {m[:-3] for m in fl} == set(FL_METHODS) and {m[-2] for m in fl} == {"V", "F"}


def test_publisher_learners_are_registered_dp_learners_of_their_task() -> None:
    for kind, by_task in LEARNERS.items():
        for task, name in by_task.items():
            spec = get_learner_spec(name)
            assert spec.private, f"{kind}/{task}: {name} is not a DP learner"
            assert spec.task == task, f"{kind}/{task}: {name} is a {spec.task} learner"
    assert APPROXIMATE_DP <= {name for by_task in LEARNERS.values() for name in by_task.values()}


def test_non_private_twins_are_registered_learners_of_their_task() -> None:
    for kind, by_task in NONPRIVATE_LEARNERS.items():
        assert kind in LEARNERS
        for task, name in by_task.items():
            spec = get_learner_spec(name)
            assert not spec.private and spec.task == task
    twins = {name for by_task in NONPRIVATE_LEARNERS.values() for name in by_task.values()}
    assert set(NONPRIVATE_PARAMS) <= twins


def test_defaults_are_the_papers_settings() -> None:
    config = MethodConfig()
    # Table 4 and §7.4: (100, 50) network, 30 epochs, minibatch 100, Adam 1e-3, 30 FL rounds
    assert config.hidden_layer_sizes == (100, 50) and config.epochs == 30
    assert config.batch_size == 100 and config.lr == 1e-3
    assert config.fl_rounds == 30 and config.fl_local_epochs == 1
    assert config.fl_client_fraction == 1.0 and config.fine_tune_epochs == 30
    assert config.dp and config.fl_dp == "local" and config.top_m is None
    assert config.own_model in OWN_MODELS and "paper" in OWN_MODELS
    site = SimSite(pd.DataFrame({"a": [0.0]}), np.array([0]))
    assert site.epsilon == 1.0 and site.learner == "mlp" and site.ids is None
    scenario = Scenario(
        [], site, FeatureSchema.numeric(["a"]), "classification", (0, 1), "accuracy"
    )
    assert scenario.delta == 1e-4 and scenario.test is None and scenario.minority is None


def test_settings_are_frozen_and_fl_options_are_not_shared() -> None:
    config = MethodConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.epochs = 1  # type: ignore[misc]
    site = SimSite(pd.DataFrame({"a": [0.0]}), np.array([0]))
    with pytest.raises(dataclasses.FrozenInstanceError):
        site.epsilon = 2.0  # type: ignore[misc]
    other = MethodConfig()
    other.fl_options["DPFedProx"] = {"mu": 0.1}
    assert config.fl_options == {}
