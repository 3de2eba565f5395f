"""Contribution evaluation: how much each subscribed model helped a subscriber (pfl-stacking.txt §3).

A fitted :class:`~pubsubml.methods.pubsub.customizer.Customizer` (or stacking personalizer) has one block of
meta-features per selected model, so feature importance of the fusion model f_c, summed per block,
scores each model's contribution.  Scores are normalized per subscriber to sum to 1; the own model
M^s takes part, and its share is the subscriber's "self-importance".  Subscribers may report their
scores through the :class:`~pubsubml.hub.Hub`; the reports form a weighted directed contribution
graph (subscriber → publisher) whose node centrality ranks the publishers.

The scores are **not differentially private**: they are computed, without noise, from a fusion
model fitted on the subscriber's private rows, and their sensitivity to one row is not bounded
for a fitted meta-model.  Customizing costs no privacy budget because nothing leaves the site;
reporting makes something leave it.  :meth:`ContributionReport.report` therefore refuses unless
the subscriber opts in with ``disclose=True``, and no ε is claimed for a report.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import networkx as nx
import numpy as np
import pandas as pd
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from pubsubml.errors import PrivacyError
from pubsubml.hub import Hub
from pubsubml.methods.pubsub.customizer import OWN_ID

__all__ = [
    "CENTRALITIES",
    "CONTRIBUTION_METHODS",
    "ContributionReport",
    "contribution_graph",
    "contribution_rows",
    "contribution_scores",
    "rank_publishers",
]


def _per_block(customizer: Any, values: np.ndarray) -> np.ndarray:
    return np.array([float(values[b].sum()) for b in customizer.meta_blocks_])


def _coefficients(customizer: Any, X: Any, y: Any, n_repeats: int, seed: int) -> np.ndarray:
    """|coefficient| × std of the meta-feature on Cus: the coefficient on standardized outputs."""
    coef = np.abs(np.atleast_2d(np.asarray(customizer.fusion_model_.coef_, dtype=np.float64)))
    return _per_block(customizer, coef.sum(axis=0) * customizer.meta_std_)


def _impurity(customizer: Any, X: Any, y: Any, n_repeats: int, seed: int) -> np.ndarray:
    """Mean decrease in impurity of a forest fusion model (pfl-stacking.txt §4)."""
    return _per_block(customizer, np.asarray(customizer.fusion_model_.feature_importances_))


def _permutation(customizer: Any, X: Any, y: Any, n_repeats: int, seed: int) -> np.ndarray:
    """Drop of the fusion model's score when one model's whole output block is permuted."""
    if X is None or y is None:
        raise ValueError("permutation contributions need data: pass X and y (preferably held out)")
    meta = customizer.meta_features(X)
    fusion = customizer.fusion_model_
    y_arr = np.asarray(y).reshape(-1)
    if customizer.task == "classification":
        index = {c: i for i, c in enumerate(np.asarray(customizer.classes_).tolist())}
        y_arr = np.array([index[v] for v in y_arr.tolist()])
    base = float(fusion.score(meta, y_arr))
    rng = check_random_state(seed)
    drops = np.zeros(len(customizer.meta_blocks_))
    for j, block in enumerate(customizer.meta_blocks_):
        for _ in range(n_repeats):
            shuffled = meta.copy()
            shuffled[:, block] = meta[rng.permutation(len(meta))][:, block]
            drops[j] += base - float(fusion.score(shuffled, y_arr))
    return np.clip(drops / n_repeats, 0.0, None)


CONTRIBUTION_METHODS: dict[str, Callable[[Any, Any, Any, int, int], np.ndarray]] = {
    "coefficients": _coefficients,
    "impurity": _impurity,
    "permutation": _permutation,
}


def contribution_scores(
    customizer: Any,
    *,
    method: str = "auto",
    X: pd.DataFrame | None = None,
    y: Any = None,
    n_repeats: int = 5,
    random_state: int = 0,
) -> dict[str, float]:
    """Normalized contribution of every candidate model of a fitted customizer.

    Parameters
    ----------
    customizer : fitted Customizer
    method : {"auto", "coefficients", "impurity", "permutation"}, default="auto"
        ``"coefficients"``: |coefficient| of a linear f_c times the standard deviation of its input
        on ``Cus`` (so a near-constant output cannot look important), summed over the model's
        columns and classes; ``"impurity"``: mean decrease in impurity of a forest f_c;
        ``"permutation"``: score drop of f_c on ``(X, y)`` when the model's outputs are permuted
        across rows.  ``"auto"`` picks the first of these that the fusion model supports.
    X, y : optional
        Data for ``"permutation"``.
    n_repeats, random_state : int
        Permutations per model and their seed.

    Returns
    -------
    dict of str to float
        One score per ``candidate_ids_`` entry (0 for models not selected), summing to 1 (all 0 if
        no model carries any weight).

    Raises
    ------
    ValueError
        Unknown method, or one the fusion model does not support.

    References
    ----------
    pfl-stacking.txt §3 (contribution evaluation), §4 (normalized MDI scores).

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from pubsubml.methods import Customizer
    >>> X, y = make_classification(n_samples=120, n_features=3, n_informative=2,
    ...                            n_redundant=0, random_state=0)
    >>> c = Customizer(own_model="forest", random_state=0).fit(
    ...     pd.DataFrame(X, columns=["a", "b", "c"]), y)
    >>> contribution_scores(c)
    {'own': 1.0}
    """
    check_is_fitted(customizer, "fusion_model_")
    fusion = customizer.fusion_model_
    if method == "auto":
        method = (
            "coefficients"
            if hasattr(fusion, "coef_")
            else "impurity"
            if hasattr(fusion, "feature_importances_")
            else "permutation"
        )
    if method not in CONTRIBUTION_METHODS:
        raise ValueError(f"unknown method {method!r}; choose one of {sorted(CONTRIBUTION_METHODS)}")
    needs = {"coefficients": "coef_", "impurity": "feature_importances_"}.get(method)
    if needs is not None and not hasattr(fusion, needs):
        raise ValueError(f"method {method!r} needs a fusion model with {needs}")
    per_selected = CONTRIBUTION_METHODS[method](customizer, X, y, n_repeats, random_state)
    per_selected = np.where(np.isfinite(per_selected), np.maximum(per_selected, 0.0), 0.0)
    total = float(per_selected.sum())
    scores = dict.fromkeys(customizer.candidate_ids_, 0.0)
    for mid, value in zip(customizer.selected_ids_, per_selected, strict=True):
        scores[mid] = float(value / total) if total > 0 else 0.0
    return scores


@dataclass(frozen=True)
class ContributionReport:
    """A subscriber's normalized contribution scores, ready to report through a hub.

    Attributes
    ----------
    subscriber : str
    scores : dict of str to float
        Per candidate id, summing to 1 (own model included under ``"own"``).
    method : str
    """

    subscriber: str
    scores: dict[str, float] = field(default_factory=dict)
    method: str = "auto"

    @classmethod
    def from_customizer(cls, customizer: Any, subscriber: str, **kwargs: Any) -> ContributionReport:
        """Score a fitted customizer (``kwargs`` go to :func:`contribution_scores`)."""
        return cls(
            subscriber, contribution_scores(customizer, **kwargs), kwargs.get("method", "auto")
        )

    @property
    def self_importance(self) -> float:
        """The own model's share (pfl-stacking.txt §4.1 (f))."""
        return self.scores.get(OWN_ID, 0.0)

    @property
    def published(self) -> dict[str, float]:
        """Scores of the subscribed (published) models only, not renormalized."""
        return {k: v for k, v in self.scores.items() if k != OWN_ID}

    def report(self, hub: Hub, *, disclose: bool = False) -> None:
        """Send the published models' scores through ``hub.report_contributions``.

        Parameters
        ----------
        hub : Hub
        disclose : bool, default=False
            The subscriber's explicit consent: the scores are a non-DP function of its private
            rows (see the module notes), read by the publishers through the registry.

        Raises
        ------
        PrivacyError
            Without ``disclose=True``; nothing is sent.
        """
        if disclose is not True:
            raise PrivacyError(
                f"subscriber {self.subscriber!r}: contribution scores come from a model fitted on "
                "its private rows without DP noise; reporting them is a non-private disclosure "
                "and needs report(hub, disclose=True)"
            )
        hub.report_contributions(self.subscriber, self.published)


