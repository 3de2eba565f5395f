"""Tests of pubsubml.registry.services.card_cache."""

from __future__ import annotations

from pubsubml.registry.services.card_cache import CardCache


def test_a_card_cache_stays_within_its_bound() -> None:
    cards = CardCache(max_bytes=100)
    for i in range(50):
        cards.put(f"m{i}", "x" * 30)
    held = cards.get_many(f"m{i}" for i in range(50))
    assert sorted(held) == ["m47", "m48", "m49"]  # 3 × 30 ≤ 100: the most recent three
    cards.put("huge", "x" * 101)  # larger than the bound: not kept, nothing dropped for it
    assert cards.get_many(["huge", "m49"]) == {"m49": "x" * 30}
