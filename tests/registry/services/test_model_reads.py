"""Tests of pubsubml.registry.services.model_reads: listing, paging, visibility and the API view."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from pubsubml.artifacts.card import ModelCard
from pubsubml.artifacts.validation import validate_untrusted
from pubsubml.errors import NotFoundError
from pubsubml.privacy.events import DPEvent
from pubsubml.registry.auth import ADMIN, Principal
from pubsubml.registry.infrastructure.artifact_store import ArtifactStore
from pubsubml.registry.infrastructure.database import Database
from pubsubml.registry.infrastructure.upload_lock import UploadLock
from pubsubml.registry.schemas import ModelPublic, SiteCreate
from pubsubml.registry.services.features import add_features
from pubsubml.registry.services.model_reads import (
    get_model,
    get_model_row,
    list_models,
    model_public,
    model_visible_clause,
)
from pubsubml.registry.services.publish import publish_model
from pubsubml.registry.services.sites import create_site
from pubsubml.registry.tables import ModelRow, SiteRow


class LocalValidator:
    """Runs the validation workers' checks in this process."""

    def validate(
        self, card: ModelCard, weights: bytes, *, site_delta: float, max_weights_bytes: int
    ) -> float:
        return validate_untrusted(
            card, weights, site_delta=site_delta, max_weights_bytes=max_weights_bytes
        )


@dataclass
class Env:
    db: Database
    store: ArtifactStore
    sites: dict[str, Principal]
    artifacts: Any

    def publish(self, site: str, visible_to: list[str] | None = None, **kwargs: Any) -> ModelPublic:
        art = self.artifacts(site, **kwargs)
        return publish_model(
            self.db,
            self.store,
            self.sites[site],
            art.card.to_json(),
            art.weights,
            lock=UploadLock(self.db, self.store.root),
            validator=LocalValidator(),  # type: ignore[arg-type]
            visible_to=visible_to,
            max_weights_bytes=1 << 20,
        )

    def listed(self, viewer: str | Principal, **filters: Any) -> list[ModelPublic]:
        principal = self.sites[viewer] if isinstance(viewer, str) else viewer
        with self.db.read() as s:
            return list_models(s, principal, **filters).models


@pytest.fixture
def env(sqlite_template: Path, tmp_path: Path, artifacts: Any, support: Any) -> Iterator[Env]:
    path = tmp_path / "registry.db"
    shutil.copy(sqlite_template, path)
    db = Database(f"sqlite:///{path}")
    sites = {}
    with db.write() as s:
        add_features(s, ADMIN, support.DICTIONARY.features)
        for name in ("a", "b", "c"):
            body = SiteCreate(
                name=name,
                public_key=artifacts.public_key(name),
                epsilon_budget=50.0,
                delta_budget=1e-5,
            )
            create_site(s, ADMIN, body)
            site_id = s.execute(select(SiteRow.id).where(SiteRow.name == name)).scalar_one()
            sites[name] = Principal(kind="site", site_id=site_id, name=name, roles="both")
    yield Env(db, ArtifactStore(tmp_path / "store"), sites, artifacts)
    db.dispose()


def test_models_page_by_position(env: Env) -> None:
    published = [env.publish("a", seed=300 + i) for i in range(3)]
    positions = [m.position for m in published]
    assert positions == sorted(positions)
    ids = [m.model_id for m in published]
    assert [m.model_id for m in env.listed("b", limit=2)] == ids[:2]
    assert [m.model_id for m in env.listed("b", after=positions[1])] == ids[2:]
    assert env.listed("b", after=positions[2]) == []


def test_epsilon_lower_bound_and_repeated_feature_filters(env: Env, support: Any) -> None:
    low = env.publish("a", seed=303)  # one Gaussian release, σ = 5: ε ≈ 0.73
    loose = support.privacy_record(events=(DPEvent(mechanism="gaussian", noise_multiplier=2.0),))
    high = env.publish("b", seed=304, privacy=loose)  # ε ≈ 1.99
    assert low.epsilon < 1.0 < high.epsilon
    assert [m.model_id for m in env.listed("c", min_epsilon=1.0)] == [high.model_id]
    assert [m.model_id for m in env.listed("c", min_epsilon=low.epsilon)] == [
        low.model_id,
        high.model_id,
    ]
    once = [m.model_id for m in env.listed("c", features=["age"])]
    assert [m.model_id for m in env.listed("c", features=["age", "age"])] == once
    assert len(once) == 2


def test_visible_to_is_shown_to_the_publisher_and_the_admin_only(env: Env) -> None:
    private = env.publish("a", visible_to=["c", "b"], seed=305)
    public = env.publish("a", seed=306)
    views = {
        who: {m.model_id: m.visible_to for m in env.listed(principal)}
        for who, principal in (("a", "a"), ("admin", ADMIN), ("b", "b"), ("c", "c"))
    }
    for who in ("a", "admin"):
        assert views[who] == {private.model_id: ["b", "c"], public.model_id: None}
    for who in ("b", "c"):
        assert views[who] == {private.model_id: None, public.model_id: None}


def test_a_listing_has_no_card_and_get_model_has_the_stored_one(env: Env) -> None:
    published = env.publish("a", seed=307)
    (listed,) = env.listed("b")
    assert listed.card is None and listed.features == ["age", "sex"]
    with env.db.read() as s:
        one = get_model(s, env.sites["b"], published.model_id)
        row, publisher = get_model_row(s, env.sites["b"], published.model_id)
    assert publisher == "a" and one.card == json.loads(row.card_json)
    assert one.model_dump(exclude={"card"}) == listed.model_dump(exclude={"card"})


def test_get_model_row_refuses_malformed_ids(env: Env) -> None:
    with env.db.read() as s:
        for bad in (123, None, "A" * 32, "0" * 31, "0" * 33, "../" + "0" * 29):
            with pytest.raises(NotFoundError, match="not found"):
                get_model_row(s, ADMIN, bad)  # type: ignore[arg-type]


def test_hidden_models_are_not_found(env: Env) -> None:
    hidden = env.publish("a", visible_to=["b"], seed=308)
    with env.db.read() as s:
        assert get_model_row(s, env.sites["b"], hidden.model_id)[1] == "a"
        with pytest.raises(NotFoundError, match=hidden.model_id):
            get_model_row(s, env.sites["c"], hidden.model_id)


def test_model_public_reads_the_row_and_its_card(env: Env) -> None:
    published = env.publish("b", seed=309, classes=None, features=("wbc", "age"))
    with env.db.read() as s:
        row = s.get(ModelRow, published.model_id)
    assert row is not None
    view = model_public(row, "b", features=["x"], visible_to=["c"], with_card=True, created=True)
    card = json.loads(row.card_json)
    assert view.card == card and view.classes is None and view.task == "regression"
    assert (view.features, view.visible_to, view.created) == (["x"], ["c"], True)
    assert (view.size_bytes, view.weights_sha256) == (row.size_bytes, card["weights_sha256"])
    assert model_public(row, "b", features=[], visible_to=None).card is None


def test_model_visible_clause(db: Database, world: dict[str, Any]) -> None:
    def visible(principal: Principal) -> set[str]:
        with db.read() as s:
            stmt = select(ModelRow.id).where(model_visible_clause(principal))
            return set(s.execute(stmt).scalars())

    both = {world["public"], world["private"]}
    assert visible(ADMIN) == both
    assert visible(world["a"]) == both  # its publisher
    assert visible(world["b"]) == both  # listed
    assert visible(world["c"]) == {world["public"]}
