"""Settings and reductions shared by the ProxyFL benchmarks."""

from __future__ import annotations

import pandas as pd
import pytest

from pubsubml.experiments.base import RunOptions
from pubsubml.experiments.proxyfl.setups import (
    add_model_labels,
    client_spread,
    command_line,
    final_rounds,
    setup_for,
    setups,
    spread_description,
)


def test_full_runs_use_the_section_4_1_settings_and_50_rounds() -> None:
    mnist1d, digits = setups(smoke=False)
    assert (mnist1d.dataset, mnist1d.rounds, mnist1d.config.batch_size) == ("mnist1d", 50, 250)
    assert (digits.dataset, digits.config.batch_size) == ("digits", 30)  # q = 30/120 = 0.25
    assert mnist1d.config.noise_multiplier == 1.0 and mnist1d.config.delta == 1e-5


def test_setup_for_refuses_a_data_set_that_is_not_run() -> None:
    assert setup_for("digits", smoke=True).rounds == 2
    with pytest.raises(ValueError, match="mnist1d"):
        setup_for("mnist1d", smoke=True)


def test_labels_split_private_and_proxy_models_only_for_mutual_learning() -> None:
    rows = pd.DataFrame(
        {"method": ["ProxyFL", "FML", "FedAvg"], "model": ["private", "proxy", "proxy"]}
    )
    assert add_model_labels(rows)["label"].tolist() == ["ProxyFL-private", "FML-proxy", "FedAvg"]


def test_final_rounds_keeps_each_groups_last_round() -> None:
    rows = pd.DataFrame({"method": ["a", "a", "b", "b"], "round": [1, 2, 1, 3]})
    assert final_rounds(rows, ["method"])["round"].tolist() == [2, 3]


def test_one_seed_spread_is_the_std_over_clients() -> None:
    rows = pd.DataFrame({"m": ["a"] * 3 + ["b"], "seed": 0, "acc": [0.2, 0.4, 0.6, 0.5]})
    out = client_spread(rows, ["m"], "acc", seeds=1)
    assert out["mean"].tolist() == pytest.approx([0.4, 0.5])
    assert out["spread"].iloc[0] == pytest.approx(0.2)  # std (ddof 1) of 0.2, 0.4, 0.6
    assert spread_description(1) == "mean ± std over clients"


def test_several_seeds_give_the_se_over_seeds_of_the_client_means() -> None:
    rows = pd.DataFrame(
        {"m": ["a"] * 6, "seed": [0, 0, 1, 1, 2, 2], "acc": [0.0, 0.2, 0.4, 0.4, 0.5, 0.7]}
    )
    out = client_spread(rows, ["m"], "acc", seeds=3)
    means = pd.Series([0.1, 0.4, 0.6])  # each seed's mean over its clients
    assert out["mean"].iloc[0] == pytest.approx(means.mean())
    assert out["spread"].iloc[0] == pytest.approx(means.sem())
    assert "3 seeds" in spread_description(3)


def test_command_line_names_the_options_that_change_the_results() -> None:
    assert command_line("proxyfl-ablations", RunOptions()) == "pubsubml bench proxyfl-ablations"
    assert command_line("x", RunOptions(seeds=2, jobs=2)) == "pubsubml bench x --seeds 2"
