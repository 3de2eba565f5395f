"""The catalog: every experiment registered once, names unique, lookups with a clear error."""

from __future__ import annotations

import pytest

from pubsubml.experiments.base import Experiment
from pubsubml.experiments.catalog import EXPERIMENTS, UnknownExperimentError, get, register


def test_every_experiment_is_registered_once_under_its_own_name() -> None:
    assert all(name == exp.name for name, exp in EXPERIMENTS.items())
    assert len({id(e.run_fold) for e in EXPERIMENTS.values()}) >= 5
    for exp in EXPERIMENTS.values():
        opts = exp.options(smoke=True)  # every experiment's defaults pass its own checks
        assert exp.grid(opts), exp.name
        assert exp.summary.endswith("."), exp.name


def test_register_refuses_a_name_twice() -> None:
    exp = next(iter(EXPERIMENTS.values()))
    with pytest.raises(ValueError, match="registered twice"):
        register([exp, exp])
    assert isinstance(register([exp])[exp.name], Experiment)


def test_unknown_names_list_the_known_ones() -> None:
    with pytest.raises(UnknownExperimentError, match="pubsub-scenarios"):
        get("pubsub-scenario")
    assert get("pubsub-small").seeds == 5
