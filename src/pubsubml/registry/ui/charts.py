"""Inline SVG for the web dashboard, built on the server: budget bars, the ledger's spent ε by
release (a step plot) and the contribution graph.

Every builder returns :class:`markupsafe.Markup` ready to be placed in a template.  Text that
comes from the registry (site names, model ids) is escaped; numbers are formatted here.  Nothing
is loaded by the browser: no script, no font, no external image.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import networkx as nx
from markupsafe import Markup, escape

from pubsubml.registry.ui.formatting import format_epsilon

__all__ = [
    "LedgerStep",
    "budget_bar",
    "contribution_graph",
    "graph_svg",
    "in_strength",
    "ledger_plot",
]

_PAD_LEFT, _PAD_RIGHT, _PAD_TOP, _PAD_BOTTOM = 52, 16, 14, 36


def _num(value: float) -> str:
    """A coordinate with two decimals (no exponent, no trailing zeros)."""
    return f"{value:.2f}".rstrip("0").rstrip(".")


def budget_bar(spent: float, budget: float, *, width: int = 160, height: int = 14) -> Markup:
    """A horizontal bar: the share of the ε budget spent.

    Parameters
    ----------
    spent, budget : float
        Spent ε and the declared ε budget (> 0).
    width, height : int
        Size in pixels.

    Returns
    -------
    Markup
        ``<svg class="bar">`` whose ``rect.spent`` is ``width · min(spent / budget, 1)`` wide; it
        has the class ``over`` from 90 % of the budget on.

    Examples
    --------
    >>> 'width="40"' in budget_bar(1.0, 4.0)
    True
    """
    share = min(max(spent / budget, 0.0), 1.0) if budget > 0 and math.isfinite(spent) else 1.0
    level = "spent over" if share >= 0.9 else "spent"
    label = f"ε spent {format_epsilon(spent)} of {format_epsilon(budget)} ({100 * share:.0f} %)"
    return Markup(
        f'<svg class="bar" role="img" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}"><title>{escape(label)}</title>'
        f'<rect class="track" width="{width}" height="{height}" rx="3"/>'
        f'<rect class="{level}" width="{_num(width * share)}" height="{height}" rx="3"/></svg>'
    )


class LedgerStep(NamedTuple):
    """One release on the ledger plot.

    Attributes
    ----------
    release : int
        How many releases are charged once it is (1 for the first release, in charge order).
    epsilon : float
        The site's spent ε after it, as the ledger composes it.
    label : str, default=""
        What the hover text says of it (its id and time).
    """

    release: int
    epsilon: float
    label: str = ""


def _epsilon_scale(top: float, budget: float) -> float:
    """Upper end of the ε axis: the budget (and the largest ε) with 5 % headroom, or, while
    less than a quarter of the budget is spent, the largest ε with 25 % headroom."""
    if top > 0 and top < budget / 4:
        return top * 1.25
    return max(budget, top, 1e-12) * 1.05


def _release_ticks(last: int) -> list[int]:
    """Release numbers labelled under the x axis: 0 to ``last`` by 1, 2, 5, 10, 20, 50, …,
    at most 11 labels."""
    step, k = 1, 0
    while last / step > 10:
        k += 1
        step = (1, 2, 5)[k % 3] * 10 ** (k // 3)
    return list(range(0, last + 1, step))


def _steps_svg(
    steps: Sequence[LedgerStep],
    x: Callable[[float], float],
    y: Callable[[float], float],
    y_max: float,
) -> list[str]:
    """The step line from (0, 0) and one circle per release at the top of its jump."""
    coords = [(x(0), y(0.0))]
    for step in steps:
        level = y(step.epsilon if math.isfinite(step.epsilon) else y_max)
        coords += [(x(step.release), coords[-1][1]), (x(step.release), level)]
    line = " ".join(f"{_num(cx)},{_num(cy)}" for cx, cy in coords)
    parts = [f'<polyline class="cumulative" points="{line}"/>']
    radius = 3.5 if len(steps) <= 60 else 2.0
    for step, (cx, cy) in zip(steps, coords[2::2], strict=True):
        eps = float(step.epsilon)
        about = f" ({step.label})" if step.label else ""
        label = f"release {step.release}{about}: spent ε {format_epsilon(eps)} (exactly {eps!r})"
        parts.append(
            f'<circle class="release" cx="{_num(cx)}" cy="{_num(cy)}" r="{radius}" '
            f'data-release="{int(step.release)}" data-epsilon="{eps!r}">'
            f"<title>{escape(label)}</title></circle>"
        )
    return parts


def _checked_steps(steps: Sequence[LedgerStep | tuple[int, float]]) -> list[LedgerStep]:
    """``steps`` as :class:`LedgerStep` s, their release numbers checked.

    Raises
    ------
    ValueError
        Release numbers that are not increasing integers from 1 on.
    """
    drawn = [LedgerStep(*s) for s in steps]
    numbers = [s.release for s in drawn]
    if any(n < 1 for n in numbers[:1]) or any(b <= a for a, b in itertools.pairwise(numbers)):
        raise ValueError(f"release numbers must increase from 1 on, got {numbers[:5]}…")
    return drawn


@dataclass(frozen=True)
class _PlotFrame:
    """The plot area of :func:`ledger_plot` in pixels, and its scales: releases 0 to ``last``
    along x, ε 0 to ``y_max`` up y."""

    left: float
    right: float
    top: float
    bottom: float
    last: int
    y_max: float

    def x(self, release: float) -> float:
        """The x pixel of a release number."""
        return self.left + release / max(self.last, 1) * (self.right - self.left)

    def y(self, eps: float) -> float:
        """The y pixel of a spent ε (an ε above the axis is drawn at its top)."""
        return self.bottom - min(eps, self.y_max) / self.y_max * (self.bottom - self.top)


def _axes_svg(frame: _PlotFrame, budget: float) -> list[str]:
    """Both axes, the ε ticks (0, half the axis, the budget or the axis' top), the release
    ticks and the x axis' label."""
    left, right, top, bottom = frame.left, frame.right, frame.top, frame.bottom
    parts = [
        f'<line class="axis" x1="{left}" y1="{bottom}" x2="{right}" y2="{bottom}"/>',
        f'<line class="axis" x1="{left}" y1="{top}" x2="{left}" y2="{bottom}"/>',
    ]
    y_max = frame.y_max
    for tick in (0.0, y_max / 2, budget if budget <= y_max else y_max):
        parts.append(
            f'<text class="tick" x="{left - 6}" y="{_num(frame.y(tick) + 4)}" '
            f'text-anchor="end">{tick:.3g}</text>'
        )
    for release in _release_ticks(frame.last):
        parts.append(
            f'<text class="tick release-tick" x="{_num(frame.x(release))}" y="{bottom + 15}" '
            f'text-anchor="middle">{release}</text>'
        )
    parts.append(
        f'<text class="tick" x="{_num((left + right) / 2)}" y="{bottom + 30}" '
        'text-anchor="middle">release number (in charge order)</text>'
    )
    return parts


def _budget_svg(frame: _PlotFrame, budget: float) -> str:
    """The budget's dashed line, or a note when it lies above the ε axis."""
    if budget <= frame.y_max:
        level = _num(frame.y(budget))
        return (
            f'<line class="budget" x1="{frame.left}" y1="{level}" x2="{frame.right}" '
            f'y2="{level}"><title>ε budget {format_epsilon(budget)}</title></line>'
        )
    return (
        f'<text class="tick budget-note" x="{frame.right}" y="{frame.top + 4}" text-anchor="end">'
        f"ε budget {format_epsilon(budget)}: above the plot</text>"
    )


def ledger_plot(
    steps: Sequence[LedgerStep | tuple[int, float]],
    budget: float,
    *,
    width: int = 640,
    height: int = 260,
) -> Markup:
    """Cumulative spent ε by release, as a step plot from 0, with the budget as a dashed line.

    x is the number of releases charged (0, 1, 2, … in charge order) and y the spent ε once
    they are: the line starts at (0, 0) and, at each release, runs level to the release's
    number, then jumps to the ε spent after it (a jump of height 0 when the release did not
    raise the spent ε, e.g. a release on another disjoint chunk).

    Parameters
    ----------
    steps : sequence of LedgerStep or (int, float)
        Release number (≥ 1, increasing) and the spent ε after it, in charge order; numbers may
        skip (a long ledger sampled), the line then stays level over the releases left out.
    budget : float
        The site's ε budget.
    width, height : int
        Size in pixels.

    Returns
    -------
    Markup
        ``<svg class="ledger-plot">`` with ``polyline.cumulative`` through 1 + 2·len(steps)
        points, a ``circle.release`` per step (``data-release``, ``data-epsilon`` with the
        unrounded ε, and a ``<title>``), ``line.budget`` and axis labels.  While less than a
        quarter of the budget is spent, the ε axis ends above the largest ε and a note gives
        the budget instead of its line; an infinite ε is drawn at the top of the axis.

    Raises
    ------
    ValueError
        Release numbers that are not increasing integers from 1 on.

    Examples
    --------
    >>> svg = ledger_plot([(1, 0.5), (2, 0.8)], 4.0)
    >>> svg.count("<circle"), "<polyline" in svg
    (2, True)
    """
    drawn = _checked_steps(steps)
    finite = [s.epsilon for s in drawn if math.isfinite(s.epsilon)]
    frame = _PlotFrame(
        left=_PAD_LEFT,
        right=width - _PAD_RIGHT,
        top=_PAD_TOP,
        bottom=height - _PAD_BOTTOM,
        last=drawn[-1].release if drawn else 0,
        y_max=_epsilon_scale(max(finite, default=0.0), budget),
    )
    parts = [
        f'<svg class="ledger-plot" role="img" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}"><title>spent ε by release</title>',
        *_axes_svg(frame, budget),
        _budget_svg(frame, budget),
    ]
    if drawn:
        parts += _steps_svg(drawn, frame.x, frame.y, frame.y_max)
    parts.append("</svg>")
    return Markup("".join(parts))


def contribution_graph(
    scores: Mapping[str, Mapping[str, float]], publisher_of: Mapping[str, str]
) -> nx.DiGraph[str]:
    """The contribution graph: an edge subscriber → publisher weighted by the subscriber's scores.

    Parameters
    ----------
    scores : mapping of subscriber to {model id: score}
    publisher_of : mapping of model id to publisher
        Scores of models missing from it, and a site's scores of its own models, are left out.

    Returns
    -------
    networkx.DiGraph
        Edge attribute ``weight``: the sum of the subscriber's scores of that publisher's models.

    Examples
    --------
    >>> g = contribution_graph({"s": {"m1": 0.6, "m2": 0.2}}, {"m1": "a", "m2": "b"})
    >>> sorted(g.edges(data="weight"))
    [('s', 'a', 0.6), ('s', 'b', 0.2)]
    """
    graph: nx.DiGraph[str] = nx.DiGraph()
    for subscriber, given in sorted(scores.items()):
        graph.add_node(subscriber)
        for model_id, score in sorted(given.items()):
            publisher = publisher_of.get(model_id)
            if publisher is None or publisher == subscriber or not math.isfinite(score):
                continue
            old = graph.get_edge_data(subscriber, publisher, default={"weight": 0.0})["weight"]
            graph.add_edge(subscriber, publisher, weight=old + float(score))
    return graph


def in_strength(graph: nx.DiGraph[str]) -> dict[str, float]:
    """Each node's weighted in-degree (the scores others gave it), normalized to sum to 1.

    Examples
    --------
    >>> g = contribution_graph({"s": {"m1": 0.6, "m2": 0.2}}, {"m1": "a", "m2": "b"})
    >>> {k: round(v, 2) for k, v in in_strength(g).items()}
    {'s': 0.0, 'a': 0.75, 'b': 0.25}
    """
    strength = {str(n): float(s) for n, s in graph.in_degree(weight="weight")}
    total = sum(strength.values())
    return {n: (s / total if total > 0 else 0.0) for n, s in strength.items()}


def _toward(p: tuple[float, float], q: tuple[float, float], r: float) -> tuple[float, float]:
    """The point at distance ``r`` from ``p`` in the direction of ``q``."""
    d = math.hypot(q[0] - p[0], q[1] - p[1]) or 1.0
    return (p[0] + (q[0] - p[0]) / d * r, p[1] + (q[1] - p[1]) / d * r)


def _edge_svg(
    a: tuple[float, float],
    b: tuple[float, float],
    radii: tuple[float, float],
    width: float,
    label: str,
) -> str:
    """A curve from node ``a`` to node ``b`` (radii ``radii``), bent to its left so that the
    edges a → b and b → a stay apart; it starts and ends at the nodes' borders."""
    dist = math.hypot(b[0] - a[0], b[1] - a[1]) or 1.0
    bend = 0.15 * dist
    control = (
        (a[0] + b[0]) / 2 - (b[1] - a[1]) / dist * bend,
        (a[1] + b[1]) / 2 + (b[0] - a[0]) / dist * bend,
    )
    start, end = _toward(a, control, radii[0] + 2), _toward(b, control, radii[1] + 3)
    path = (
        f"M{_num(start[0])},{_num(start[1])} Q{_num(control[0])},{_num(control[1])} "
        f"{_num(end[0])},{_num(end[1])}"
    )
    return (
        f'<path class="edge" d="{path}" stroke-width="{_num(width)}" marker-end="url(#arrow)">'
        f"<title>{escape(label)}</title></path>"
    )


def graph_svg(graph: nx.DiGraph[str], *, size: int = 520) -> Markup:
    """The contribution graph on a circle (``nx.circular_layout``, nodes in name order).

    A node's radius grows with its in-strength centrality (:func:`in_strength`), from 8 to 30
    pixels; an edge (a curve, so that a → b and b → a stay apart) is wider the larger its
    weight.  Each node and edge has a ``<title>``.

    Returns
    -------
    Markup
        ``<svg class="graph">`` with one ``g.node`` (``data-site``, ``data-centrality``) per node.
    """
    nodes = sorted(str(n) for n in graph.nodes)
    header = (
        f'<svg class="graph" role="img" width="{size}" height="{size}" '
        f'viewBox="0 0 {size} {size}"><title>contribution graph</title>'
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" '
        'markerUnits="userSpaceOnUse" markerWidth="11" markerHeight="11" orient="auto"><path d="M0,0 L10,5 L0,10 z"/></marker>'
        "</defs>"
    )
    if not nodes:
        return Markup(header + "</svg>")
    ordered: nx.DiGraph[str] = nx.DiGraph()
    ordered.add_nodes_from(nodes)
    layout = nx.circular_layout(ordered, scale=size / 2 - 60, center=(size / 2, size / 2))
    pos = {n: (float(layout[n][0]), float(layout[n][1])) for n in nodes}
    strength = in_strength(graph)
    top = max(strength.values(), default=0.0) or 1.0
    radius = {n: 8.0 + 22.0 * strength.get(n, 0.0) / top for n in nodes}
    heavy = max((float(w) for _, _, w in graph.edges(data="weight", default=0.0)), default=1.0)
    parts = [header]
    for u, v, w in sorted(graph.edges(data="weight", default=0.0)):
        share = float(w) / heavy if heavy > 0 else 0.0
        label = f"{u} → {v}: {float(w):.3g}"
        parts.append(_edge_svg(pos[u], pos[v], (radius[u], radius[v]), 0.8 + 4.0 * share, label))
    for n in nodes:
        x, y = pos[n]
        label = f"{n}: in-strength {strength.get(n, 0.0):.3f}"
        parts.append(
            f'<g class="node" data-site="{escape(n)}" data-centrality="{strength.get(n, 0.0):.4f}">'
            f'<circle cx="{_num(x)}" cy="{_num(y)}" r="{_num(radius[n])}">'
            f"<title>{escape(label)}</title></circle>"
            f'<text x="{_num(x)}" y="{_num(y + radius[n] + 14)}" text-anchor="middle">'
            f"{escape(n)}</text></g>"
        )
    parts.append("</svg>")
    return Markup("".join(parts))
