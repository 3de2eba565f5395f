"""ProxyFL (proxyfl.txt): a private model and a DP proxy per client, proxies shared by PushSum.

* :mod:`~pubsubml.methods.proxyfl.protocol`: the rounds of Algorithm 1 (:class:`ProxyFL`);
* :mod:`~pubsubml.methods.proxyfl.local`: local deep mutual learning with a DP-SGD proxy (§3.2);
* :mod:`~pubsubml.methods.proxyfl.pushsum`: de-biased PushSum on an exponential graph (§3.3);
* :mod:`~pubsubml.methods.proxyfl.baselines`: Regular, Joint, FedAvg, AvgPush, CWT and FML (§4);
* :mod:`~pubsubml.methods.proxyfl.architectures`: the private models of the evaluation;
* :mod:`~pubsubml.methods.proxyfl.peers`: the same protocol between real processes (gloo).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pubsubml.lazy import attach

if TYPE_CHECKING:
    from pubsubml.methods.proxyfl.local import DMLConfig
    from pubsubml.methods.proxyfl.protocol import (
        ClientCohort,
        ProxyFL,
        RoundRecord,
        WeakPrivacyWarning,
        run_rounds,
    )

__all__ = [
    "ClientCohort",
    "DMLConfig",
    "ProxyFL",
    "RoundRecord",
    "WeakPrivacyWarning",
    "run_rounds",
]

__getattr__, __dir__ = attach(__name__, __file__)
