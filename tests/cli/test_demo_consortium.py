"""The demo's consortium: site sizes, feature subsets and each subscriber's fresh rows."""

from __future__ import annotations

from pubsubml.cli.demo_consortium import PUBLISHERS, SUBSCRIBERS, DemoConfig, demo_data

SMALL = DemoConfig(publisher_rows=50, subscriber_rows=20, test_rows=30)


def test_every_site_gets_its_rows_and_every_subscriber_fresh_ones() -> None:
    data, parts, fresh = demo_data(0, SMALL)
    assert set(parts) == {*PUBLISHERS, *SUBSCRIBERS} and set(fresh) == set(SUBSCRIBERS)
    assert all(len(parts[p]) == 50 for p in PUBLISHERS)
    assert all(len(parts[s]) == 20 and len(fresh[s]) == 30 for s in SUBSCRIBERS)
    assert data.classes is not None
    assert len(data) == 4 * 50 + 2 * 20 + 2 * 30


def test_the_split_is_disjoint_and_seeded() -> None:
    _, parts, fresh = demo_data(3, SMALL)
    rows = [tuple(r) for d in (*parts.values(), *fresh.values()) for r in d.X.to_numpy()]
    assert len(set(rows)) == len(rows)
    _, again, _ = demo_data(3, SMALL)
    assert all(again[n].X.equals(parts[n].X) for n in parts)


def test_every_feature_subset_is_of_the_schema() -> None:
    data, _, _ = demo_data(0, SMALL)
    names = set(data.schema.names)
    assert all(set(f) <= names for f in PUBLISHERS.values())
    assert all(set(f) <= names for f, _ in SUBSCRIBERS.values())
