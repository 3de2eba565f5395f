"""Typer commands of the registry: serve, migrate, sites, features, publish, subscribe, pull, budget.

The top-level ``pubsubml`` command mounts these (see ``docs/registry.md``): ``registry_app`` as
``pubsubml registry``, ``site_app`` as ``pubsubml site``, ``features_app`` as ``pubsubml features``,
``models_app`` as ``pubsubml models``, and the plain functions as ``pubsubml publish``,
``subscribe``, ``pull`` and ``budget``.  Client commands read the registry URL from ``--url`` or
``PUBSUBML_REGISTRY_URL`` and the token from ``--token`` or ``PUBSUBML_TOKEN``
(``PUBSUBML_ADMIN_TOKEN`` for administrator commands).

One module per command group: :mod:`~pubsubml.cli.registry.server` (serve, migrate),
:mod:`~pubsubml.cli.registry.sites`, :mod:`~pubsubml.cli.registry.features`,
:mod:`~pubsubml.cli.registry.model_exchange` (models, publish, subscribe, pull, budget), and what
they share in :mod:`~pubsubml.cli.registry.options`.
"""

from __future__ import annotations

from pubsubml.cli.registry.features import features_app
from pubsubml.cli.registry.model_exchange import (
    budget_command,
    models_app,
    publish_command,
    pull_command,
    subscribe_command,
)
from pubsubml.cli.registry.server import registry_app
from pubsubml.cli.registry.sites import site_app

__all__ = [
    "budget_command",
    "features_app",
    "models_app",
    "publish_command",
    "pull_command",
    "registry_app",
    "site_app",
    "subscribe_command",
]
