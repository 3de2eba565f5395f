"""Collaboration methods: PubSub-ML customization, stacking, streams and federated baselines.

Methods talk to a :class:`~pubsubml.hub.Hub` only (DESIGN.md, "Simulation and deployment share
method code").  Names are imported lazily (PEP 562): peer processes that need one method do not
pay for importing all of them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pubsubml.methods.contributions import (
        ContributionReport,
        contribution_graph,
        contribution_scores,
        rank_publishers,
    )
    from pubsubml.methods.federated import (
        DPFedAdam,
        DPFedAvg,
        DPFedProx,
        FederatedMLP,
        fine_tune,
        min_epsilon,
    )
    from pubsubml.methods.fusion import StackedFusion
    from pubsubml.methods.outputs import published_runner
    from pubsubml.methods.own import OwnLearner
    from pubsubml.methods.pubsub import Customizer
    from pubsubml.methods.stacking import (
        StackingPersonalizer,
        hybrid_partition,
        release_dp_defaults,
        vertical_partition,
    )
    from pubsubml.methods.streams import (
        StreamPublisher,
        StreamSubscriber,
        hyperplane_chunks,
        hyperplane_schema,
    )

__all__ = [
    "ContributionReport",
    "Customizer",
    "DPFedAdam",
    "DPFedAvg",
    "DPFedProx",
    "FederatedMLP",
    "OwnLearner",
    "StackedFusion",
    "StackingPersonalizer",
    "StreamPublisher",
    "StreamSubscriber",
    "contribution_graph",
    "contribution_scores",
    "fine_tune",
    "hybrid_partition",
    "hyperplane_chunks",
    "hyperplane_schema",
    "min_epsilon",
    "published_runner",
    "rank_publishers",
    "release_dp_defaults",
    "vertical_partition",
]

_HOME = {
    "ContributionReport": "contributions",
    "contribution_graph": "contributions",
    "contribution_scores": "contributions",
    "rank_publishers": "contributions",
    "DPFedAdam": "federated",
    "DPFedAvg": "federated",
    "DPFedProx": "federated",
    "FederatedMLP": "federated",
    "fine_tune": "federated",
    "min_epsilon": "federated",
    "published_runner": "outputs",
    "OwnLearner": "own",
    "StackedFusion": "fusion",
    "Customizer": "pubsub",
    "StackingPersonalizer": "stacking",
    "hybrid_partition": "stacking",
    "release_dp_defaults": "stacking",
    "vertical_partition": "stacking",
    "StreamPublisher": "streams",
    "StreamSubscriber": "streams",
    "hyperplane_chunks": "streams",
    "hyperplane_schema": "streams",
}


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'pubsubml.methods' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"pubsubml.methods.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
