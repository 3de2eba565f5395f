"""Collaboration methods: PubSub-ML customization, stacking, streams and federated baselines.

Methods talk to a :class:`~pubsubml.hub.Hub` only (DESIGN.md, "Simulation and deployment share
method code").
"""

from __future__ import annotations

from pubsubml.methods.contributions import (
    ContributionReport,
    contribution_graph,
    contribution_scores,
    rank_publishers,
)
from pubsubml.methods.federated import DPFedAvg, FederatedMLP
from pubsubml.methods.outputs import published_runner
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
    "DPFedAvg",
    "FederatedMLP",
    "StackingPersonalizer",
    "StreamPublisher",
    "StreamSubscriber",
    "contribution_graph",
    "contribution_scores",
    "hybrid_partition",
    "hyperplane_chunks",
    "hyperplane_schema",
    "published_runner",
    "rank_publishers",
    "release_dp_defaults",
    "vertical_partition",
]
