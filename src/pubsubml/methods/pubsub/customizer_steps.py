"""The steps of CUSTOMIZE that :class:`~pubsubml.methods.pubsub.customizer.Customizer` composes.

pubsub-ml.txt §4 (Algorithm 2, Eq. 2–3): Step 1 splits the subscriber's rows (``Tra``/``Cus``, or
cross-fitting folds) and fits the own model M^s; Step 2 selects ``Sel``, the ``top_m`` best
candidates of M^s ∪ Λ_s; Step 3 extends the inputs with the public defaults (§4 Step 3
Discussion) and forms the meta-features m(x) from the selected models' outputs; Step 4 builds the
fusion model f_c.  :class:`CustomizerSteps` holds these steps as methods over the customizer's
parameters, and :meth:`Customizer.fit <pubsubml.methods.pubsub.customizer.Customizer.fit>` runs
them in order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import clone
from sklearn.model_selection import train_test_split

from pubsubml.errors import DataValidationError, SchemaMismatchError
from pubsubml.methods.pubsub.fusion import StackedFusion, centred_log_odds
from pubsubml.methods.pubsub.outputs import (
    FUSION_MODELS,
    SELECTION_METRICS,
    OwnModel,
    Runner,
    SelectionMetric,
    align_outputs,
    model_features,
    run_models,
)
from pubsubml.methods.pubsub.own import (
    OWN_KINDS,
    OwnLearner,
    check_target_bounds,
)
from pubsubml.schema import FeatureSchema

__all__ = ["CustomizerSteps"]


class CustomizerSteps:
    """Steps 1–4 of CUSTOMIZE (pubsub-ml.txt Algorithm 2) over a customizer's parameters.

    A mixin of :class:`~pubsubml.methods.pubsub.customizer.Customizer`, whose docstring describes
    the parameters read here.
    """

    models: Sequence[Any] | None
    task: str
    own_model: Any
    fusion_model: Any
    cv: int | str
    top_m: int | None
    selection_metric: str | None
    train_split: float
    fusion_split: float
    schema: FeatureSchema | None
    classes: Sequence[Any] | None
    target_bounds: Sequence[float] | None
    model_ids: Sequence[str] | None
    runner: Runner | None

    # ---- Step 1 ---------------------------------------------------------------------------
    def _split(self, y: np.ndarray, seed: int, has_own: bool) -> tuple[np.ndarray, np.ndarray]:
        """Row positions of ``Tra`` and ``Cus`` (pubsub-ml.txt §4: Tra(D^s), Cus(D^s))."""
        n = len(y)
        index = np.arange(n)
        if not has_own:
            return index[:0], index
        tr, fu = float(self.train_split), float(self.fusion_split)
        if not (0 < tr < 1 and 0 < fu < 1 and tr + fu <= 1 + 1e-9):
            raise ValueError(
                f"train_split and fusion_split must be in (0, 1) with a sum <= 1, got {tr}, {fu}"
            )
        n_fu = max(1, round(fu * n))
        n_tr = min(n - n_fu, max(1, round(tr * n)))
        stratify = y if self.task == "classification" else None
        try:
            tra, cus = train_test_split(
                index, train_size=n_tr, test_size=n_fu, stratify=stratify, random_state=seed
            )
        except ValueError as exc:
            raise DataValidationError(f"cannot split the data into Tra and Cus: {exc}") from exc
        return np.sort(tra), np.sort(cus)

    def _own_learner(self, seed: int) -> OwnLearner:
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
        )

    def _fit_own_crossfit(
        self,
        frame: pd.DataFrame,
        target: np.ndarray,
        classes: np.ndarray | None,
        folds: list[tuple[np.ndarray, np.ndarray]],
        seed: int,
    ) -> tuple[OwnLearner, np.ndarray]:
        """M^s refitted on all rows and its out-of-fold outputs (aligned to ``classes``)."""
        own = self._own_learner(seed)
        n_classes = 0 if classes is None else len(classes)
        found = own.cross_fit(frame, target, folds=folds, seed=seed, n_classes=n_classes)
        return own.adopt(found, classes, frame), found.oof

    def _fusion_kind(self) -> str | None:
        spec = self.fusion_model
        if isinstance(spec, StackedFusion):
            return "stacked"
        if isinstance(spec, str):
            if spec != "stacked" and spec not in FUSION_MODELS:
                raise ValueError(
                    f"unknown fusion_model {spec!r}; choose 'stacked' or one of "
                    f"{sorted(FUSION_MODELS)}"
                )
            return spec
        return None

    def _make_fusion(self, seed: int, width: int, has_own: bool) -> Any:
        spec = self.fusion_model
        if spec == "stacked":
            return StackedFusion(
                task=self.task, block_width=width, own_first=has_own, random_state=seed
            )
        if isinstance(spec, str):
            return FUSION_MODELS[spec](self.task, seed)
        est = clone(spec)
        if isinstance(est, StackedFusion):  # its options kept; its shape set from the data
            est.set_params(task=self.task, block_width=width, own_first=has_own)
        if "random_state" in est.get_params() and est.get_params()["random_state"] is None:
            est.set_params(random_state=seed)
        return est

    def _cv(self) -> int | None:
        cv = self.cv
        if cv == "holdout":
            return None
        if isinstance(cv, bool) or not isinstance(cv, int | np.integer) or cv < 2:
            raise ValueError(f"cv must be an integer >= 2 or 'holdout', got {cv!r}")
        return int(cv)

    # ---- input handling -------------------------------------------------------------------
    def _check_frame(self, X: Any) -> pd.DataFrame:
        if not isinstance(X, pd.DataFrame):
            raise SchemaMismatchError(
                f"Customizer needs a DataFrame (features are matched by name), got {type(X).__name__}"
            )
        if len(X) == 0:
            raise DataValidationError("X has no rows")
        frame = X.set_axis([str(c) for c in X.columns], axis=1)
        if self.schema is not None and not isinstance(self.schema, FeatureSchema):
            raise TypeError(f"schema must be a FeatureSchema or None, got {type(self.schema)}")
        if self.schema is not None:
            unknown = [c for c in frame.columns if c not in self.schema]
            if unknown:
                raise SchemaMismatchError(f"columns {unknown} are not in the public schema")
        return frame

    def _extend(self, frame: pd.DataFrame, models: Sequence[Any]) -> pd.DataFrame:
        """x' of Step 3: add the public default of every feature a model needs and X lacks."""
        if self.schema is None:
            return frame
        need = {f for m in models for f in model_features(m)} - set(frame.columns)
        fill = {f: self.schema[f].default for f in sorted(need) if f in self.schema}
        return frame.assign(**fill) if fill else frame

    def _outputs(self, models: Sequence[Any], frame: pd.DataFrame) -> list[np.ndarray]:
        method = "predict_proba" if self.task == "classification" else "predict"
        extended = self._extend(frame, models)
        # M^s runs directly; the subscribed models go through the runner (if any) together.
        own = [i for i, m in enumerate(models) if isinstance(m, OwnModel)]
        rest = [i for i, m in enumerate(models) if not isinstance(m, OwnModel)]
        out: list[np.ndarray] = [np.empty(0)] * len(models)
        for i, o in zip(own, run_models([models[i] for i in own], extended, method), strict=True):
            out[i] = o
        outs = run_models([models[i] for i in rest], extended, method, self.runner)
        for i, o in zip(rest, outs, strict=True):
            out[i] = o
        return out

    def _aligned(
        self, models: Sequence[Any], frame: pd.DataFrame, classes: np.ndarray | None
    ) -> list[np.ndarray]:
        raw = self._outputs(models, frame)
        return [
            align_outputs(o, m, classes, i)
            for i, (o, m) in enumerate(zip(raw, models, strict=True))
        ]

    def _to_meta(
        self, outputs: Sequence[np.ndarray], stacked: bool, scale: tuple[float, float] | None
    ) -> np.ndarray:
        """m(x) from aligned outputs: centred log-odds or scaled outputs for the stacked fusion,
        the outputs themselves (probabilities) for the paper's fusion models."""
        meta = np.hstack(list(outputs)).astype(np.float64)
        if not stacked:
            return meta
        if self.task == "classification":
            k = outputs[0].shape[1]
            return centred_log_odds(meta.reshape(len(meta), -1, k)).reshape(len(meta), -1)
        assert scale is not None
        return (meta - scale[0]) / scale[1]

    def _target_scale(self, y: np.ndarray) -> tuple[float, float]:
        bounds = check_target_bounds(self.target_bounds)
        if bounds is not None:
            return bounds[0], bounds[1] - bounds[0]
        std = float(np.std(y))
        return float(np.mean(y)), std if std > 0 else 1.0

    def _select(self, scores: np.ndarray, metric: SelectionMetric, keep_own: bool) -> np.ndarray:
        """Sel of Step 2: the ``top_m`` best candidates (M^s always, for the stacked fusion)."""
        key = -scores if metric.greater_is_better else scores
        order = np.argsort(np.where(np.isnan(key), np.inf, key), kind="stable")
        n = len(scores)
        m = n if self.top_m is None else min(int(self.top_m), n)
        if keep_own:
            order = np.concatenate([[0], order[order != 0]])
        return np.sort(order[:m])

    # ---- parameters ---------------------------------------------------------------------
    def _check_params(self) -> tuple[str, SelectionMetric]:
        if self.task not in ("classification", "regression"):
            raise ValueError(f"task must be 'classification' or 'regression', got {self.task!r}")
        metric_name = self.selection_metric or (
            "log_loss" if self.task == "classification" else "mse"
        )
        if metric_name not in SELECTION_METRICS:
            raise ValueError(
                f"unknown selection_metric {metric_name!r}; choose one of {sorted(SELECTION_METRICS)}"
            )
        metric = SELECTION_METRICS[metric_name]
        if self.task not in metric.tasks:
            raise ValueError(f"selection_metric {metric_name!r} does not apply to {self.task}")
        if self.top_m is not None and (isinstance(self.top_m, bool) or int(self.top_m) < 1):
            raise ValueError(f"top_m must be a positive integer or None, got {self.top_m!r}")
        self._fusion_kind()
        self._cv()
        check_target_bounds(self.target_bounds)
        return metric_name, metric
