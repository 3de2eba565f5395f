"""The registry's web dashboard: server-rendered pages under ``/ui``.

Sites, budgets and ledgers, models and their cards, subscriptions and the contribution graph,
as seen by the token that logged in (:mod:`pubsubml.registry.ui.routes`).
"""

from __future__ import annotations

from pubsubml.registry.ui.routes import create_dashboard

__all__ = ["create_dashboard"]
