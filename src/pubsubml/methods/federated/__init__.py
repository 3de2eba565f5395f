"""Federated learning: the shared round loop, its strategies and DP wrappers, and the DP federated
baselines over MLPs (pubsub-ml.txt §7.3): the "(V)" and "(F)" rows of the evaluation.

* :mod:`~pubsubml.methods.federated.loop`: the round loop every federated method runs
  (:func:`run_federation`), the :class:`Strategy` interface and client sampling;
* :mod:`~pubsubml.methods.federated.strategies`: the server strategies FedAvg, FedProx, FedAdam
  and FedSGD;
* :mod:`~pubsubml.methods.federated.dp`: record-level DP at the clients (:class:`LocalDP`) and
  client-level DP at the server (:class:`CentralDP`), each with its accountant;
* :mod:`~pubsubml.methods.federated.rounds`: :class:`FederatedMLP`, the estimator base of the
  baselines, and :mod:`~pubsubml.methods.federated.baselines`: DPFedAvg, DPFedProx, DPFedAdam and
  :func:`min_epsilon`;
* :mod:`~pubsubml.methods.federated.global_model`: the global model's predictions at one site,
  and :mod:`~pubsubml.methods.federated.personalization`: fine-tuning it there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pubsubml.lazy import attach

if TYPE_CHECKING:
    from pubsubml.methods.federated.baselines import DPFedAdam, DPFedAvg, DPFedProx, min_epsilon
    from pubsubml.methods.federated.dp import CentralDP, LocalDP
    from pubsubml.methods.federated.loop import Strategy, client_schedule, run_federation
    from pubsubml.methods.federated.personalization import fine_tune
    from pubsubml.methods.federated.rounds import Client, FederatedMLP
    from pubsubml.methods.federated.strategies import FedAdam, FedAvg, FedProx, FedSGD

__all__ = [
    "CentralDP",
    "Client",
    "DPFedAdam",
    "DPFedAvg",
    "DPFedProx",
    "FedAdam",
    "FedAvg",
    "FedProx",
    "FedSGD",
    "FederatedMLP",
    "LocalDP",
    "Strategy",
    "client_schedule",
    "fine_tune",
    "min_epsilon",
    "run_federation",
]

__getattr__, __dir__ = attach(__name__, __file__)
