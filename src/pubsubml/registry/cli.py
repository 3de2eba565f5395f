"""Typer commands of the registry: serve, migrate, sites, features, publish, subscribe, pull, budget.

The top-level ``pubsubml`` command mounts these (see ``docs/registry.md``): ``registry_app`` as
``pubsubml registry``, ``site_app`` as ``pubsubml site``, ``features_app`` as ``pubsubml features``,
``models_app`` as ``pubsubml models``, and the plain functions as ``pubsubml publish``,
``subscribe``, ``pull`` and ``budget``.  Client commands read the registry URL from ``--url`` or
``PUBSUBML_REGISTRY_URL`` and the token from ``--token`` or ``PUBSUBML_TOKEN``
(``PUBSUBML_ADMIN_TOKEN`` for administrator commands).
"""

from __future__ import annotations

from pubsubml.registry.cli_features import features_add_command as features_add_command
from pubsubml.registry.cli_features import features_app
from pubsubml.registry.cli_features import features_list_command as features_list_command
from pubsubml.registry.cli_models import (
    budget_command,
    models_app,
    models_list_command,
    publish_command,
    pull_command,
    subscribe_command,
)
from pubsubml.registry.cli_options import DEFAULT_URL as DEFAULT_URL
from pubsubml.registry.cli_options import AdminTokenOpt as AdminTokenOpt
from pubsubml.registry.cli_options import DataOpt as DataOpt
from pubsubml.registry.cli_options import DbOpt as DbOpt
from pubsubml.registry.cli_options import TokenOpt as TokenOpt
from pubsubml.registry.cli_options import UrlOpt as UrlOpt
from pubsubml.registry.cli_options import console as console
from pubsubml.registry.cli_options import err_console as err_console
from pubsubml.registry.cli_server import migrate_command as migrate_command
from pubsubml.registry.cli_server import registry_app
from pubsubml.registry.cli_server import serve_command as serve_command
from pubsubml.registry.cli_sites import site_add_command as site_add_command
from pubsubml.registry.cli_sites import site_app
from pubsubml.registry.cli_sites import site_list_command as site_list_command
from pubsubml.registry.cli_sites import site_revoke_token_command as site_revoke_token_command
from pubsubml.registry.cli_sites import site_rotate_token_command as site_rotate_token_command
from pubsubml.registry.cli_sites import site_scopes_command as site_scopes_command

__all__ = [
    "budget_command",
    "features_app",
    "models_app",
    "models_list_command",
    "publish_command",
    "pull_command",
    "registry_app",
    "site_app",
    "subscribe_command",
]
