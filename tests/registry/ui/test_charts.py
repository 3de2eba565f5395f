"""Tests of pubsubml.registry.ui.charts: the SVG builders and the contribution graph."""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET

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
LEFT, RIGHT, TOP, BOTTOM = 52, 640 - 16, 14, 260 - 36  # the plot's frame at the default size


def _circles(svg: str) -> list[ET.Element]:
    return [c for c in _parse(svg).iter(f"{SVG}circle") if c.attrib.get("class") == "release"]


def _budget_y(svg: str) -> float:
    line = next(e for e in _parse(svg).iter(f"{SVG}line") if e.attrib.get("class") == "budget")
    return float(line.attrib["y1"])


def test_ledger_plot_is_a_step_line_from_zero_with_one_step_per_release() -> None:
    steps = [(1, 0.5), (2, 0.9), (3, 1.2)]

    svg = ledger_plot(steps, 2.0)

    xy = _points(svg)
    assert len(xy) == 1 + 2 * len(steps)
    assert xy[0] == (LEFT, BOTTOM)  # release 0 at ε = 0, on both axes
    for k in range(1, len(steps) + 1):
        before, corner, after = xy[2 * k - 2], xy[2 * k - 1], xy[2 * k]
        assert corner[1] == before[1] and corner[0] > before[0]  # level to release k ...
        assert after[0] == corner[0] and after[1] < corner[1]  # ... then up (y grows downwards)
    # x is the release number: evenly spaced, release 3 at the right end
    expected = [LEFT + k / 3 * (RIGHT - LEFT) for k in (1, 2, 3)]
    assert [x for x, _ in xy[2::2]] == pytest.approx(expected, abs=0.01)  # two decimals
    circles = _circles(svg)
    assert [c.attrib["data-release"] for c in circles] == ["1", "2", "3"]
    assert [(float(c.attrib["cx"]), float(c.attrib["cy"])) for c in circles] == xy[2::2]


def test_ledger_plot_step_heights_are_the_spent_epsilon_on_the_budgets_scale() -> None:
    svg = ledger_plot([(1, 0.5), (2, 1.2)], 2.0)

    height = [BOTTOM - y for _, y in _points(svg)[2::2]]
    budget = BOTTOM - _budget_y(svg)
    assert [h / budget for h in height] == pytest.approx([0.5 / 2.0, 1.2 / 2.0], abs=1e-3)
    assert [float(c.attrib["data-epsilon"]) for c in _circles(svg)] == [0.5, 1.2]


def test_ledger_plot_draws_a_release_that_spent_nothing_as_a_step_of_height_zero() -> None:
    xy = _points(ledger_plot([(1, 0.5), (2, 0.5), (3, 0.7)], 2.0))

    assert len(xy) == 7
    assert xy[3][0] == xy[4][0] and xy[3][1] == xy[4][1] == xy[2][1]


def test_ledger_plot_places_sampled_releases_by_their_number() -> None:
    svg = ledger_plot([(5, 0.2), (10, 0.4)], 1.0)

    xy = _points(svg)
    assert xy[2][0] == pytest.approx((LEFT + RIGHT) / 2)  # release 5 of 10
    assert [c.attrib["data-release"] for c in _circles(svg)] == ["5", "10"]


def test_ledger_plot_labels_the_x_axis_with_release_numbers_from_zero() -> None:
    def labels(last: int) -> list[str]:
        root = _parse(ledger_plot([(last, 0.5)], 1.0))
        return [
            t.text or "" for t in root.iter(f"{SVG}text") if "release-tick" in t.attrib["class"]
        ]

    assert labels(3) == ["0", "1", "2", "3"]
    assert labels(10) == [str(k) for k in range(11)]
    assert labels(120) == [str(k) for k in range(0, 121, 20)]
    assert "release number (in charge order)" in ledger_plot([(1, 0.5)], 1.0)


def test_ledger_plot_rounds_epsilon_and_keeps_the_exact_value_on_hover() -> None:
    svg = ledger_plot([(1, 0.123456789, "m1, 2025-03-01 12:00:00 UTC")], 1.0)

    (circle,) = _circles(svg)
    title = circle.find(f"{SVG}title")
    assert title is not None
    assert (
        title.text
        == "release 1 (m1, 2025-03-01 12:00:00 UTC): spent ε 0.1235 (exactly 0.123456789)"
    )
    assert circle.attrib["data-epsilon"] == "0.123456789"


@pytest.mark.parametrize("steps", [[(0, 0.1)], [(2, 0.1), (2, 0.2)], [(3, 0.1), (1, 0.2)]])
def test_ledger_plot_refuses_release_numbers_that_do_not_increase_from_one(
    steps: list[tuple[int, float]],
) -> None:
    with pytest.raises(ValueError, match="increase from 1"):
        ledger_plot(steps, 1.0)


def test_ledger_plot_places_the_budget_line_on_the_epsilon_scale() -> None:
    svg = ledger_plot([(1, 1.0), (2, 2.0)], 2.0, height=260)

    assert _budget_y(svg) == pytest.approx(_points(svg)[-1][1], abs=0.01)


def test_ledger_plot_zooms_in_while_little_of_the_budget_is_spent() -> None:
    svg = ledger_plot([(1, 0.1), (2, 0.2)], 10.0, height=260)

    root = _parse(svg)
    assert [e.attrib["class"] for e in root.iter(f"{SVG}line")] == ["axis", "axis"]
    assert "ε budget 10.0000: above the plot" in svg
    assert _points(svg)[-1][1] == pytest.approx(BOTTOM - 0.2 / 0.25 * (BOTTOM - TOP))


def test_ledger_plot_without_releases_has_axes_and_budget_only() -> None:
    root = _parse(ledger_plot([], 3.0))

    assert root.find(f"{SVG}polyline") is None and root.find(f"{SVG}circle") is None
    assert {e.attrib["class"] for e in root.iter(f"{SVG}line")} == {"axis", "budget"}


def test_ledger_plot_caps_an_infinite_epsilon_at_the_top() -> None:
    svg = ledger_plot([(1, 1.0), (2, math.inf)], 2.0, height=260)

    assert _points(svg)[-1][1] == pytest.approx(TOP)
    assert _circles(svg)[-1].attrib["data-epsilon"] == "inf"


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
