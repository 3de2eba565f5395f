"""The parameters of :class:`~pubsubml.methods.pubsub.customizer.Customizer` and what they configure.

:class:`CustomizerParams` holds the estimator's parameters (documented on ``Customizer``), checks
them, clones them (sharing the subscribed models, the runner, the schema and the cross-fit store),
and builds from them the pieces of CUSTOMIZE (pubsub-ml.txt Algorithm 2): the rows M^s trains on
and the fusion rows (``Tra``/``Cus`` or cross-fitting folds), the own learner of Step 1, and the
output function of Step 3.  The algorithm itself is ``Customizer.fit``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, clone

from pubsubml.learners.base import check_target_bounds
from pubsubml.methods.pubsub.fusion import fusion_kind
from pubsubml.methods.pubsub.outputs import Runner, model_outputs
from pubsubml.methods.pubsub.own import OWN_KINDS, OwnLearner
from pubsubml.methods.pubsub.own_crossfit import (
    CrossFitStore,
    check_cv,
    holdout_split,
    make_folds,
)
from pubsubml.methods.pubsub.selection import SelectionMetric, selection_metric
from pubsubml.methods.pubsub.task import Task, TaskEstimatorMixin, check_task
from pubsubml.schema import FeatureSchema

__all__ = ["CustomizerParams", "Folds"]

Folds = list[tuple[np.ndarray, np.ndarray]]
"""Cross-fitting folds: (train, held-out) row positions."""


class CustomizerParams(TaskEstimatorMixin, BaseEstimator):
    """The parameters of CUSTOMIZE, their checks, and the pieces they configure.

    The base of :class:`~pubsubml.methods.pubsub.customizer.Customizer`, whose docstring
    describes the parameters.
    """

    def __init__(
        self,
        *,
        models: Sequence[Any] | None = None,
        task: Task = "classification",
        own_model: Any = "auto",
        fusion_model: Any = "stacked",
        cv: int | str = 5,
        top_m: int | None = None,
        selection_metric: str | None = None,
        train_split: float = 0.75,
        fusion_split: float = 0.25,
        schema: FeatureSchema | None = None,
        classes: Sequence[Any] | None = None,
        target_bounds: Sequence[float] | None = None,
        model_ids: Sequence[str] | None = None,
        runner: Runner | None = None,
        random_state: int | np.random.RandomState | None = None,
        cross_fits: CrossFitStore | None = None,
    ) -> None:
        self.models = models
        self.task = task
        self.own_model = own_model
        self.fusion_model = fusion_model
        self.cv = cv
        self.top_m = top_m
        self.selection_metric = selection_metric
        self.train_split = train_split
        self.fusion_split = fusion_split
        self.schema = schema
        self.classes = classes
        self.target_bounds = target_bounds
        self.model_ids = model_ids
        self.runner = runner
        self.random_state = random_state
        self.cross_fits = cross_fits

    def __sklearn_clone__(self) -> CustomizerParams:
        """Clone the parameters but share the subscribed models (fitted, read-only black boxes)
        and the cross-fit store."""
        params = self.get_params(deep=False)
        shared = {
            k: params.pop(k) for k in ("models", "runner", "schema", "cross_fits") if k in params
        }
        new_params = {k: clone(v, safe=False) for k, v in params.items()}
        return type(self)(**shared, **new_params)

    def _check_params(self) -> tuple[str, SelectionMetric]:
        """Every parameter checked (before anything is fitted); the selection metric."""
        check_task(self.task)
        metric_name, metric = selection_metric(self.selection_metric, self.task)
        if self.top_m is not None and (isinstance(self.top_m, bool) or int(self.top_m) < 1):
            raise ValueError(f"top_m must be a positive integer or None, got {self.top_m!r}")
        fusion_kind(self.fusion_model)
        check_cv(self.cv)
        check_target_bounds(self.target_bounds)
        return metric_name, metric

    def _plan_rows(
        self, target: np.ndarray, seed: int
    ) -> tuple[np.ndarray, np.ndarray, Folds | None]:
        """The rows M^s trains on, the fusion rows, and the cross-fitting folds (or None)."""
        folds_k = check_cv(self.cv)
        has_own = self.own_model is not None
        if folds_k is None or not has_own:
            tra, fuse_rows = self._split(target, seed, has_own and folds_k is None)
            return tra, fuse_rows, None
        rows = np.arange(len(target))
        return rows, rows, make_folds(target, folds_k, self.task, seed)

    def _split(self, y: np.ndarray, seed: int, has_own: bool) -> tuple[np.ndarray, np.ndarray]:
        """Row positions of ``Tra`` and ``Cus`` (no ``Tra`` without an own model)."""
        if not has_own:
            return np.arange(len(y))[:0], np.arange(len(y))
        return holdout_split(y, self.task, self.train_split, self.fusion_split, seed)

    def _own_learner(self, seed: int) -> OwnLearner:
        """The unfitted M^s of Step 1, seeded with ``seed``."""
        spec = self.own_model
        if isinstance(spec, str) and spec != "auto" and spec not in OWN_KINDS:
            raise ValueError(
                f"unknown own_model {spec!r}; choose 'auto', one of {list(OWN_KINDS)}, an "
                "estimator or None"
            )
        return OwnLearner(
            task=self.task,
            kind=spec,
            cv=5 if self.cv == "holdout" else int(self.cv),
            schema=self.schema,
            classes=self.classes,
            target_bounds=self.target_bounds,
            random_state=seed,
            cross_fits=getattr(self, "cross_fits", None),
        )

    def _outputs(
        self, models: Sequence[Any], frame: pd.DataFrame, classes: np.ndarray | None
    ) -> list[np.ndarray]:
        """M'_i(x') of Step 3 for ``models`` on ``frame``, aligned to ``classes``."""
        return model_outputs(
            models, frame, task=self.task, classes=classes, schema=self.schema, runner=self.runner
        )
