"""Every experiment of the five papers, registered once by name.

``pubsubml bench NAME`` builds one command per entry (:mod:`pubsubml.cli.bench`); Python code runs
one with ``EXPERIMENTS[name].run(out_dir, EXPERIMENTS[name].options(...))``.

Examples
--------
>>> exp = get("pubsub-scenarios")
>>> exp.name, exp.folds, [p.name for p in exp.params]
('pubsub-scenarios', 5, ['turns', 'fl_dp'])
>>> get("nope")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
pubsubml.experiments.catalog.UnknownExperimentError: unknown experiment 'nope'; ...
"""

from __future__ import annotations

from collections.abc import Iterable

from pubsubml.experiments.async_dp import experiments as async_dp
from pubsubml.experiments.audit import privacy_audit
from pubsubml.experiments.base import Experiment
from pubsubml.experiments.domain_experts import benches as domain_experts
from pubsubml.experiments.flower import parity as flower_parity
from pubsubml.experiments.heart_disease.experiment import HEART_DISEASE_EXPERIMENT
from pubsubml.experiments.proxyfl import benches as proxyfl
from pubsubml.experiments.pubsub.scale import experiments as pubsub_scale
from pubsubml.experiments.pubsub.small.ceiling import CEILING_EXPERIMENT
from pubsubml.experiments.pubsub.small.experiment import SMALL_EXPERIMENT
from pubsubml.experiments.pubsub.tabular import experiments as pubsub_tabular
from pubsubml.experiments.stacking import reporting as stacking

__all__ = ["EXPERIMENTS", "UnknownExperimentError", "get", "register"]


class UnknownExperimentError(KeyError, ValueError):
    """No experiment has that name."""

    def __str__(self) -> str:
        return str(self.args[0])


def register(experiments: Iterable[Experiment]) -> dict[str, Experiment]:
    """The experiments by name, in the given order.

    Raises
    ------
    ValueError
        Two experiments with the same name.
    """
    out: dict[str, Experiment] = {}
    for exp in experiments:
        if exp.name in out:
            raise ValueError(f"experiment {exp.name!r} registered twice")
        out[exp.name] = exp
    return out


EXPERIMENTS: dict[str, Experiment] = register(
    [
        *pubsub_tabular.EXPERIMENTS,
        SMALL_EXPERIMENT,
        CEILING_EXPERIMENT,
        *pubsub_scale.EXPERIMENTS,
        *stacking.EXPERIMENTS,
        *async_dp.EXPERIMENTS,
        *proxyfl.EXPERIMENTS,
        *domain_experts.EXPERIMENTS,
        *privacy_audit.EXPERIMENTS,
        HEART_DISEASE_EXPERIMENT,
        *flower_parity.EXPERIMENTS,
    ]
)
"""Name → :class:`~pubsubml.experiments.base.Experiment`, each registered once."""


def get(name: str) -> Experiment:
    """The experiment called ``name``; :class:`UnknownExperimentError` lists the names."""
    try:
        return EXPERIMENTS[name]
    except KeyError:
        raise UnknownExperimentError(
            f"unknown experiment {name!r}; choose from {', '.join(EXPERIMENTS)}"
        ) from None
