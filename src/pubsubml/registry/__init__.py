"""The model registry: a publish/subscribe service for differentially private models.

Sites register as publishers or subscribers, the consortium's feature dictionary is kept here,
publishers upload signed DP models that the registry verifies and charges to their privacy
ledger, and subscribers receive every model matching their channel F1 ∨ … ∨ Fk through a feed
(pubsub-ml.txt §3.2 and §6 "Discussion").  :func:`create_app` builds the FastAPI service;
:class:`RegistryClient` implements the :class:`~pubsubml.hub.Hub` protocol over HTTP.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pubsubml.lazy import attach

if TYPE_CHECKING:
    from pubsubml.registry.app import create_app
    from pubsubml.registry.client.registry_client import RegistryClient
    from pubsubml.registry.settings import RegistrySettings

__all__ = ["RegistryClient", "RegistrySettings", "create_app"]

__getattr__, __dir__ = attach(__name__, __file__)
