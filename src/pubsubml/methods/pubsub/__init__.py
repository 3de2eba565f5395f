"""PubSub-ML (pubsub-ml.txt): a subscriber customizes the DP models it receives with its own data.

* :mod:`~pubsubml.methods.pubsub.customizer`: CUSTOMIZE (§4, Algorithm 2), the subscriber's
  method, whose module docstring names the module of each of its five steps;
* :mod:`~pubsubml.methods.pubsub.subscription`: the subscriber's inputs to it (public schema,
  classes, trusted keys), prepared one way for the library and the command line;
* :mod:`~pubsubml.methods.pubsub.storage`: the folder format a customized model is stored in;
* :mod:`~pubsubml.methods.pubsub.contributions`: how much each model helped (pfl-stacking.txt §3);
* :mod:`~pubsubml.methods.pubsub.streams`: dynamic DP ensembles on data streams (§6).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pubsubml.lazy import attach

if TYPE_CHECKING:
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
    from pubsubml.methods.pubsub.own_crossfit import CrossFitStore
    from pubsubml.methods.pubsub.streams import StreamPublisher, StreamSubscriber

__all__ = [
    "ContributionReport",
    "CrossFitStore",
    "Customizer",
    "OwnLearner",
    "StackedFusion",
    "StreamPublisher",
    "StreamSubscriber",
    "contribution_graph",
    "contribution_scores",
    "published_runner",
    "rank_publishers",
]

__getattr__, __dir__ = attach(__name__, __file__)
