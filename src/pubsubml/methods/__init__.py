"""Collaboration methods, one package per paper: the algorithms only (no experiment, no CLI).

* :mod:`~pubsubml.methods.pubsub`: PubSub-ML customization, contributions and streams;
* :mod:`~pubsubml.methods.federated`: the DP federated baselines;
* :mod:`~pubsubml.methods.stacking`: personalization by stacking;
* :mod:`~pubsubml.methods.proxyfl`: ProxyFL and its baselines;
* :mod:`~pubsubml.methods.domain_experts`: FL with private domain experts;
* :mod:`~pubsubml.methods.async_dp`: the asynchronous DP learner.

Methods talk to a :class:`~pubsubml.hub.Hub` only (DESIGN.md, "Simulation and deployment share
method code").  Names are imported lazily (:mod:`pubsubml.lazy`): peer processes that need one method do not
pay for importing all of them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pubsubml.lazy import attach

if TYPE_CHECKING:
    from pubsubml.methods.federated import (
        DPFedAdam,
        DPFedAvg,
        DPFedProx,
        FederatedMLP,
        fine_tune,
        min_epsilon,
    )
    from pubsubml.methods.pubsub.contributions import (
        ContributionReport,
        contribution_graph,
        contribution_scores,
        rank_publishers,
    )
    from pubsubml.methods.pubsub.customizer import Customizer
    from pubsubml.methods.pubsub.fusion import StackedFusion
    from pubsubml.methods.pubsub.outputs import published_runner
    from pubsubml.methods.pubsub.own import OwnLearner
    from pubsubml.methods.pubsub.streams import (
        StreamPublisher,
        StreamSubscriber,
        hyperplane_chunks,
        hyperplane_schema,
    )
    from pubsubml.methods.stacking import (
        StackingPersonalizer,
        hybrid_partition,
        release_dp_defaults,
        vertical_partition,
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

__getattr__, __dir__ = attach(__name__, __file__)
