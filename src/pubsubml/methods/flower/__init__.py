"""Our DP trainers inside a Flower federation (flwr 1.42, the optional ``pubsubml[flower]`` extra).

* :mod:`~pubsubml.methods.flower.client_app`: :func:`dp_client_app`, a Flower ``ClientApp`` that
  trains a site's MLP with record-level DP-SGD on our engine (Poisson sampling, secure noise) and
  keeps the site's accountant in the run's persistent ``context.state``, so ε composes over every
  round the site took part in; a round that would pass the site's budget is refused.
* :mod:`~pubsubml.methods.flower.server_app`: :func:`dp_server_app`, a Flower ``ServerApp`` that
  runs Flower's own FedAvg, FedProx or FedAdam (optionally inside Flower's central-DP wrapper)
  and hands back the global model as an estimator with ``predict_proba`` on DataFrames, with
  every site's DP events.
* :mod:`~pubsubml.methods.flower.model`: :class:`FlowerMLP`, that estimator, publishable through
  :meth:`Site.publish <pubsubml.sites.Site.publish>` (the bridge to the registry).
* :mod:`~pubsubml.methods.flower.simulation`: :func:`run_local_simulation`, Flower's Simulation
  Engine on a local Ray instance, telemetry off.

Importing :mod:`pubsubml` never imports flwr; importing this package does.  See docs/flower.md.

References
----------
pubsub-ml.txt §3.1 (post-processing, composition) and §7.3 (the DP FL baselines); Beutel et al.,
"Flower: A friendly federated learning research framework", arXiv:2007.14390.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pubsubml.lazy import attach

if TYPE_CHECKING:
    from pubsubml.methods.flower.client_app import DPClientConfig, dp_client_app
    from pubsubml.methods.flower.model import FlowerMLP
    from pubsubml.methods.flower.server_app import CentralDPConfig, FlowerRun, dp_server_app
    from pubsubml.methods.flower.simulation import run_local_simulation

__all__ = [
    "CentralDPConfig",
    "DPClientConfig",
    "FlowerMLP",
    "FlowerRun",
    "dp_client_app",
    "dp_server_app",
    "run_local_simulation",
]

__getattr__, __dir__ = attach(__name__, __file__)
