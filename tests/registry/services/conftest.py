"""Fixtures of the service tests: a registry database with sites and a feature dictionary, and
its publication helpers."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from pubsubml.artifacts.card import ModelCard
from pubsubml.artifacts.validation import validate_untrusted
from pubsubml.registry.auth import ADMIN, Principal
from pubsubml.registry.infrastructure.artifact_store import ArtifactStore
from pubsubml.registry.infrastructure.database import Database
from pubsubml.registry.infrastructure.upload_lock import UploadLock
from pubsubml.registry.schemas import ModelPublic, SiteCreate
from pubsubml.registry.services.features import add_features
from pubsubml.registry.services.feed_writer import FeedWriter
from pubsubml.registry.services.publish_checks import Publication, prepare_publication
from pubsubml.registry.services.publish_commit import commit_publication
from pubsubml.registry.services.sites import create_site
from pubsubml.registry.tables import ModelVisibilityRow, SiteRow
from registry.conftest import model_row

MAX_BYTES = 1 << 20


class LocalValidator:
    """Runs the validation workers' checks in this process, counting the calls."""

    def __init__(self) -> None:
        self.calls = 0

    def validate(
        self, card: ModelCard, weights: bytes, *, site_delta: float, max_weights_bytes: int
    ) -> float:
        self.calls += 1
        return validate_untrusted(
            card, weights, site_delta=site_delta, max_weights_bytes=max_weights_bytes
        )


@dataclass
class Env:
    db: Database
    store: ArtifactStore
    lock: UploadLock
    sites: dict[str, Principal]
    validator: LocalValidator
    artifacts: Any
    support: Any

    def add_site(self, name: str, roles: str = "both", epsilon: float = 50.0) -> Principal:
        key = None if roles == "subscriber" else self.artifacts.public_key(name)
        body = SiteCreate(
            name=name, roles=roles, public_key=key, epsilon_budget=epsilon, delta_budget=1e-5
        )  # type: ignore[arg-type]
        with self.db.write() as s:
            create_site(s, ADMIN, body)
            site_id = s.execute(select(SiteRow.id).where(SiteRow.name == name)).scalar_one()
        self.sites[name] = Principal(kind="site", site_id=site_id, name=name, roles=roles)  # type: ignore[arg-type]
        return self.sites[name]

    def prepare(
        self, art: Any, site: str | Principal, visible_to: list[str] | None = None
    ) -> Publication | ModelPublic:
        principal = self.sites[site] if isinstance(site, str) else site
        with self.db.read() as s:
            return prepare_publication(
                s,
                principal,
                art.card.to_json(),
                art.weights,
                validator=self.validator,  # type: ignore[arg-type]
                visible_to=visible_to,
                max_weights_bytes=MAX_BYTES,
            )

    def commit(self, pub: Publication, site: str) -> ModelPublic:
        return commit_publication(self.db, self.store, self.lock, self.sites[site], pub)

    def snapshot(self) -> dict[str, Any]:
        return dict(self.support.snapshot(self.db, self.store.root))


def _make_env(url: str, tmp_path: Path, artifacts: Any, support: Any) -> Env:
    db = Database(url)
    store = tmp_path / "store"
    e = Env(
        db, ArtifactStore(store), UploadLock(db, store), {}, LocalValidator(), artifacts, support
    )
    with db.write() as s:
        add_features(s, ADMIN, support.DICTIONARY.features)
    for name in ("a", "b", "c"):
        e.add_site(name)
    return e


@pytest.fixture
def env(sqlite_template: Path, tmp_path: Path, artifacts: Any, support: Any) -> Iterator[Env]:
    path = tmp_path / "registry.db"
    shutil.copy(sqlite_template, path)
    e = _make_env(f"sqlite:///{path}", tmp_path, artifacts, support)
    yield e
    e.db.dispose()


@pytest.fixture
def both_env(backend: Any, tmp_path: Path, artifacts: Any, support: Any) -> Iterator[Env]:
    """:func:`env` on each storage backend (SQLite file, PostgreSQL schema)."""
    e = _make_env(backend.url, tmp_path, artifacts, support)
    yield e
    e.db.dispose()


# ---- sites and models for the feed and visibility tests ---------------------------------
def world_site(session: Session, name: str) -> Principal:
    row = SiteRow(
        name=name, roles="both", epsilon_budget=1.0, delta_budget=1e-5, token_hash=name * 64
    )
    session.add(row)
    session.flush()
    return Principal(kind="site", site_id=row.id, name=name, roles="both")


def world_model(
    session: Session, index: int, publisher: Principal, position: int, public: bool
) -> str:
    model_id = f"{index:032x}"
    session.add(
        model_row(
            model_id,
            publisher.site_id,
            position,
            card_json=json.dumps({"model": index}),
            public=public,
        )
    )
    session.flush()
    return model_id


@pytest.fixture
def world(db: Database) -> dict[str, Any]:
    """Sites a, b, c; a public model of a, and a model of a that only b may see."""
    with db.write() as s:
        a, b, c = world_site(s, "a"), world_site(s, "b"), world_site(s, "c")
        writer = FeedWriter(s)
        shared = world_model(s, 1, a, writer.next_position(), public=True)
        private = world_model(s, 2, a, writer.next_position(), public=False)
        s.add(ModelVisibilityRow(model_id=private, site_id=b.site_id))
        writer.close()
    return {"a": a, "b": b, "c": c, "public": shared, "private": private}
