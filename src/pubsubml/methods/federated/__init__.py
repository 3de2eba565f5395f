"""DP federated baselines over MLPs (pubsub-ml.txt §7.3): the "(V)" and "(F)" rows of the evaluation.

* :mod:`~pubsubml.methods.federated.rounds`: the round loop, client sampling and accounting
  (:class:`FederatedMLP`);
* :mod:`~pubsubml.methods.federated.strategies`: the server updates FedAvg, FedProx, FedAdam;
* :mod:`~pubsubml.methods.federated.finetune`: using the global model at one site, fine-tuning.
"""

from __future__ import annotations

from pubsubml.methods.federated.finetune import fine_tune
from pubsubml.methods.federated.rounds import (
    Client,
    FederatedMLP,
    client_schedule,
)
from pubsubml.methods.federated.strategies import (
    DPFedAdam,
    DPFedAvg,
    DPFedProx,
    min_epsilon,
)

__all__ = [
    "Client",
    "DPFedAdam",
    "DPFedAvg",
    "DPFedProx",
    "FederatedMLP",
    "client_schedule",
    "fine_tune",
    "min_epsilon",
]
