"""Reading published models: list with filters, get one, download its weights.

A caller never learns that a model it may not see exists: such a model is absent from lists and
every direct access answers 404 "not found", exactly as for an id that was never published.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from sqlalchemy import and_, exists, false, or_, select, true
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ColumnElement

from pubsubml.errors import NotFoundError
from pubsubml.registry.auth import Principal
from pubsubml.registry.schemas import MODEL_ID_PATTERN, ModelList, ModelPublic
from pubsubml.registry.tables import ModelFeatureRow, ModelRow, ModelVisibilityRow, SiteRow

__all__ = ["get_model", "get_model_row", "list_models", "model_public", "model_visible_clause"]

_MODEL_ID_RE = re.compile(MODEL_ID_PATTERN)


def model_visible_clause(principal: Principal) -> ColumnElement[bool]:
    """SQL condition: the ``models`` row is visible to ``principal``.

    A model is visible to the administrator, to its publisher, to every site when it is public,
    and to the sites listed in its visibility rows.
    """
    if principal.is_admin:
        return true()
    if principal.site_id is None:  # pragma: no cover - a site principal always has an id
        return false()
    listed = exists().where(
        and_(
            ModelVisibilityRow.model_id == ModelRow.id,
            ModelVisibilityRow.site_id == principal.site_id,
        )
    )
    return or_(ModelRow.public.is_(True), ModelRow.publisher_id == principal.site_id, listed)


def _features_of(session: Session, ids: Sequence[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = defaultdict(list)
    if ids:
        stmt = select(ModelFeatureRow.model_id, ModelFeatureRow.feature_name).where(
            ModelFeatureRow.model_id.in_(ids)
        )
        for mid, name in session.execute(stmt).all():
            out[mid].append(name)
    return out


def _visible_to(session: Session, ids: Sequence[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = defaultdict(list)
    if ids:
        stmt = (
            select(ModelVisibilityRow.model_id, SiteRow.name)
            .join(SiteRow, SiteRow.id == ModelVisibilityRow.site_id)
            .where(ModelVisibilityRow.model_id.in_(ids))
        )
        for mid, name in session.execute(stmt).all():
            out[mid].append(name)
    return out


def model_public(
    row: ModelRow,
    publisher: str,
    *,
    features: list[str],
    visible_to: list[str] | None,
    with_card: bool = False,
    created: bool | None = None,
) -> ModelPublic:
    """The API view of a model row."""
    card: dict[str, Any] = json.loads(row.card_json)
    return ModelPublic(
        model_id=row.id,
        publisher=publisher,
        task=row.task,  # type: ignore[arg-type]
        classes=card.get("classes"),
        features=features,
        epsilon=row.epsilon,
        claimed_epsilon=row.claimed_epsilon,
        delta=row.delta,
        format=row.format,  # type: ignore[arg-type]
        weights_sha256=row.weights_sha256,
        size_bytes=row.size_bytes,
        visible_to=visible_to,
        position=row.position,
        created_at=row.created_at,
        created=created,
        card=card if with_card else None,
    )


def _publics(
    session: Session, principal: Principal, rows: Sequence[tuple[ModelRow, str]], *, with_card: bool
) -> list[ModelPublic]:
    ids = [r.id for r, _ in rows]
    feats = _features_of(session, ids)
    vis = _visible_to(session, ids)
    out = []
    for row, publisher in rows:
        owner = principal.is_admin or row.publisher_id == principal.site_id
        out.append(
            model_public(
                row,
                publisher,
                features=sorted(feats[row.id]),
                visible_to=(None if row.public else sorted(vis[row.id])) if owner else None,
                with_card=with_card,
            )
        )
    return out


def list_models(
    session: Session,
    principal: Principal,
    *,
    publisher: str | None = None,
    task: str | None = None,
    features: Sequence[str] = (),
    min_epsilon: float | None = None,
    max_epsilon: float | None = None,
    max_delta: float | None = None,
    after: int = 0,
    limit: int = 100,
) -> ModelList:
    """Models the caller may see, in publication order, with optional filters.

    ``features`` keeps models whose inputs contain every listed feature; the ε range applies to
    the ε recomputed by the registry at the card's δ, so a privacy filter should bound both:
    ``max_epsilon`` and ``max_delta``.
    """
    stmt = (
        select(ModelRow, SiteRow.name)
        .join(SiteRow, SiteRow.id == ModelRow.publisher_id)
        .where(model_visible_clause(principal), ModelRow.position > after)
    )
    if publisher is not None:
        stmt = stmt.where(SiteRow.name == publisher)
    if task is not None:
        stmt = stmt.where(ModelRow.task == task)
    for name in dict.fromkeys(features):
        stmt = stmt.where(
            exists().where(
                and_(ModelFeatureRow.model_id == ModelRow.id, ModelFeatureRow.feature_name == name)
            )
        )
    if min_epsilon is not None:
        stmt = stmt.where(ModelRow.epsilon >= min_epsilon)
    if max_epsilon is not None:
        stmt = stmt.where(ModelRow.epsilon <= max_epsilon)
    if max_delta is not None:
        stmt = stmt.where(ModelRow.delta <= max_delta)
    stmt = stmt.order_by(ModelRow.position).limit(limit)
    rows = [(r, n) for r, n in session.execute(stmt).all()]
    return ModelList(models=_publics(session, principal, rows, with_card=False))


def get_model_row(session: Session, principal: Principal, model_id: str) -> tuple[ModelRow, str]:
    """A model the caller may see, with its publisher's name.

    Raises
    ------
    NotFoundError
        No such model, an invalid id, or a model the caller may not see (indistinguishable).
    """
    if not isinstance(model_id, str) or not _MODEL_ID_RE.fullmatch(model_id):
        raise NotFoundError(f"model {str(model_id)[:80]!r} not found")
    stmt = (
        select(ModelRow, SiteRow.name)
        .join(SiteRow, SiteRow.id == ModelRow.publisher_id)
        .where(ModelRow.id == model_id, model_visible_clause(principal))
    )
    found = session.execute(stmt).first()
    if found is None:
        raise NotFoundError(f"model {model_id!r} not found")
    return found[0], found[1]


def get_model(session: Session, principal: Principal, model_id: str) -> ModelPublic:
    """One model with its card (see :func:`get_model_row` for errors)."""
    row, publisher = get_model_row(session, principal, model_id)
    return _publics(session, principal, [(row, publisher)], with_card=True)[0]
