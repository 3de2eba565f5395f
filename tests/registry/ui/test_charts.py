"""Tests of pubsubml.registry.ui.charts: the SVG builders and the contribution graph."""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta

import networkx as nx
import pytest

from pubsubml.registry.ui.charts import (
    budget_bar,
    contribution_graph,
    graph_svg,
    in_strength,
    ledger_plot,
)

SVG = "{http://www.w3.org/2000/svg}"
T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


def _parse(svg: str) -> ET.Element:
    """The SVG as XML (it must be well-formed)."""
    return ET.fromstring(str(svg).replace("<svg ", '<svg xmlns="http://www.w3.org/2000/svg" ', 1))


def _points(svg: str) -> list[tuple[float, float]]:
    line = _parse(svg).find(f"{SVG}polyline")
    assert line is not None
    return [tuple(map(float, p.split(","))) for p in line.attrib["points"].split()]  # type: ignore[misc]


# ---- budget bar ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("spent", "budget", "width", "over"),
    [(0.0, 4.0, "0", False), (1.0, 4.0, "40", False), (3.8, 4.0, "152", True), (9, 4, "160", True)],
)
def test_budget_bar_width_is_the_spent_share(
    spent: float, budget: float, width: str, over: bool
) -> None:
    root = _parse(budget_bar(spent, budget))

    rects = root.findall(f"{SVG}rect")
    assert rects[0].attrib["width"] == "160"
    assert rects[1].attrib["width"] == width
    assert ("over" in rects[1].attrib["class"]) is over


def test_budget_bar_of_an_infinite_spend_is_full() -> None:
    root = _parse(budget_bar(math.inf, 4.0))

    assert root.findall(f"{SVG}rect")[1].attrib["width"] == "160"


# ---- ledger plot --------------------------------------------------------------------------
def test_ledger_plot_draws_one_vertex_per_release_rising_with_epsilon() -> None:
    points = [(T0 + timedelta(hours=h), eps) for h, eps in [(0, 0.5), (1, 0.9), (5, 1.2)]]

    svg = ledger_plot(points, 2.0)

    xy = _points(svg)
    assert len(xy) == 3
    assert xy[0][0] < xy[1][0] < xy[2][0]
    assert xy[0][1] > xy[1][1] > xy[2][1]  # SVG y grows downwards
    # x is proportional to time: 1 h of 5 h
    assert (xy[1][0] - xy[0][0]) / (xy[2][0] - xy[0][0]) == pytest.approx(0.2, abs=0.01)
    assert len(_parse(svg).findall(f"{SVG}circle")) == 3


def test_ledger_plot_places_the_budget_line_on_the_epsilon_scale() -> None:
    points = [(T0, 1.0), (T0 + timedelta(hours=1), 2.0)]

    root = _parse(ledger_plot(points, 2.0, height=260))

    budget = next(e for e in root.iter(f"{SVG}line") if e.attrib.get("class") == "budget")
    top_vertex = _points(ledger_plot(points, 2.0, height=260))[1]
    assert float(budget.attrib["y1"]) == pytest.approx(top_vertex[1], abs=0.01)


def test_ledger_plot_zooms_in_while_little_of_the_budget_is_spent() -> None:
    points = [(T0, 0.1), (T0 + timedelta(hours=1), 0.2)]

    svg = ledger_plot(points, 10.0, height=260)

    root = _parse(svg)
    assert [e.attrib["class"] for e in root.iter(f"{SVG}line")] == ["axis", "axis"]
    assert "ε budget 10: above the plot" in svg
    bottom, top = 260 - 36, 14
    assert _points(svg)[1][1] == pytest.approx(bottom - 0.2 / 0.25 * (bottom - top))


def test_ledger_plot_spreads_releases_made_at_the_same_time() -> None:
    xy = _points(ledger_plot([(T0, 0.2), (T0, 0.4), (T0, 0.6)], 1.0))

    assert xy[1][0] - xy[0][0] == pytest.approx(xy[2][0] - xy[1][0])


def test_ledger_plot_without_releases_has_axes_and_budget_only() -> None:
    root = _parse(ledger_plot([], 3.0))

    assert root.find(f"{SVG}polyline") is None
    assert {e.attrib["class"] for e in root.iter(f"{SVG}line")} == {"axis", "budget"}


