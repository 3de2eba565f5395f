"""The registry's HTTP client: the :class:`~pubsubml.hub.Hub` protocol against a deployed registry.

:mod:`~pubsubml.registry.client.registry_client` holds :class:`RegistryClient` (requests,
retries, the Hub methods); :mod:`~pubsubml.registry.client.wire_format` the wire format it shares
with the server (error answers, multipart uploads, cards inside JSON).  The client imports
nothing of the server side: a site that only publishes and subscribes never loads FastAPI or the
database layer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pubsubml.lazy import attach

if TYPE_CHECKING:
    from pubsubml.registry.client.registry_client import RegistryClient

__all__ = ["RegistryClient"]

__getattr__, __dir__ = attach(__name__, __file__)