def contribution_graph(
    reports: Mapping[str, Mapping[str, float]],
    publisher_of: Mapping[str, str] | Callable[[str], str],
) -> nx.DiGraph[str]:
    """The contribution graph: an edge subscriber → publisher weighted by the scores it gave.

    Parameters
    ----------
    reports : mapping of subscriber to {model_id: score}
        E.g. :meth:`LocalHub.contributions() <pubsubml.hub.LocalHub.contributions>`.
    publisher_of : mapping or callable
        Model id → publisher (e.g. ``hub.publisher_of``).  A site's scores for its own models are
        left out.

    Returns
    -------
    networkx.DiGraph
        Edge attribute ``weight``: the sum of the subscriber's scores for that publisher's models.

    Examples
    --------
    >>> g = contribution_graph({"s": {"m1": 0.6, "m2": 0.2}}, {"m1": "a", "m2": "b"})
    >>> sorted(g.edges(data="weight"))
    [('s', 'a', 0.6), ('s', 'b', 0.2)]
    """
    lookup = publisher_of if callable(publisher_of) else publisher_of.__getitem__
    graph: nx.DiGraph[str] = nx.DiGraph()
    for subscriber, scores in reports.items():
        graph.add_node(subscriber)
        for model_id, score in scores.items():
            publisher = lookup(model_id)
            if publisher == subscriber or not math.isfinite(score):
                continue
            old = graph.get_edge_data(subscriber, publisher, default={"weight": 0.0})["weight"]
            graph.add_edge(subscriber, publisher, weight=old + float(score))
    return graph


