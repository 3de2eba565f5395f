"""Tests of pubsubml.registry.services.publish_checks: card parsing and the checks, which
write nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sqlalchemy import select, update

from pubsubml.errors import (
    DataValidationError,
    NotFoundError,
    PermissionDeniedError,
    SignatureError,
    UntrustedArtifactError,
)
from pubsubml.privacy.accountants import compute_epsilon
from pubsubml.registry.auth import ADMIN, Principal
from pubsubml.registry.schemas import ModelPublic, SubscriptionCreate
from pubsubml.registry.services.feed_reader import read_deliveries
from pubsubml.registry.services.publish_checks import Publication, parse_card
from pubsubml.registry.services.subscriptions import create_subscription
from pubsubml.registry.tables import EventRow, LedgerEntryRow, ModelRow, SiteRow
from registry.services.conftest import Env


# ---- parse_card ---------------------------------------------------------------------------
def test_parse_card_accepts_text_and_bytes(artifacts: Any) -> None:
    card = artifacts("a", seed=200).card
    assert parse_card(card.to_json()) == card
    assert parse_card(card.to_json().encode()) == card


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        (b"{not json", "card: Invalid JSON"),
        (b"[1]", "card: Input should be an object"),
        (b"{}", "model_id: Field required"),
    ],
)
def test_parse_card_names_the_problem(text: bytes, fragment: str) -> None:
    with pytest.raises(DataValidationError, match=r"^malformed model card: ") as info:
        parse_card(text)
    assert fragment in str(info.value)


def test_parse_card_lists_at_most_five_problems_and_names_nested_fields(artifacts: Any) -> None:
    with pytest.raises(DataValidationError) as info:
        parse_card("{}")
    assert str(info.value).count("Field required") == 5
    data = json.loads(artifacts("a", seed=200).card.to_json())
    data["privacy"]["epsilon"] = "a lot"
    with pytest.raises(DataValidationError, match=r"privacy\.epsilon: "):
        parse_card(json.dumps(data))


def test_parse_card_refuses_an_oversized_card() -> None:
    with pytest.raises(UntrustedArtifactError, match="limit"):
        parse_card(" " * (2 << 20))


# ---- prepare_publication -------------------------------------------------------------------
def test_prepare_checks_everything_and_writes_nothing(env: Env) -> None:
    art = env.artifacts("a", seed=201)
    before = env.snapshot()
    pub = env.prepare(art, "a", visible_to=["c", "b", "b"])
    assert isinstance(pub, Publication)
    assert env.snapshot() == before and env.validator.calls == 1
    expected = compute_epsilon(list(art.card.privacy.events), art.card.privacy.delta)
    assert pub.epsilon == pytest.approx(expected)
    assert (
        pub.card == art.card and pub.weights == art.weights and pub.card_json == art.card.to_json()
    )
    assert pub.site_id == env.sites["a"].site_id and pub.ledger_size == 0
    assert pub.visible_to == [env.sites["b"].site_id, env.sites["c"].site_id]
    assert pub.release.release_id == art.card.model_id


def test_prepare_counts_earlier_releases(env: Env) -> None:
    first = env.prepare(env.artifacts("a", seed=202), "a")
    assert isinstance(first, Publication)
    env.commit(first, "a")
    second = env.prepare(env.artifacts("a", seed=203), "a")
    assert isinstance(second, Publication) and second.ledger_size == 1


def test_an_already_published_model_is_returned_without_validation(env: Env) -> None:
    art = env.artifacts("a", seed=204)
    pub = env.prepare(art, "a")
    assert isinstance(pub, Publication)
    env.commit(pub, "a")
    calls = env.validator.calls
    again = env.prepare(art, "a")
    assert isinstance(again, ModelPublic)
    assert again.created is False and again.model_id == art.card.model_id
    assert env.validator.calls == calls


def test_only_publishing_sites_publish(env: Env) -> None:
    reader = env.add_site("reader", roles="subscriber")
    art = env.artifacts("reader", seed=205)
    for principal in (ADMIN, reader):
        with pytest.raises(PermissionDeniedError, match="may not publish"):
            env.prepare(art, principal)
    assert env.validator.calls == 0


def test_a_site_without_a_registered_key_cannot_publish(env: Env) -> None:
    with env.db.write() as s:
        s.execute(update(SiteRow).where(SiteRow.name == "a").values(public_key=None, key_id=None))
    with pytest.raises(SignatureError, match="no registered public key"):
        env.prepare(env.artifacts("a", seed=206), "a")


def test_a_site_that_is_not_registered_cannot_publish(env: Env) -> None:
    ghost = Principal(kind="site", site_id=10_000, name="ghost", roles="both")  # type: ignore[arg-type]
    with pytest.raises(NotFoundError, match="ghost"):
        env.prepare(env.artifacts("ghost", seed=207), ghost)
    assert env.validator.calls == 0


# ---- commit_publication --------------------------------------------------------------------
def test_commit_inserts_model_event_ledger_entry_and_deliveries(env: Env) -> None:
    subs = {}
    for name in ("b", "c"):
        body = SubscriptionCreate(channel="age", task="classification")
        with env.db.write() as s:
            subs[name] = create_subscription(s, env.sites[name], body).id
    art = env.artifacts("a", seed=207)
    pub = env.prepare(art, "a", visible_to=["b"])
    assert isinstance(pub, Publication)
    model = env.commit(pub, "a")
    assert model.created is True and model.visible_to == ["b"] and model.epsilon == pub.epsilon
    with env.db.read() as s:
        row = s.get(ModelRow, art.card.model_id)
        assert row is not None and env.store.read(row.storage_key) == art.weights
        event = s.execute(select(EventRow).where(EventRow.model_id == row.id)).scalar_one()
        assert (event.kind, event.position) == ("model.published", row.position)
        entry = s.execute(select(LedgerEntryRow)).scalar_one()
        assert (entry.release_id, entry.model_id) == (row.id, row.id)
        assert entry.epsilon == pub.epsilon
        ((cursor, model_id, card_json),) = read_deliveries(s, subs["b"], after=0, limit=10)
        assert model_id == row.id and cursor > row.position and card_json == art.card.to_json()
        assert read_deliveries(s, subs["c"], after=0, limit=10) == []
