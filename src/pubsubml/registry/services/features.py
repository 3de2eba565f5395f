"""The feature dictionary: the consortium's agreed feature metadata (pubsub-ml.txt §3.2).

Sites resolve feature semantics and encodings at the metadata level before anything is
published; a model may only use features of the dictionary, with exactly the agreed kind, bounds,
categories and default.  Entries are immutable: redefining a feature would change the meaning of
models already published with it.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from pubsubml.errors import ConflictError, SchemaMismatchError
from pubsubml.registry.auth import Principal
from pubsubml.registry.services.feed_writer import FeedWriter
from pubsubml.registry.tables import FeatureRow, utcnow
from pubsubml.schema import Feature, FeatureSchema

__all__ = ["add_features", "check_against_dictionary", "known_features", "list_features"]


def _canonical(feature: Feature) -> str:
    return feature.model_dump_json()


def _agreed(feature: Feature) -> dict[str, object]:
    """The fields that change a feature's meaning or encoding (the description does not)."""
    return feature.model_dump(exclude={"description"})


def add_features(
    session: Session, principal: Principal, features: Iterable[Feature]
) -> list[Feature]:
    """Add features to the dictionary; re-adding an identical feature is a no-op.

    Returns the features that were new.

    Raises
    ------
    PermissionDeniedError
        The caller is not the administrator.
    ConflictError
        A feature of that name exists with another definition.
    """
    principal.require_admin("edit the feature dictionary")
    wanted = list(features)
    writer = FeedWriter(session)
    existing = {
        r.name: r.definition
        for r in session.execute(
            select(FeatureRow).where(FeatureRow.name.in_([f.name for f in wanted]))
        ).scalars()
    }
    added: list[Feature] = []
    for f in wanted:
        text = _canonical(f)
        if f.name in existing:
            if existing[f.name] != text:
                raise ConflictError(
                    f"feature {f.name!r} is already defined differently in the dictionary "
                    f"({existing[f.name]}); dictionary entries are immutable"
                )
            continue
        session.add(FeatureRow(name=f.name, definition=text, created_at=utcnow()))
        existing[f.name] = text
        added.append(f)
    if added:
        writer.event("features.added", {"names": [f.name for f in added]})
    writer.close()
    return added


def list_features(session: Session) -> list[Feature]:
    """The whole dictionary, by name."""
    rows = session.execute(select(FeatureRow).order_by(FeatureRow.name)).scalars()
    return [Feature.model_validate_json(r.definition) for r in rows]


def known_features(session: Session, names: Iterable[str]) -> set[str]:
    """The subset of ``names`` that the dictionary defines."""
    wanted = sorted(set(names))
    return set(
        session.execute(select(FeatureRow.name).where(FeatureRow.name.in_(wanted))).scalars()
    )


_AGREED: weakref.WeakKeyDictionary[Engine, dict[str, dict[str, object]]] = (
    weakref.WeakKeyDictionary()
)
"""Dictionary entries already read, by database engine: name → agreed fields.  Entries are
immutable (:func:`add_features` refuses a redefinition and nothing deletes one), so an entry read
once holds for the life of the engine, whichever replica added it."""
_AGREED_LOCK = threading.Lock()


def _dictionary_entries(session: Session, names: list[str]) -> dict[str, dict[str, object]]:
    """The agreed fields of the dictionary entries among ``names``; the ones not read before
    through this session's engine in one statement."""
    bind = session.get_bind()
    engine = bind if isinstance(bind, Engine) else bind.engine
    with _AGREED_LOCK:
        cache = _AGREED.setdefault(engine, {})
        found = {n: cache[n] for n in names if n in cache}
    missing = [n for n in names if n not in found]
    if missing:
        rows = session.execute(
            select(FeatureRow.name, FeatureRow.definition).where(FeatureRow.name.in_(missing))
        )
        read = {name: _agreed(Feature.model_validate_json(text)) for name, text in rows}
        with _AGREED_LOCK:
            cache.update(read)
        found.update(read)
    return found


def check_against_dictionary(session: Session, schema: FeatureSchema) -> None:
    """Check that every input feature of a model is in the dictionary, as agreed.

    Entries are read from the database once per engine (they are immutable), so a publish whose
    features were all seen before reads nothing here.

    Raises
    ------
    SchemaMismatchError
        A feature is unknown, or differs from its dictionary entry (kind, bounds, categories,
        default).
    """
    names = list(schema.names)
    stored = _dictionary_entries(session, names)
    unknown = [n for n in names if n not in stored]
    if unknown:
        raise SchemaMismatchError(
            f"features {unknown[:10]} are not in the consortium's feature dictionary; the "
            "administrator adds them with `pubsubml features add`"
        )
    differ = [f.name for f in schema if _agreed(f) != stored[f.name]]
    if differ:
        raise SchemaMismatchError(
            f"features {differ[:10]} differ from their dictionary entries (kind, bounds, "
            "categories and default must be exactly as agreed)"
        )
