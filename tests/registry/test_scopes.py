"""Registered data scopes: a release may name only the chunks its site declared beforehand."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sqlalchemy import text

from pubsubml.registry.infrastructure.database import Database
from pubsubml.registry.migrate import head_revision, upgrade


def _scoped(registry: Any, support: Any, seed: int, scope: list[str]) -> Any:
    art = registry.artifacts("a", seed=seed)
    return registry.artifacts.resign(
        art.card, art.weights, "a", privacy=support.privacy_record(data_scope=scope)
    )


def test_a_release_may_name_only_registered_chunks(registry: Any, support: Any) -> None:
    first = _scoped(registry, support, 40, ["2024-01"])
    before = registry.snapshot()
    refused = registry.publish(first, site="a")
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"] == "invalid_privacy"
    assert "not registered" in refused.json()["detail"]
    assert registry.snapshot() == before

    url = "/v1/sites/a/scopes"
    r = registry.client.post(
        url, json={"scopes": ["2024-01", "2024-02"]}, headers=registry.auth("a")
    )
    assert r.status_code == 200, r.text
    assert r.json()["new"] == ["2024-01", "2024-02"]
    again = registry.client.post(url, json={"scopes": ["2024-02"]}, headers=registry.auth("a"))
    assert again.json()["new"] == [] and len(again.json()["scopes"]) == 2
    assert registry.publish(first, site="a").status_code == 201
    second = _scoped(registry, support, 41, ["2024-02"])
    assert registry.publish(second, site="a").status_code == 201
    ledger = registry.client.get("/v1/sites/a/ledger", headers=registry.auth("a")).json()
    assert [s["label"] for s in ledger["scopes"]] == ["2024-01", "2024-02"]
    # two disjoint chunks: parallel composition, the spent ε is one release's
    assert ledger["spent_epsilon"] == max(r["epsilon"] for r in ledger["releases"])


def test_only_the_site_registers_its_chunks_and_labels_are_checked(registry: Any) -> None:
    url = "/v1/sites/a/scopes"
    body = {"scopes": ["q1"]}
    before = registry.snapshot()
    assert registry.client.post(url, json=body, headers=registry.auth("b")).status_code == 403
    assert registry.client.post(url, json=body, headers=registry.admin).status_code == 403
    for bad in ([], [""], ["x" * 129], ["tab\there"], ["ok"] * 257, "q1"):
        r = registry.client.post(url, json={"scopes": bad}, headers=registry.auth("a"))
        assert r.status_code == 422, (bad, r.text)
    assert registry.snapshot() == before
    assert registry.client.get(url, headers=registry.auth("b")).status_code == 403
    assert registry.client.get(url, headers=registry.admin).json()["scopes"] == []
    assert registry.client.get("/v1/sites/nobody/scopes", headers=registry.admin).status_code == 404


def test_migration_registers_the_chunks_existing_releases_named(tmp_path: Path) -> None:
    db = Database(f"sqlite:///{tmp_path / 'old.db'}")
    try:
        upgrade(db, "0001")
        with db.engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO sites (name, roles, epsilon_budget, delta_budget, token_hash, "
                    "created_at) VALUES ('a', 'both', 10, 1e-5, 'h', '2025-01-01 00:00:00')"
                )
            )
            for i, scope in enumerate((["jan"], ["jan", "feb"], None)):
                conn.execute(
                    text(
                        "INSERT INTO ledger_entries (site_id, release_id, description, "
                        "events_json, scope_json, epsilon, delta, created_at) VALUES "
                        "(1, :rid, '', '[]', :scope, 1, 1e-5, :t)"
                    ),
                    {
                        "rid": f"r{i}",
                        "scope": None if scope is None else json.dumps(scope),
                        "t": f"2025-01-0{i + 1} 00:00:00",
                    },
                )
        assert upgrade(db) == head_revision()
        with db.engine.connect() as conn:
            rows = conn.execute(text("SELECT label FROM site_scopes ORDER BY created_at")).all()
        assert [r[0] for r in rows] == ["jan", "feb"]
    finally:
        db.dispose()