def _in_strength(graph: nx.DiGraph[str]) -> dict[str, float]:
    """Sum of the scores others gave, normalized to sum to 1 (pfl-stacking.txt §4)."""
    strength = {n: float(s) for n, s in graph.in_degree(weight="weight")}
    total = sum(strength.values())
    return {n: (s / total if total > 0 else 0.0) for n, s in strength.items()}


def _pagerank(graph: nx.DiGraph[str]) -> dict[str, float]:
    return {str(k): float(v) for k, v in nx.pagerank(graph, weight="weight").items()}


CENTRALITIES: dict[str, Callable[[nx.DiGraph[str]], dict[str, float]]] = {
    "in_strength": _in_strength,
    "pagerank": _pagerank,
}


def rank_publishers(
    graph: nx.DiGraph, *, centrality: str = "in_strength"
) -> list[tuple[str, float]]:
    """Publishers (nodes with incoming edges) by decreasing centrality, ties by name.

    Raises
    ------
    ValueError
        Unknown centrality.

    Examples
    --------
    >>> g = contribution_graph({"s": {"m1": 0.6, "m2": 0.2}, "t": {"m2": 0.5}},
    ...                        {"m1": "a", "m2": "b"})
    >>> [(p, round(v, 3)) for p, v in rank_publishers(g)]
    [('b', 0.538), ('a', 0.462)]
    """
    if centrality not in CENTRALITIES:
        raise ValueError(f"unknown centrality {centrality!r}; choose one of {sorted(CENTRALITIES)}")
    values = CENTRALITIES[centrality](graph)
    publishers = [n for n in graph.nodes if graph.in_degree(n) > 0]
    return sorted(((p, values[p]) for p in publishers), key=lambda t: (-t[1], t[0]))


def contribution_rows(
    customizer: Any, scores: Mapping[str, float]
) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """The scores by model, best first, and summed by publisher (pfl-stacking.txt §3).

    Parameters
    ----------
    customizer : Customizer
        Its received ``models`` name each score's publisher and ε.
    scores : mapping of str to float
        :func:`contribution_scores` of ``customizer``.

    Returns
    -------
    rows : list of dict
        ``{"model_id", "publisher", "epsilon", "selected", "score"}`` per scored model, by
        decreasing score (``publisher`` and ``epsilon`` are None for the own model and for a
        model that was not selected).
    publishers : dict of str to float
        Each publisher's summed score.
    """
    by_id = {m.model_id: m for m in customizer.models or []}
    rows: list[dict[str, Any]] = []
    for mid, score in sorted(scores.items(), key=lambda kv: (-kv[1], kv[0])):
        model = by_id.get(mid)
        rows.append(
            {
                "model_id": mid,
                "publisher": None if model is None else str(model.publisher),
                "epsilon": None if model is None else float(model.epsilon),
                "selected": mid in customizer.selected_ids_,
                "score": score,
            }
        )
    publishers: dict[str, float] = {}
    for row in rows:
        if row["publisher"] is not None:
            publishers[row["publisher"]] = publishers.get(row["publisher"], 0.0) + row["score"]
    return rows, publishers
