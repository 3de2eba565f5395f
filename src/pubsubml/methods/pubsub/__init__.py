"""PubSub-ML (pubsub-ml.txt): a subscriber customizes the DP models it receives with its own data.

* :mod:`~pubsubml.methods.pubsub.customizer`: CUSTOMIZE (§4), the subscriber's method;
* :mod:`~pubsubml.methods.pubsub.own`: the subscriber's own model M^s, and the Own baseline;
* :mod:`~pubsubml.methods.pubsub.fusion`: the fusion model f_c (§4 Step 4);
* :mod:`~pubsubml.methods.pubsub.outputs`: running published black-box models, aligning outputs;
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
    from pubsubml.methods.pubsub.streams import StreamPublisher, StreamSubscriber

__all__ = [
    "ContributionReport",
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
