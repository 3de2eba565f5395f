"""PubSub-ML on data streams: dynamic DP ensembles and re-customization (pubsub-ml.txt §6).

A :class:`StreamPublisher` keeps an ensemble of its ``k`` most recent DP models, each trained on
one disjoint data chunk (Algorithm 4, UpdateEnsemble).  Every model is charged to the site's
ledger with its chunk as the release scope, so the ledger composes them in parallel and the
publisher's ε stays that of one model over any number of updates (Theorems 5–6).  Nothing is
published during the cold start, before ``k`` chunks exist.

A :class:`StreamSubscriber` keeps, per publisher, the ``k`` most recent models it received,
re-customizes (Algorithm 3, line 5) on each new chunk of its own stream and scores itself on the
test part of its most recent chunk (§8.3.3), and prequentially on each new chunk before learning
from it.

:func:`~pubsubml.data.hyperplane_chunks` (re-exported here) turns river's
``synth.Hyperplane`` generator into DataFrame chunks.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import clone
from sklearn.model_selection import train_test_split

from pubsubml.data.synthetic import hyperplane_chunks, hyperplane_schema
from pubsubml.hub import Hub
from pubsubml.methods.pubsub.customizer import Customizer
from pubsubml.schema import Channel
from pubsubml.sites import Site

__all__ = ["StreamPublisher", "StreamSubscriber", "hyperplane_chunks", "hyperplane_schema"]


def _reseeded(estimator: Any, t: int) -> Any:
    est = clone(estimator)
    params = est.get_params()
    for key in ("random_state", "noise_seed"):
        if isinstance(params.get(key), int | np.integer):
            est.set_params(**{key: int(params[key]) + t})
    return est


class StreamPublisher:
    """A publisher's dynamic DP ensemble over a data stream (Algorithm 4).

    Parameters
    ----------
    site : Site
        Its ledger is charged for every model, with scope ``("{stream}:{t}",)``.
    estimator : DP estimator
        Cloned and fitted on each chunk (an integer ``random_state`` is offset by the chunk
        index, so chunks get different noise).
    hub : Hub
    k : int, default=5
        Ensemble size.
    stream : str, default="stream"
        Name of the stream, prefix of the chunk scopes.

    Attributes
    ----------
    n_chunks_ : int
    ensemble_ : deque of str
        Model ids of the current ensemble E_τ (after the cold start), oldest first.
    epsilon_history_ : list of float
        The site's spent ε after each chunk.

    References
    ----------
    pubsub-ml.txt §6 (cold start), §6.1 (Algorithm 4), §6.2 (Theorems 5–6).
    """

    def __init__(
        self, site: Site, estimator: Any, hub: Hub, *, k: int = 5, stream: str = "stream"
    ) -> None:
        if k < 1:
            raise ValueError(f"ensemble size k must be >= 1, got {k}")
        self.site = site
        self.estimator = estimator
        self.hub = hub
        self.k = k
        self.stream = stream
        self.n_chunks_ = 0
        self.ensemble_: deque[str] = deque(maxlen=k)
        self.epsilon_history_: list[float] = []
        self._cold: list[tuple[Any, tuple[str, ...]]] = []

    @property
    def cold_start(self) -> bool:
        """True until ``k`` chunks have arrived (nothing is published before)."""
        return self.n_chunks_ < self.k

    def learn_chunk(self, X: pd.DataFrame, y: Any) -> list[str]:
        """Train a DP model on the new chunk and update the published ensemble.

        Returns
        -------
        list of str
            Ids published at this step: none during the cold start, ``k`` when it ends, then one.
        """
        t = self.n_chunks_ + 1
        model = _reseeded(self.estimator, t).fit(X, y)
        scope = (f"{self.stream}:{t}",)
        # A new chunk of the stream is new data, disjoint from the earlier ones: declared as such.
        self.site.register_scopes(scope, self.hub)
        self._cold.append((model, scope))
        self.n_chunks_ = t
        published: list[str] = []
        if t >= self.k:
            for m, s in self._cold:
                mid = self.site.publish(m, self.hub, scope=s)
                self.ensemble_.append(mid)
                published.append(mid)
            self._cold = []
        self.epsilon_history_.append(self.site.ledger.spent_epsilon())
        return published


class StreamSubscriber:
    """A subscriber that re-customizes on every chunk of its stream (pubsub-ml.txt §6, §8.3.3).

    Parameters
    ----------
    site : Site
    hub : Hub
    customizer : Customizer
        Template; cloned with the current models for every chunk.
    channel : Channel or str
    k : int, default=5
        Models kept per publisher (the most recent ones received).
    test_fraction : float, default=0.2
        Part of each chunk held out to score the customized model (stratified).
    random_state : int, default=0

    Attributes
    ----------
    model_ : Customizer or None
        The customized model of the latest chunk.
    history_ : list of dict
        Per chunk: ``chunk``, ``new_models``, ``n_models``, ``test`` (score on the chunk's test
        part) and ``prequential`` (score of the previous model on the whole new chunk, before
        learning from it; ``None`` for the first).
    """

    def __init__(
        self,
        site: Site,
        hub: Hub,
        customizer: Customizer,
        *,
        channel: Channel | str,
        k: int = 5,
        test_fraction: float = 0.2,
        random_state: int = 0,
    ) -> None:
        self.site = site
        self.hub = hub
        self.customizer = customizer
        self.k = k
        self.test_fraction = test_fraction
        self.random_state = random_state
        self.subscription = site.subscribe(
            hub, channel, task=customizer.task, classes=customizer.classes
        )
        self.window_: dict[str, deque[Any]] = {}
        self.history_: list[dict[str, Any]] = []
        self._last: tuple[pd.DataFrame, np.ndarray] | None = None
        self.model_: Customizer | None = None

    def _receive(self) -> int:
        new = self.site.pull(self.hub, self.subscription)
        for m in new:
            self.window_.setdefault(str(m.publisher), deque(maxlen=self.k)).append(m)
        return len(new)

    @property
    def models(self) -> list[Any]:
        """The current subscribed models: each publisher's ``k`` most recent, by publisher."""
        return [m for p in sorted(self.window_) for m in self.window_[p]]

    def _customize(self, X: pd.DataFrame, y: np.ndarray, t: int) -> Customizer:
        est = clone(self.customizer)
        est.set_params(models=self.models, random_state=self.random_state + t)
        return est.fit(X, y)

    def learn_chunk(self, X: pd.DataFrame, y: Any) -> dict[str, Any]:
        """Score the current model on the chunk, take new models, re-customize, score again."""
        y_arr = np.asarray(y).reshape(-1)
        t = len(self.history_) + 1
        record: dict[str, Any] = {"chunk": t, "prequential": None}
        if self.model_ is not None:
            record["prequential"] = self.model_.score(X, y_arr)
        record["new_models"] = self._receive()
        stratify = y_arr if self.customizer.task == "classification" else None
        X_fit, X_test, y_fit, y_test = train_test_split(
            X,
            y_arr,
            test_size=self.test_fraction,
            stratify=stratify,
            random_state=self.random_state + t,
        )
        self.model_ = self._customize(X_fit, y_fit, t)
        self._last = (X_fit, y_fit)
        record["n_models"] = len(self.models)
        record["test"] = self.model_.score(X_test, y_test)
        self.history_.append(record)
        return record

    def refresh(self) -> bool:
        """Re-customize on the latest chunk if new models arrived; True when it did."""
        if self._receive() == 0 or self._last is None:
            return False
        self.model_ = self._customize(*self._last, len(self.history_))
        return True
