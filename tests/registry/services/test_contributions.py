"""Tests of pubsubml.registry.services.contributions: storing and listing contribution scores."""

from __future__ import annotations

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
from pubsubml.registry.auth import ADMIN, Principal
from pubsubml.registry.infrastructure.artifact_store import ArtifactStore
from pubsubml.registry.infrastructure.database import Database
from pubsubml.registry.infrastructure.upload_lock import UploadLock
from pubsubml.registry.schemas import ContributionPublic, ContributionReport, SiteCreate
from pubsubml.registry.services.contributions import list_contributions, report_contributions
from pubsubml.registry.services.features import add_features
from pubsubml.registry.services.publish import publish_model
from pubsubml.registry.services.sites import create_site
from pubsubml.registry.tables import SiteRow


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
    sites: dict[str, Principal]
    models: dict[str, str]

    def principal(self, who: str | Principal) -> Principal:
        return self.sites[who] if isinstance(who, str) else who

    def report(
        self, who: str | Principal, subscriber: str, scores: dict[str, float]
    ) -> list[ContributionPublic]:
        body = ContributionReport(subscriber=subscriber, scores=scores)
        with self.db.write() as s:
            return report_contributions(s, self.principal(who), body)

    def listed(self, who: str | Principal, **filters: Any) -> list[tuple[str, str, float]]:
        with self.db.read() as s:
            found = list_contributions(s, self.principal(who), **filters)
        return [(c.subscriber, c.model_id, c.score) for c in found]


@pytest.fixture
def env(sqlite_template: Path, tmp_path: Path, artifacts: Any, support: Any) -> Iterator[Env]:
    """Sites a, b, c; a published models ``one`` and ``two`` (public) and ``hidden`` (for b)."""
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
    store = ArtifactStore(tmp_path / "store")
    models = {}
    for key, seed, visible_to in (("one", 500, None), ("two", 501, None), ("hidden", 502, ["b"])):
        art = artifacts("a", seed=seed)
        models[key] = publish_model(
            db,
            store,
            sites["a"],
            art.card.to_json(),
            art.weights,
            lock=UploadLock(db, store.root),
            validator=LocalValidator(),  # type: ignore[arg-type]
            visible_to=visible_to,
            max_weights_bytes=1 << 20,
        ).model_id
    yield Env(db, sites, models)
    db.dispose()


def test_a_report_is_stored_as_one_report_ordered_by_model(env: Env) -> None:
    one, two = env.models["one"], env.models["two"]
    stored = env.report("b", "b", {max(one, two): 0.3, min(one, two): 0.6})
    assert [(c.model_id, c.score) for c in stored] == [(min(one, two), 0.6), (max(one, two), 0.3)]
    assert len({c.report_id for c in stored}) == 1 and len(stored[0].report_id) == 32
    assert len({c.created_at for c in stored}) == 1 and stored[0].subscriber == "b"
    assert sorted(env.listed(ADMIN)) == sorted(("b", c.model_id, c.score) for c in stored)


def test_listing_is_newest_report_first_with_filters(env: Env) -> None:
    one, two = env.models["one"], env.models["two"]
    env.report("b", "b", {one: 0.5})
    env.report("c", "c", {one: 0.2})
    env.report("b", "b", {two: 0.4})
    assert env.listed(ADMIN) == [("b", two, 0.4), ("c", one, 0.2), ("b", one, 0.5)]
    assert env.listed("a", subscriber="b") == [("b", two, 0.4), ("b", one, 0.5)]
    assert env.listed("c", model_id=one) == [("c", one, 0.2), ("b", one, 0.5)]
    assert env.listed("c", limit=1) == [("b", two, 0.4)]
    assert env.listed("c", subscriber="nobody") == []


def test_scores_of_a_hidden_model_are_listed_only_to_those_who_see_it(env: Env) -> None:
    hidden = env.models["hidden"]
    env.report("b", "b", {hidden: 0.9})
    expected = [("b", hidden, 0.9)]
    assert env.listed("a") == env.listed("b") == env.listed(ADMIN) == expected
    assert env.listed("c") == []


def test_the_admin_reports_with_the_subscribers_view(env: Env) -> None:
    hidden = env.models["hidden"]
    with pytest.raises(NotFoundError, match=hidden):
        env.report(ADMIN, "c", {hidden: 0.5})  # c may not see it, whoever reports
    (stored,) = env.report(ADMIN, "b", {hidden: 0.5})
    assert stored.subscriber == "b"


def test_a_report_naming_an_unknown_model_stores_nothing(env: Env) -> None:
    unknown = "e" * 32
    with pytest.raises(NotFoundError, match=unknown):
        env.report("b", "b", {env.models["one"]: 0.1, unknown: 0.2})
    assert env.listed(ADMIN) == []
