"""What each dashboard page shows, read through the registry's service functions.

Every function takes the database session and the logged-in :class:`~pubsubml.registry.auth.Principal`
and calls the same service functions as the API routes, with the same principal: a page shows a
site what its token may read through the API and nothing more (a model it may not see is "not
found", another site's ledger is refused), and the administrator sees everything.

The returned dictionaries are the templates' context; SVG comes from
:mod:`pubsubml.registry.ui.charts`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.orm import Session

from pubsubml.artifacts.card import ModelCard
from pubsubml.errors import DataValidationError, PubsubmlError
from pubsubml.privacy.accountants.composition import neighbouring_of
from pubsubml.privacy.accountants.release import release_epsilon
from pubsubml.privacy.ledger import PrivacyLedger, Release
from pubsubml.registry.api.deps import MAX_CURSOR
from pubsubml.registry.auth import Principal
from pubsubml.registry.schemas import LedgerPublic, ReleasePublic, check_site_name
from pubsubml.registry.services import contributions as contributions_service
from pubsubml.registry.services import features as features_service
from pubsubml.registry.services import ledger as ledger_service
from pubsubml.registry.services import model_reads as models_service
from pubsubml.registry.services import sites as sites_service
from pubsubml.registry.services import subscriptions as subscriptions_service
from pubsubml.registry.services.feed_reader import read_deliveries
from pubsubml.registry.ui.charts import (
    LedgerStep,
    budget_bar,
    contribution_graph,
    graph_svg,
    in_strength,
    ledger_plot,
)
from pubsubml.schema import Channel

__all__ = [
    "MAX_PLOT_POINTS",
    "PAGE_SIZE",
    "ModelFilters",
    "cumulative_spent",
    "graph_page",
    "ledger_page",
    "model_page",
    "models_page",
    "recompute_epsilon",
    "sites_page",
    "subscriptions_page",
]

#: Models listed per page.
PAGE_SIZE = 100
#: Most steps of the spent-ε plot (longer ledgers are sampled evenly, the last release kept).
MAX_PLOT_POINTS = 120
#: Delivered models listed per subscription.
MAX_DELIVERIES_SHOWN = 50
#: Most contribution scores read for the graph.
MAX_CONTRIBUTIONS = 10_000

# The feature dictionary's name rule (pubsubml.schema.Feature).
_FEATURE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]{0,127}$")
_MAX_FILTER_FEATURES = 32
_TASKS = ("classification", "regression")


@dataclass(frozen=True)
class ModelFilters:
    """Filters of the models page, validated from the query string.

    Attributes
    ----------
    features : tuple of str
        Every one must be an input of the model.
    task : {"classification", "regression"} or None
    publisher : str or None
    max_epsilon : float or None
        Upper bound on the ε recomputed by the registry (at the card's δ).
    after : int
        Position to list after (paging).
    """

    features: tuple[str, ...] = ()
    task: str | None = None
    publisher: str | None = None
    max_epsilon: float | None = None
    after: int = 0
    raw: dict[str, str] = field(default_factory=dict, compare=False)

    @classmethod
    def parse(cls, params: Sequence[tuple[str, str]]) -> ModelFilters:
        """Filters from query parameters (``feature`` repeatable and comma-separated, ``task``,
        ``publisher``, ``max_epsilon``, ``after``); empty values mean "any".

        Raises
        ------
        DataValidationError
            A value that no model could carry (HTTP 422), with the reason.

        Examples
        --------
        >>> ModelFilters.parse([("feature", "age, sex"), ("max_epsilon", "2")]).features
        ('age', 'sex')
        """
        values: dict[str, list[str]] = {}
        for key, value in params:
            values.setdefault(key, []).append(value.strip())
        features = tuple(
            dict.fromkeys(
                name.strip()
                for text in values.get("feature", [])
                for name in text.split(",")
                if name.strip()
            )
        )
        bad = [f for f in features if not _FEATURE_RE.fullmatch(f)]
        if bad or len(features) > _MAX_FILTER_FEATURES:
            raise DataValidationError(
                f"invalid feature filter {bad[:3] or features[:3]}: feature names start with a "
                f"letter or '_' (at most 128 characters, {_MAX_FILTER_FEATURES} names)"
            )
        task = _last(values, "task")
        if task is not None and task not in _TASKS:
            raise DataValidationError(f"invalid task {task[:40]!r}: use one of {list(_TASKS)}")
        publisher = _last(values, "publisher")
        if publisher is not None:
            try:
                check_site_name(publisher)
            except ValueError as exc:
                raise DataValidationError(str(exc)) from None
        raw = {k: ", ".join(v) if k == "feature" else v[-1] for k, v in values.items()}
        return cls(
            features=features,
            task=task,
            publisher=publisher,
            max_epsilon=_float(_last(values, "max_epsilon"), "max_epsilon"),
            after=_cursor(_last(values, "after"), "after"),
            raw=raw,
        )


def _last(values: dict[str, list[str]], key: str) -> str | None:
    found = values.get(key)
    return found[-1] if found and found[-1] else None


def _float(text: str | None, name: str) -> float | None:
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        raise DataValidationError(f"{name} must be a number, got {text[:40]!r}") from None
    if not 0.0 <= value < math.inf:
        raise DataValidationError(f"{name} must be finite and at least 0, got {text[:40]!r}")
    return value


def _cursor(text: str | None, name: str) -> int:
    if text is None:
        return 0
    if not text.isascii() or not text.isdigit() or len(text) > 19 or int(text) > MAX_CURSOR:
        raise DataValidationError(
            f"{name} must be an integer from 0 to {MAX_CURSOR}, got {text[:40]!r}"
        )
    return int(text)


def sites_page(session: Session, principal: Principal) -> dict[str, Any]:
    """The site directory with roles and budgets; spent ε for the ledgers the caller may read
    (its own, or all for the administrator)."""
    rows = []
    for site in sites_service.list_sites(session):
        ledger = None
        if principal.is_admin or principal.name == site.name:
            ledger = ledger_service.read_ledger(session, principal, site.name)
        rows.append(
            {
                "site": site,
                "ledger": ledger,
                "bar": None
                if ledger is None
                else budget_bar(ledger.spent_epsilon, ledger.epsilon_budget),
            }
        )
    return {"rows": rows}


def models_page(session: Session, principal: Principal, filters: ModelFilters) -> dict[str, Any]:
    """Models the caller may see, filtered, with the names the filter form suggests."""
    listed = models_service.list_models(
        session,
        principal,
        publisher=filters.publisher,
        task=filters.task,
        features=filters.features,
        max_epsilon=filters.max_epsilon,
        after=filters.after,
        limit=PAGE_SIZE,
    ).models
    sites = sites_service.list_sites(session)
    return {
        "models": listed,
        "filters": filters,
        "next_after": listed[-1].position if len(listed) == PAGE_SIZE else None,
        "feature_names": [f.name for f in features_service.list_features(session)],
        "publishers": [s.name for s in sites if s.roles in ("publisher", "both")],
    }


def recompute_epsilon(card: ModelCard) -> float:
    """ε of the card's DP events at the card's δ, by the accountant.

    :func:`~pubsubml.privacy.accountants.release.release_epsilon`, as the registry does at
    publish time: PLD at δ in (0, 1); basic composition at δ = 0 (pure ε-DP events only).

    Raises
    ------
    PubsubmlError
        The events cannot be accounted at that δ.
    """
    return release_epsilon(list(card.privacy.events), card.privacy.delta)


def model_page(session: Session, principal: Principal, model_id: str) -> dict[str, Any]:
    """One model's card in full, its DP events, the ε recomputed from them (and the neighbouring
    relation it holds for), and the contribution scores subscribers reported for it.

    Raises
    ------
    NotFoundError
        No such model, or one the caller may not see (indistinguishable).
    """
    model = models_service.get_model(session, principal, model_id)
    card = ModelCard.from_json(json.dumps(model.card))
    recomputed: float | None = None
    problem: str | None = None
    try:
        recomputed = recompute_epsilon(card)
    except (PubsubmlError, ArithmeticError, ValueError, MemoryError) as exc:
        problem = f"the accountant could not compose these events: {exc}"[:300]
    scores = contributions_service.list_contributions(session, principal, model_id=model.model_id)
    return {
        "model": model,
        "card": card,
        "events": [e.model_dump(mode="json") for e in card.privacy.events],
        "recomputed": recomputed,
        "recompute_problem": problem,
        "neighbouring": neighbouring_of(card.privacy.events),
        "card_json": json.dumps(model.card, indent=2, sort_keys=True, ensure_ascii=False),
        "contributions": scores,
    }


def _release_label(release: ReleasePublic) -> str:
    """A release as its hover text names it: model id (or release id) and time."""
    name = release.model_id[:12] if release.model_id else release.release_id[:40]
    return f"{name}, {release.created_at:%Y-%m-%d %H:%M:%S} UTC"


def cumulative_spent(
    ledger: LedgerPublic, *, max_points: int = MAX_PLOT_POINTS
) -> list[LedgerStep]:
    """Spent ε after each charged release, in charge order, as the ledger composes it.

    Step k is :meth:`~pubsubml.privacy.ledger.PrivacyLedger.spent_epsilon` of the ledger's
    first k releases (sequential composition by the accountant, parallel over registered
    disjoint chunks; never a sum of ε), at the site's δ; the last step is the ledger's own
    ``spent_epsilon`` as :func:`~pubsubml.registry.services.ledger.read_ledger` returned it.

    Parameters
    ----------
    ledger : LedgerPublic
        A site's ledger, releases in charge order.
    max_points : int, default=MAX_PLOT_POINTS
        Beyond this many releases, only evenly spaced prefixes (and the whole ledger) are
        composed: each step then covers the releases since the previous one.

    Returns
    -------
    list of LedgerStep
        One per release (or per sampled prefix), numbered from 1; empty without releases.
    """
    releases = [
        Release(
            release_id=r.release_id,
            description=r.description,
            events=tuple(r.events),
            scope=None if r.scope is None else tuple(r.scope),
            created_at=r.created_at,
        )
        for r in ledger.releases
    ]
    n = len(releases)
    if n > max_points:
        ends = sorted({max(1, round(i * n / max_points)) for i in range(1, max_points)} | {n})
    else:
        ends = list(range(1, n + 1))
    steps = []
    for k in ends:
        if k == n:
            spent = ledger.spent_epsilon
        else:
            spent = PrivacyLedger(
                site=ledger.site,
                epsilon_budget=ledger.epsilon_budget,
                delta=ledger.delta_budget,
                releases=releases[:k],
            ).spent_epsilon()
        steps.append(LedgerStep(k, spent, _release_label(ledger.releases[k - 1])))
    return steps


def ledger_page(session: Session, principal: Principal, name: str) -> dict[str, Any]:
    """A site's ledger: budget, releases and the spent ε plotted by release.

    Raises
    ------
    NotFoundError
        No such site.
    PermissionDeniedError
        Another site's ledger (only the site itself and the administrator read it).
    """
    ledger = ledger_service.read_ledger(session, principal, name)
    return {
        "ledger": ledger,
        "bar": budget_bar(ledger.spent_epsilon, ledger.epsilon_budget, width=320),
        "plot": ledger_plot(cumulative_spent(ledger), ledger.epsilon_budget),
    }


def subscriptions_page(session: Session, principal: Principal) -> dict[str, Any]:
    """The caller's subscriptions (all, for the administrator): each channel's terms and the
    models delivered so far."""
    owner = None if principal.is_admin else principal.site_id
    rows = []
    for sub in subscriptions_service.list_subscriptions(session, principal):
        delivered = read_deliveries(
            session, sub.id, after=0, limit=MAX_DELIVERIES_SHOWN + 1, site_id=owner
        )
        terms = Channel.parse(sub.channel).terms
        rows.append(
            {
                "subscription": sub,
                "terms": terms,
                "every_model": terms == (("*",),),  # the wildcard channel, where supported
                "delivered": [(c, m) for c, m, _ in delivered[:MAX_DELIVERIES_SHOWN]],
                "more": len(delivered) > MAX_DELIVERIES_SHOWN,
            }
        )
    return {"rows": rows}


def graph_page(session: Session, principal: Principal) -> dict[str, Any]:
    """The contribution graph of the scores the caller may see: each subscriber's latest score
    per model, summed per publisher; nodes sized by in-strength centrality."""
    latest: dict[str, dict[str, float]] = {}
    for c in contributions_service.list_contributions(
        session, principal, limit=MAX_CONTRIBUTIONS
    ):  # newest first: the first score seen per (subscriber, model) is the latest
        latest.setdefault(c.subscriber, {}).setdefault(c.model_id, c.score)
    publisher_of = {}
    for model_id in sorted({m for given in latest.values() for m in given}):
        _, publisher_of[model_id] = models_service.get_model_row(session, principal, model_id)
    graph = contribution_graph(latest, publisher_of)
    strength = in_strength(graph)
    ranking = sorted(strength.items(), key=lambda t: (-t[1], t[0]))
    edges = sorted(
        ((str(u), str(v), float(w)) for u, v, w in graph.edges(data="weight", default=0.0)),
        key=lambda e: (-e[2], e[0], e[1]),
    )
    return {
        "svg": graph_svg(graph),
        "ranking": ranking,
        "edges": edges,
        "n_reports": sum(len(v) for v in latest.values()),
    }
