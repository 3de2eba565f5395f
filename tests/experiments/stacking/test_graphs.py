"""The contribution graph files of a stacking federation (pfl-stacking.txt §3)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from pubsubml.experiments.stacking.graphs import write_graph

# Seed 0's weights per (subscriber, publisher), one per repeat: their mean renormalized per
# subscriber gives c0 → c1, c2: 0.5, 0.5; c1 → c0, c2: 0.75, 0.25; c2 → c0, c1: 0.5, 0.5.
SEED0 = {
    ("c0", "c1"): (0.2, 0.4),
    ("c0", "c2"): (0.3, 0.3),
    ("c1", "c0"): (0.6, 0.6),
    ("c1", "c2"): (0.1, 0.3),
    ("c2", "c0"): (0.1, 0.1),
    ("c2", "c1"): (0.1, 0.1),
}


def federation() -> tuple[pd.DataFrame, pd.DataFrame]:
    edges, clients = [], []
    for (sub, pub), weights in SEED0.items():
        for fold, w in enumerate(weights):
            edges.append({"seed": 0, "fold": fold, "client": sub, "publisher": pub, "weight": w})
    for name, share in (("c0", 0.5), ("c1", 0.3), ("c2", 0.2)):
        for fold in (0, 1):
            clients.append(
                {"seed": 0, "fold": fold, "client": name, "share": share}
                | {"self_importance": 0.1, "gain": 0.01 * fold}
            )
    base = {"public": "rf", "variant": "held_out", "a": 0.5}
    e, c = pd.DataFrame(edges).assign(**base), pd.DataFrame(clients).assign(**base)
    # rows that must be left out: another seed, a DP public kind, pooled stacking, another a
    noise = e.assign(weight=lambda f: f.weight * (f.publisher == "c2") * 100.0)
    e = pd.concat(
        [
            e,
            noise.assign(seed=1),
            noise.assign(public="dp_lr_e1"),
            noise.assign(variant="pooled"),
            noise.assign(a=1.0),
        ]
    )
    return c, e


def test_the_graph_of_seed_zero_is_renormalized_per_subscriber(tmp_path: Path) -> None:
    clients, edges = federation()
    written = write_graph("stacking-toy", clients, edges, {"a": 0.5}, "share", tmp_path, "Notes.")
    assert [p.name for p in written] == [f"stacking-toy-graph.{x}" for x in ("csv", "md", "png")]
    table = pd.read_csv(tmp_path / "stacking-toy-graph.csv")
    weight = {(r.subscriber, r.publisher): r.weight for r in table.itertuples()}
    assert weight == pytest.approx(
        {
            ("c0", "c1"): 0.5,
            ("c0", "c2"): 0.5,
            ("c1", "c0"): 0.75,
            ("c1", "c2"): 0.25,
            ("c2", "c0"): 0.5,
            ("c2", "c1"): 0.5,
        }
    )
    text = (tmp_path / "stacking-toy-graph.md").read_text()
    rows = [line for line in text.splitlines() if line.startswith("| ") and "rank" not in line]
    # in-strength 1.25 / 1.0 / 0.75 of a total 3: c0 first
    assert [r.split(" | ")[1] for r in rows] == ["c0", "c1", "c2"]
    assert rows[0].split(" | ")[3] == f"{1.25 / 3:.3f}"
    assert rows[0].split(" | ")[2] == "0.500"  # the client's share
    assert "Seed 0, a=0.5, public `rf`" in text and text.rstrip().endswith("Notes.")
