"""CUSTOMIZE: a subscriber fuses subscribed black-box models with its own (pubsub-ml.txt §4).

:class:`Customizer` is Algorithm 2 as a scikit-learn estimator.  ``fit(X, y)`` runs on the
subscriber's private DataFrame:

1. split it into ``Tra`` (``train_split``) and ``Cus`` (``fusion_split``), train the own model M^s
   on ``Tra`` (never published);
2. score every candidate of M^s ∪ Λ_s on ``Cus`` and keep the ``top_m`` best (``Sel``);
3. build the meta-features m(x) (Eq. 2): the concatenated outputs of the selected models on
   feature-extended inputs;
4. train the fusion model f_c on O^s = {(m(x), y)} (Eq. 3);
5. predict with f_c ∘ m.

Every subscribed model is a black box (DESIGN.md, "Model-agnostic through outputs"; Theorem 4):
the code uses only ``predict_proba``/``predict`` on a DataFrame, ``input_features``, and for
classifiers the declared ``classes`` (or ``classes_``).  Nothing depends on a model's type.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import accuracy_score, r2_score
from sklearn.model_selection import train_test_split
from sklearn.utils import check_random_state
from sklearn.utils._tags import ClassifierTags, RegressorTags, Tags
from sklearn.utils.validation import check_is_fitted

from pubsubml.errors import DataValidationError, SchemaMismatchError
from pubsubml.methods.outputs import (
    FUSION_MODELS,
    OWN_MODELS,
    SELECTION_METRICS,
    OwnModel,
    Runner,
    align_outputs,
    candidate_ids,
    encode_targets,
    model_features,
    run_models,
)
from pubsubml.schema import FeatureSchema

__all__ = ["Customizer", "Task"]

Task = Literal["classification", "regression"]
OWN_ID = "own"


class Customizer(BaseEstimator):
    """CUSTOMIZE(s, loss) of pubsub-ml.txt Algorithm 2: the customized model C^s = f_c ∘ m.

    Parameters
    ----------
    models : sequence of black-box models, optional
        The subscribed models Λ_s, already fitted: objects with ``input_features`` and
        ``predict_proba(DataFrame)`` (classification, with ``classes`` or ``classes_``) or
        ``predict(DataFrame)`` (regression).  They are shared, never copied, by :func:`clone`.
    task : {"classification", "regression"}, default="classification"
    own_model : {"mlp", "forest"}, estimator or None, default="mlp"
        M^s, trained on ``Tra``.  ``"mlp"`` is Table 4's network (100, 50) tanh, Adam, 30 epochs,
        minibatch 100, non-private; ``"forest"`` a random forest.  Both encode inputs with the
        public ``schema``.  An estimator is cloned and fitted on the ``Tra`` DataFrame.  ``None``
        uses no own model; then ``Tra`` is not needed and all rows go to ``Cus``.
    fusion_model : {"linear", "forest"} or estimator, default="linear"
        f_c.  ``"linear"`` is the paper's input layer fully connected to the output layer: an
        L2-regularised multinomial logistic regression (classification) or ridge regression.
    top_m : int, optional
        Keep the ``top_m`` best candidates of M^s ∪ Λ_s on ``Cus``; ``None`` keeps all.
    selection_metric : {"accuracy", "balanced_accuracy", "f1_minority", "mse", "r2"}, optional
        Metric of Step 2; default ``"accuracy"`` (classification) or ``"mse"`` (regression).
    train_split, fusion_split : float, default=0.75, 0.25
        Fractions of the rows for ``Tra`` and ``Cus`` (the paper's 60/20 of all data with 20%
        held out for testing); stratified by label for classification.
    schema : FeatureSchema, optional
        The consortium's public schema: its defaults fill features the subscriber lacks
        (pubsub-ml.txt §4 Step 3 Discussion) and its bounds scale inputs of the ``"mlp"`` and
        ``"forest"`` own models.  Without it, a model fills the features it lacks itself.
    classes : sequence, optional
        The subscriber's public label set (default: the labels present in ``y``).
    model_ids : sequence of str, optional
        Names of ``models`` (default: their ``model_id`` attribute, else ``"m{i}"``).
    runner : callable, optional
        ``runner(models, frame, method)`` returning each model's ``method`` output on the
        feature-extended ``frame`` (which may carry extra columns); e.g. a batched runner for many
        networks.  Default: call each model on its own input features.
    random_state : int, RandomState or None
        Seeds the split, the own model and the fusion model.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    candidate_ids_ : list of str
        ``"own"`` (when there is an own model) then the ids of ``models``.
    selection_scores_ : ndarray of shape (n_candidates,)
        The metric of each candidate on ``Cus``.
    selected_ : ndarray of int
        Indices into ``candidate_ids_`` of ``Sel``, ascending.
    selected_ids_ : list of str
    own_model_ : estimator or None
    fusion_model_ : estimator
    meta_feature_names_ : list of str
        ``"{id}:{class}"`` per column of m(x) (``"{id}"`` for regression).
    meta_blocks_ : list of slice
        The columns of m(x) per selected model.
    meta_std_ : ndarray of shape (n_meta,)
        Standard deviation of each column of m(x) on ``Cus`` (for contribution scores).
    train_index_, fusion_index_ : ndarray of int
        Row positions of ``Tra`` and ``Cus``.
    fit_timings_ : dict of str to float
        Seconds spent in ``"own"``, ``"outputs"`` (all candidates on ``Cus``), ``"select"`` and
        ``"fuse"``.

    Raises
    ------
    LabelError
        A model's label set cannot be aligned with the subscriber's, or it has no classes.
    SchemaMismatchError
        ``X`` is not a DataFrame or has features outside ``schema``.

    References
    ----------
    pubsub-ml.txt §4 (Algorithm 2, Eq. 2–3, Figure 2), §5 (Theorem 3: the subscriber releases
    nothing), §7.2 (Table 4), §8.2.3 (model selection).

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> X, y = make_classification(n_samples=200, n_features=4, n_informative=3,
    ...                            n_redundant=0, random_state=0)
    >>> X = pd.DataFrame(X, columns=["a", "b", "c", "d"])
    >>> c = Customizer(own_model="forest", random_state=0).fit(X, y)
    >>> c.candidate_ids_, c.predict(X.iloc[:3]).shape
    (['own'], (3,))
    """

    def __init__(
        self,
        *,
        models: Sequence[Any] | None = None,
        task: Task = "classification",
        own_model: Any = "mlp",
        fusion_model: Any = "linear",
        top_m: int | None = None,
        selection_metric: str | None = None,
        train_split: float = 0.75,
        fusion_split: float = 0.25,
        schema: FeatureSchema | None = None,
        classes: Sequence[Any] | None = None,
        model_ids: Sequence[str] | None = None,
        runner: Runner | None = None,
        random_state: int | np.random.RandomState | None = None,
    ) -> None:
        self.models = models
        self.task = task
        self.own_model = own_model
        self.fusion_model = fusion_model
        self.top_m = top_m
        self.selection_metric = selection_metric
        self.train_split = train_split
        self.fusion_split = fusion_split
        self.schema = schema
        self.classes = classes
        self.model_ids = model_ids
        self.runner = runner
        self.random_state = random_state

    # ---- scikit-learn plumbing ------------------------------------------------------------
    def __sklearn_tags__(self) -> Tags:
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        if self.task == "regression":
            tags.estimator_type = "regressor"
            tags.regressor_tags = RegressorTags()
        else:
            tags.estimator_type = "classifier"
            tags.classifier_tags = ClassifierTags()
        return tags

    def __sklearn_clone__(self) -> Customizer:
        """Clone the parameters but share the subscribed models (fitted, read-only black boxes)."""
        params = self.get_params(deep=False)
        shared = {k: params.pop(k) for k in ("models", "runner", "schema")}
        new_params = {k: clone(v, safe=False) for k, v in params.items()}
        return type(self)(**shared, **new_params)

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

    def _fit_own(self, X: pd.DataFrame, y: np.ndarray, seed: int) -> Any:
        spec = self.own_model
        if isinstance(spec, str):
            if spec not in OWN_MODELS:
                raise ValueError(f"unknown own_model {spec!r}; choose one of {sorted(OWN_MODELS)}")
            est = OWN_MODELS[spec](self.task, self.schema, list(X.columns), seed)
            with warnings.catch_warnings():  # Table 4: a fixed 30 epochs of minibatches of 100
                warnings.simplefilter("ignore", ConvergenceWarning)
                warnings.filterwarnings("ignore", message="Got `batch_size`", category=UserWarning)
                return est.fit(X, y)
        est = clone(spec)
        if "random_state" in est.get_params() and est.get_params()["random_state"] is None:
            est.set_params(random_state=seed)
        return est.fit(X, y)

    def _make_fusion(self, seed: int) -> Any:
        spec = self.fusion_model
        if isinstance(spec, str):
            if spec not in FUSION_MODELS:
                raise ValueError(
                    f"unknown fusion_model {spec!r}; choose one of {sorted(FUSION_MODELS)}"
                )
            return FUSION_MODELS[spec](self.task, seed)
        est = clone(spec)
        if "random_state" in est.get_params() and est.get_params()["random_state"] is None:
            est.set_params(random_state=seed)
        return est

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

    # ---- fit / predict --------------------------------------------------------------------
    def fit(self, X: pd.DataFrame, y: Any) -> Customizer:
        """Run CUSTOMIZE on the subscriber's private data (Algorithm 2, Steps 1–4).

        Parameters
        ----------
        X : DataFrame of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)

        Returns
        -------
        self
        """
        if self.task not in ("classification", "regression"):
            raise ValueError(f"task must be 'classification' or 'regression', got {self.task!r}")
        frame = self._check_frame(X)
        y_arr = np.asarray(y).reshape(-1)
        if len(y_arr) != len(frame):
            raise DataValidationError(f"y has {len(y_arr)} values for {len(frame)} rows")
        classes, target = encode_targets(y_arr, self.task, self.classes)
        metric_name = self.selection_metric or (
            "accuracy" if self.task == "classification" else "mse"
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
        published = list(self.models or [])
        ids = candidate_ids(published, self.model_ids, reserved=OWN_ID)

        rs = check_random_state(self.random_state)
        split_seed, own_seed, fusion_seed = (int(s) for s in rs.randint(0, 2**31 - 1, size=3))
        has_own = self.own_model is not None
        timings: dict[str, float] = {}
        t0 = time.perf_counter()
        tra, cus = self._split(target if classes is not None else y_arr, split_seed, has_own)
        own = None
        if has_own:
            own = self._fit_own(frame.iloc[tra], y_arr[tra], own_seed)
        candidates = ([OwnModel(own, list(frame.columns))] if has_own else []) + published
        if not candidates:
            raise ValueError("nothing to customize: no subscribed models and no own model")
        cand_ids = ([OWN_ID] if has_own else []) + ids
        t1 = time.perf_counter()
        timings["own"] = t1 - t0

        # Step 2: every candidate's output on Cus, aligned to the subscriber's label set.
        raw = self._outputs(candidates, frame.iloc[cus])
        outputs = [
            align_outputs(o, m, classes, i)
            for i, (o, m) in enumerate(zip(raw, candidates, strict=True))
        ]
        t2 = time.perf_counter()
        timings["outputs"] = t2 - t1
        scores = metric.score(target[cus], np.stack(outputs))
        key = -scores if metric.greater_is_better else scores
        order = np.argsort(np.where(np.isnan(key), np.inf, key), kind="stable")
        m = len(candidates) if self.top_m is None else min(int(self.top_m), len(candidates))
        selected = np.sort(order[:m])
        t3 = time.perf_counter()
        timings["select"] = t3 - t2

        # Steps 3-4: O^s = {(m(x), y)} and the fusion model f_c.
        meta = np.hstack([outputs[i] for i in selected]).astype(np.float64)
        blocks: list[slice] = []
        names: list[str] = []
        start = 0
        for i in selected:
            width = outputs[i].shape[1]
            blocks.append(slice(start, start + width))
            start += width
            suffixes = [f":{c}" for c in classes] if classes is not None else [""]
            names.extend(f"{cand_ids[i]}{s}" for s in suffixes)
        fusion = self._make_fusion(fusion_seed)
        fusion.fit(meta, target[cus])
        timings["fuse"] = time.perf_counter() - t3

        if classes is not None:
            self.classes_ = classes
        self.n_features_in_ = frame.shape[1]
        self.feature_names_in_ = np.asarray(frame.columns, dtype=object)
        self.train_index_, self.fusion_index_ = tra, cus
        self.own_model_ = own
        self.candidate_ids_ = cand_ids
        self.selection_metric_ = metric_name
        self.selection_scores_ = scores
        self.selected_ = selected
        self.selected_ids_ = [cand_ids[i] for i in selected]
        self.models_ = [candidates[i] for i in selected]
        self.meta_blocks_ = blocks
        self.meta_feature_names_ = names
        self.meta_std_ = meta.std(axis=0)
        self.fusion_model_ = fusion
        self.fit_timings_ = timings
        return self

    def meta_features(self, X: pd.DataFrame) -> np.ndarray:
        """m(x) of Eq. 2 for new rows: the selected models' outputs, concatenated.

        Parameters
        ----------
        X : DataFrame of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, n_meta)
        """
        check_is_fitted(self, "fusion_model_")
        frame = self._check_frame(X)
        raw = self._outputs(self.models_, frame)
        classes = getattr(self, "classes_", None)
        out = [
            align_outputs(o, m, classes, i)
            for i, (o, m) in enumerate(zip(raw, self.models_, strict=True))
        ]
        return np.hstack(out).astype(np.float64)

    def predict_proba(self, X: pd.DataFrame) -> np.ndarray:
        """Class probabilities of C^s = f_c ∘ m (classification).

        Returns
        -------
        ndarray of shape (n_samples, n_classes), columns in ``classes_`` order
        """
        check_is_fitted(self, "fusion_model_")
        if self.task != "classification":
            raise AttributeError("predict_proba is only available for classification")
        proba = np.asarray(
            self.fusion_model_.predict_proba(self.meta_features(X)), dtype=np.float64
        )
        full = np.zeros((proba.shape[0], len(self.classes_)))
        full[:, np.asarray(self.fusion_model_.classes_, dtype=np.int64)] = proba
        return full

    def predict(self, X: pd.DataFrame) -> np.ndarray:
        """Labels (classification) or values (regression) of C^s = f_c ∘ m (Step 5).

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        check_is_fitted(self, "fusion_model_")
        if self.task == "classification":
            return np.asarray(self.classes_[np.argmax(self.predict_proba(X), axis=1)])
        return np.asarray(self.fusion_model_.predict(self.meta_features(X)), dtype=np.float64)

    def score(self, X: pd.DataFrame, y: Any, sample_weight: Any = None) -> float:
        """Accuracy (classification) or R² (regression) on ``(X, y)``."""
        pred = self.predict(X)
        if self.task == "classification":
            return float(accuracy_score(y, pred, sample_weight=sample_weight))
        return float(r2_score(y, pred, sample_weight=sample_weight))