def test_ledger_plot_caps_an_infinite_epsilon_at_the_top() -> None:
    xy = _points(ledger_plot([(T0, 1.0), (T0 + timedelta(1), math.inf)], 2.0, height=260))

    assert xy[1][1] == pytest.approx(14.0)  # the plot's top margin


# ---- contribution graph -------------------------------------------------------------------
def test_contribution_graph_sums_scores_per_publisher_and_drops_self_scores() -> None:
    scores = {
        "s": {"m1": 0.5, "m2": 0.25, "own": 0.9, "gone": 0.3},
        "a": {"m2": 0.4, "bad": math.nan},
    }
    publisher_of = {"m1": "a", "m2": "a", "own": "s", "bad": "b"}

    graph = contribution_graph(scores, publisher_of)

    assert sorted(graph.edges(data="weight")) == [("s", "a", 0.75)]
    assert set(graph.nodes) == {"s", "a"}


def test_in_strength_matches_networkx_weighted_in_degree() -> None:
    graph = contribution_graph(
        {"s": {"m1": 0.6, "m2": 0.2}, "t": {"m2": 0.5, "m3": 0.1}},
        {"m1": "a", "m2": "b", "m3": "s"},
    )
    reference = dict(graph.in_degree(weight="weight"))
    total = sum(reference.values())

    strength = in_strength(graph)

    assert strength == pytest.approx({n: reference[n] / total for n in graph.nodes})
    assert sum(strength.values()) == pytest.approx(1.0)


def test_in_strength_of_a_graph_without_edges_is_zero() -> None:
    graph: nx.DiGraph[str] = nx.DiGraph()
    graph.add_node("alone")

    assert in_strength(graph) == {"alone": 0.0}


def test_graph_svg_sizes_nodes_by_centrality() -> None:
    graph = contribution_graph(
        {"s": {"m1": 0.6, "m2": 0.2}, "t": {"m2": 0.1}}, {"m1": "a", "m2": "b"}
    )

    root = _parse(graph_svg(graph))

    radius = {}
    for node in root.iter(f"{SVG}g"):
        circle = node.find(f"{SVG}circle")
        assert circle is not None
        radius[node.attrib["data-site"]] = float(circle.attrib["r"])
    assert radius["a"] == pytest.approx(30.0)  # the most central node
    assert radius["a"] > radius["b"] > radius["s"] == radius["t"] == pytest.approx(8.0)
    edges = root.findall(f"{SVG}path")
    assert len(edges) == 3 and all(e.attrib["class"] == "edge" for e in edges)


def test_graph_svg_draws_reciprocal_edges_apart() -> None:
    graph = contribution_graph({"a": {"mb": 0.5}, "b": {"ma": 0.5}}, {"ma": "a", "mb": "b"})

    paths = [p.attrib["d"] for p in _parse(graph_svg(graph)).iter(f"{SVG}path")]

    controls = [re.search(r"Q([\d.-]+),([\d.-]+)", d) for d in paths if "Q" in d]
    assert len(controls) == 2 and all(controls)
    assert controls[0].group(0) != controls[1].group(0)  # type: ignore[union-attr]


def test_graph_svg_is_deterministic_and_uses_a_circular_layout() -> None:
    graph = contribution_graph({"s": {"m1": 0.6}, "t": {"m1": 0.1}}, {"m1": "a"})

    svg = graph_svg(graph, size=400)

    assert svg == graph_svg(graph, size=400)
    centres = [
        (float(c.attrib["cx"]), float(c.attrib["cy"])) for c in _parse(svg).iter(f"{SVG}circle")
    ]
    distances = [math.hypot(x - 200, y - 200) for x, y in centres]
    assert distances == pytest.approx([140.0] * 3, abs=0.02)


def test_graph_svg_escapes_names_and_handles_an_empty_graph() -> None:
    graph: nx.DiGraph[str] = nx.DiGraph()
    graph.add_edge("<b>", "a&b", weight=1.0)

    svg = graph_svg(graph)

    assert "<b>" not in svg and "&lt;b&gt;" in svg and "a&amp;b" in svg
    _parse(svg)
    empty = graph_svg(nx.DiGraph())
    assert re.fullmatch(r"<svg .*</svg>", str(empty)) and "<circle" not in empty
