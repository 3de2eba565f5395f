"""CUSTOMIZE: a subscriber fuses subscribed black-box models with its own (pubsub-ml.txt §4).

:class:`Customizer` is Algorithm 2 as a scikit-learn estimator.  ``fit(X, y)`` runs on the
subscriber's private DataFrame.  With ``cv=5`` (the default, cross-fitting as
:class:`sklearn.ensemble.StackingClassifier` does):

1. the own model M^s (:class:`~pubsubml.methods.pubsub.own.OwnLearner`, the same learner as the Own
   baseline) is fitted on 4/5 of the rows five times; every row gets its output from the model
   that did not see it, and M^s is then refitted on all rows;
2. every candidate of M^s ∪ Λ_s is scored on all rows (M^s by its out-of-fold outputs) and the
   ``top_m`` best are kept (``Sel``);
3. the meta-features m(x) (Eq. 2) are the selected models' outputs on feature-extended inputs:
   centred log-odds for the default fusion, probabilities for the paper's fully connected layer;
4. the fusion model f_c is fitted on O^s = {(m(x), y)} over all rows (Eq. 3);
5. predict with f_c ∘ m.

``cv="holdout"`` is the paper's protocol: M^s on ``Tra`` (``train_split``), Steps 2–4 on ``Cus``
(``fusion_split``).  It costs the own model a quarter of the rows and the fusion three quarters,
which is why it is not the default.

Every subscribed model is a black box (DESIGN.md, "Model-agnostic through outputs"; Theorem 4):
the code uses only the names of its inputs (``input_features``, or else ``feature_names_in_``),
``predict_proba`` (classification) or ``predict`` (regression) on a DataFrame of those columns, and
for classifiers the declared ``classes`` (or else ``classes_``).  Nothing depends on a model's type
or on DP: non-private publishers give PubSub-ML* (pubsub-ml.txt §7.3, §8.3.4).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, clone
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from pubsubml.errors import DataValidationError
from pubsubml.methods.pubsub.customizer_steps import CustomizerSteps
from pubsubml.methods.pubsub.outputs import (
    OwnModel,
    Runner,
    SelectionMetric,
    TaskEstimatorMixin,
    candidate_ids,
    encode_targets,
)
from pubsubml.methods.pubsub.own import OwnLearner, make_folds
from pubsubml.schema import FeatureSchema

__all__ = ["Customizer", "Task"]

Task = Literal["classification", "regression"]
OWN_ID = "own"


class Customizer(CustomizerSteps, TaskEstimatorMixin, BaseEstimator):
    """CUSTOMIZE(s, loss) of pubsub-ml.txt Algorithm 2: the customized model C^s = f_c ∘ m.

    Parameters
    ----------
    models : sequence of black-box models, optional
        The subscribed models Λ_s, already fitted.  Each needs, and only these:

        * the names of its inputs, ``input_features`` or else ``feature_names_in_`` (so any
          scikit-learn estimator fitted on a DataFrame qualifies as it is); it is called on the
          subscriber's rows restricted to those features, in that order, after the features it
          needs and the subscriber lacks are added at ``schema``'s public defaults (a feature
          outside ``schema`` is left for the model to fill, as a
          :class:`~pubsubml.artifacts.PublishedModel` does from its card);
        * classification: ``predict_proba(DataFrame)`` of shape (n, k) and its k labels in
          ``classes`` or else ``classes_``, each among the subscriber's classes;
          regression: ``predict(DataFrame)``, one value per row;
        * optionally ``model_id``, its name in ``candidate_ids_``.

        Not a type, not DP, not ``fit``: they are never refitted, and :func:`clone` shares
        them.  With ``runner``, the runner calls them instead (``published_runner`` takes
        :class:`~pubsubml.artifacts.PublishedModel` s only).
    task : {"classification", "regression"}, default="classification"
    own_model : {"auto", "mlp", "forest", "logistic"}, estimator or None, default="auto"
        M^s, an :class:`~pubsubml.methods.pubsub.own.OwnLearner` of this kind: ``"auto"`` picks the
        candidate with the best out-of-fold loss on the subscriber's rows (M^s is never
        published, so this costs no privacy).  An estimator taking the DataFrame is cloned.
        ``None`` uses no own model; then every row goes to the fusion.
    fusion_model : {"stacked", "linear", "forest"} or estimator, default="stacked"
        f_c.  ``"stacked"`` is :class:`~pubsubml.methods.pubsub.fusion.StackedFusion` on centred
        log-odds: the own model's weight non-negative and unpenalised, the publishers' weights
        penalised with λ chosen by internal CV over a grid that includes ∞ (= M^s alone), so
        publishers that carry nothing leave C^s equal to M^s.  ``"linear"`` is the paper's input
        layer fully connected to the output layer (§7.2) on probabilities: an L2 multinomial
        logistic regression with C = 1 (classification) or a ridge regression; ``"forest"`` a
        random-forest meta-model (pfl-stacking.txt §4).  A ``StackedFusion`` instance is the
        stacked fusion with its options (e.g. ``StackedFusion(rule="1se")``; its shape is set
        from the data); any other estimator is cloned and fitted on probabilities.
    cv : int or "holdout", default=5
        Cross-fitting folds (stratified for classification); ``"holdout"`` is the paper's
        Tra/Cus split.
    top_m : int, optional
        Keep the ``top_m`` best candidates of M^s ∪ Λ_s by ``selection_metric``; ``None`` keeps
        all.  With ``fusion_model="stacked"`` M^s is always kept and counts as one of them.
    selection_metric : {"log_loss", "accuracy", "balanced_accuracy", "f1_minority", "mse", "r2"}
        Metric of Step 2; default ``"log_loss"`` (classification) or ``"mse"`` (regression).
    train_split, fusion_split : float, default=0.75, 0.25
        Fractions of the rows for ``Tra`` and ``Cus`` with ``cv="holdout"`` (the paper's 60/20 of
        all data with 20% held out for testing); stratified by label for classification.
    schema : FeatureSchema, optional
        The consortium's public schema: its defaults fill features the subscriber lacks
        (pubsub-ml.txt §4 Step 3 Discussion) and its bounds scale the own model's inputs.
    classes : sequence, optional
        The subscriber's public label set (default: the labels present in ``y``).
    target_bounds : (float, float), optional
        Public bounds of a regression target: the own network and the stacked fusion work on the
        target scaled to [0, 1] by them (standardised by the subscriber's own rows without them).
    model_ids : sequence of str, optional
        Names of ``models`` (default: their ``model_id`` attribute, else ``"m{i}"``).
    runner : callable, optional
        ``runner(models, frame, method)`` returning each model's ``method`` output on the
        feature-extended ``frame`` (which may carry extra columns); e.g. a batched runner for many
        networks.  Default: call each model on its own input features.
    random_state : int, RandomState or None
        Seeds the folds or the split, the own model and the fusion model.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    candidate_ids_ : list of str
        ``"own"`` (when there is an own model) then the ids of ``models``.
    selection_scores_ : ndarray of shape (n_candidates,)
        The metric of each candidate on the fusion rows (out-of-fold for M^s).
    selected_ : ndarray of int
        Indices into ``candidate_ids_`` of ``Sel``, ascending.
    selected_ids_ : list of str
    own_model_ : OwnLearner or None
        M^s refitted on all rows (on ``Tra`` with ``cv="holdout"``); ``own_model_.choice_`` is
        the kind chosen.
    fusion_model_ : estimator
    fallback_ : bool
        Whether C^s is M^s alone (the stacked fusion chose λ = ∞).
    fusion_weights_ : dict of str to float
        The stacked fusion's weight per selected model (empty for other fusion models).
    meta_feature_names_ : list of str
        ``"{id}:{class}"`` per column of m(x) (``"{id}"`` for regression).
    meta_blocks_ : list of slice
        The columns of m(x) per selected model.
    meta_std_ : ndarray of shape (n_meta,)
        Standard deviation of each column of m(x) on the fusion rows (for contribution scores).
    train_index_, fusion_index_ : ndarray of int
        Row positions that trained M^s and the fusion (all rows for both when cross-fitting).
    folds_ : list of (ndarray, ndarray) or None
        The cross-fitting folds (``None`` with ``cv="holdout"``).
    fit_timings_ : dict of str to float
        Seconds spent in ``"own"`` (fitting M^s and its outputs on the fusion rows),
        ``"outputs"`` (the subscribed models on the fusion rows), ``"select"`` and ``"fuse"``.

    Raises
    ------
    LabelError
        A model's label set cannot be aligned with the subscriber's, or it has no classes.
    SchemaMismatchError
        ``X`` is not a DataFrame or has features outside ``schema``, or a model names no
        inputs (neither ``input_features`` nor ``feature_names_in_``).
    DataValidationError
        Fewer rows than folds, or a class with fewer rows than folds.

    References
    ----------
    pubsub-ml.txt §4 (Algorithm 2, Eq. 2–3, Figure 2), §5 (Theorem 3: the subscriber releases
    nothing), §7.2 (Table 4), §8.2.3 (model selection); Wolpert (1992) and scikit-learn's
    ``StackingClassifier`` for cross-fitted stacking.

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> X, y = make_classification(n_samples=200, n_features=4, n_informative=3,
    ...                            n_redundant=0, random_state=0)
    >>> X = pd.DataFrame(X, columns=["a", "b", "c", "d"])
    >>> c = Customizer(own_model="forest", random_state=0).fit(X, y)
    >>> c.candidate_ids_, c.own_model_.choice_, c.predict(X.iloc[:3]).shape
    (['own'], 'forest', (3,))

    A non-private scikit-learn model fitted on another site's columns is a subscribed model as
    it is (``feature_names_in_``, ``classes_``, ``predict_proba``): PubSub-ML*.

    >>> from sklearn.linear_model import LogisticRegression
    >>> other = LogisticRegression().fit(X[["a", "b"]], y)
    >>> star = Customizer(models=[other], own_model="logistic", random_state=0).fit(X, y)
    >>> star.candidate_ids_
    ['own', 'm0']
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

    # ---- scikit-learn plumbing ------------------------------------------------------------
    def __sklearn_clone__(self) -> Customizer:
        """Clone the parameters but share the subscribed models (fitted, read-only black boxes)."""
        params = self.get_params(deep=False)
        shared = {k: params.pop(k) for k in ("models", "runner", "schema")}
        new_params = {k: clone(v, safe=False) for k, v in params.items()}
        return type(self)(**shared, **new_params)

    # ---- fit / predict --------------------------------------------------------------------
    def fit(self, X: pd.DataFrame, y: Any) -> Customizer:
        """Run CUSTOMIZE on the subscriber's private data (Algorithm 2, Steps 1–4).

        Nothing is changed on ``self`` unless every step succeeds.

        Parameters
        ----------
        X : DataFrame of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)

        Returns
        -------
        self
        """
        return self._finish(self._prepare(X, y))

    def fit_top_ms(self, X: pd.DataFrame, y: Any, top_ms: Sequence[int | None]) -> list[Customizer]:
        """One fitted clone per ``top_m`` of ``top_ms``, sharing Step 1 and the outputs.

        The own model M^s (its cross-fit and refit), the subscribed models' outputs and the
        candidates' scores do not depend on ``top_m``; they are computed once, then each clone
        selects its top m and fits its fusion model (Steps 2–4).  Each clone is the customizer
        ``clone(self).set_params(top_m=m).fit(X, y)`` gives, the same selection, weights and
        predictions, for about the cost of one fit plus a fusion per extra ``top_m`` (the
        configurations of pubsub-ml.txt §8.2.3, Fig. 4).  Every clone's ``fit_timings_``
        carries the shared ``"own"`` and ``"outputs"`` seconds.

        Parameters
        ----------
        X : DataFrame of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        top_ms : sequence of int or None
            The configurations (``None`` keeps every candidate).

        Returns
        -------
        list of Customizer
            Fitted clones, in the order of ``top_ms``; ``self`` is left unchanged.

        Raises
        ------
        ValueError
            An empty ``top_ms`` or an invalid ``top_m``, before anything is fitted.
        """
        clones = [clone(self).set_params(top_m=m) for m in top_ms]
        if not clones:
            raise ValueError("top_ms is empty")
        for c in clones:
            c._check_params()
        prep = self._prepare(X, y)
        return [c._finish(prep) for c in clones]

    def _prepare(self, X: pd.DataFrame, y: Any) -> _Prepared:
        """Step 1 and the scoring of Step 2: what every ``top_m`` shares."""
        metric_name, metric = self._check_params()
        frame = self._check_frame(X)
        y_arr = np.asarray(y).reshape(-1)
        if len(y_arr) != len(frame):
            raise DataValidationError(f"y has {len(y_arr)} values for {len(frame)} rows")
        classes, target = encode_targets(y_arr, self.task, self.classes)
        published = list(self.models or [])
        ids = candidate_ids(published, self.model_ids, reserved=OWN_ID)
        has_own = self.own_model is not None
        if not has_own and not published:
            raise ValueError("nothing to customize: no subscribed models and no own model")

        rs = check_random_state(self.random_state)
        # The folds and M^s take the seed OwnLearner(random_state=...) takes, so M^s is exactly
        # the Own baseline fitted with the same random_state.
        own_seed = int(rs.randint(0, 2**31 - 1))
        fusion_seed = int(rs.randint(0, 2**31 - 1))
        tra, fuse_rows, folds = self._plan_rows(target, own_seed, has_own)

        # Step 2 (first half): the subscribed models' outputs on the fusion rows, aligned to the
        # label set; a model that cannot be aligned fails here, before any training.
        t0 = time.perf_counter()
        outputs = self._aligned(published, frame.iloc[fuse_rows], classes)
        t1 = time.perf_counter()
        # Step 1: M^s, its outputs first among the candidates'.
        own, outputs = self._with_own(
            frame, y_arr, target, classes, (tra, fuse_rows, folds), own_seed, outputs
        )
        candidates = ([OwnModel(own, list(frame.columns))] if own is not None else []) + published
        t2 = time.perf_counter()
        scores = metric.score(target[fuse_rows], np.stack(outputs))
        return _Prepared(
            metric_name=metric_name,
            metric=metric,
            frame=frame,
            target=target,
            classes=classes,
            rows=(tra, fuse_rows),
            folds=folds,
            own=own,
            outputs=outputs,
            candidates=candidates,
            cand_ids=([OWN_ID] if own is not None else []) + ids,
            scores=scores,
            fusion_seed=fusion_seed,
            timings={"own": t2 - t1, "outputs": t1 - t0, "score": time.perf_counter() - t2},
        )

    def _finish(self, prep: _Prepared) -> Customizer:
        """Steps 2–4 for this ``top_m``: select, build O^s and fit f_c; sets the fitted state."""
        _, metric = self._check_params()
        own, outputs, classes = prep.own, prep.outputs, prep.classes
        tra, fuse_rows = prep.rows
        timings = {"own": prep.timings["own"], "outputs": prep.timings["outputs"]}
        t2 = time.perf_counter()
        stacked = self._fusion_kind() == "stacked"
        selected = self._select(prep.scores, metric, stacked and own is not None)
        t3 = time.perf_counter()
        timings["select"] = t3 - t2 + prep.timings["score"]

        # Steps 3-4: O^s = {(m(x), y)} and the fusion model f_c.
        fusion_target = prep.target[fuse_rows]
        scale = None
        if stacked and self.task == "regression":
            scale = self._target_scale(fusion_target)
        meta = self._to_meta([outputs[i] for i in selected], stacked, scale)
        fusion = self._make_fusion(
            prep.fusion_seed, outputs[0].shape[1], own is not None and 0 in selected
        )
        fit_target = fusion_target if scale is None else (fusion_target - scale[0]) / scale[1]
        fusion.fit(meta, fit_target)
        timings["fuse"] = time.perf_counter() - t3

        if classes is not None:
            self.classes_ = classes
        self.stacked_ = stacked
        self.target_scale_ = scale
        self.n_features_in_ = prep.frame.shape[1]
        self.feature_names_in_ = np.asarray(prep.frame.columns, dtype=object)
        self.train_index_, self.fusion_index_ = tra, fuse_rows
        self.folds_ = prep.folds
        self.own_model_ = own
        self.candidate_ids_ = prep.cand_ids
        self.selection_metric_ = prep.metric_name
        self.selection_scores_ = prep.scores
        self.selected_ = selected
        self.selected_ids_ = [prep.cand_ids[i] for i in selected]
        self.models_ = [prep.candidates[i] for i in selected]
        self.meta_blocks_, self.meta_feature_names_ = _meta_layout(
            [outputs[i].shape[1] for i in selected], self.selected_ids_, classes
        )
        self.meta_std_ = meta.std(axis=0)
        self.fusion_model_ = fusion
        self.fallback_ = bool(getattr(fusion, "fallback_", False))
        weights = getattr(fusion, "weights_", None) if stacked else None
        self.fusion_weights_ = (
            {}
            if weights is None
            else {i: float(w) for i, w in zip(self.selected_ids_, weights, strict=True)}
        )
        self.fit_timings_ = timings
        return self

    def _plan_rows(
        self, target: np.ndarray, seed: int, has_own: bool
    ) -> tuple[np.ndarray, np.ndarray, list[tuple[np.ndarray, np.ndarray]] | None]:
        """The rows M^s trains on, the fusion rows, and the cross-fitting folds (or None)."""
        folds_k = self._cv()
        if folds_k is None or not has_own:
            tra, fuse_rows = self._split(target, seed, has_own and folds_k is None)
            return tra, fuse_rows, None
        rows = np.arange(len(target))
        return rows, rows, make_folds(target, folds_k, self.task, seed)

    def _with_own(
        self,
        frame: pd.DataFrame,
        y: np.ndarray,
        target: np.ndarray,
        classes: np.ndarray | None,
        plan: tuple[np.ndarray, np.ndarray, list[tuple[np.ndarray, np.ndarray]] | None],
        seed: int,
        outputs: list[np.ndarray],
    ) -> tuple[OwnLearner | None, list[np.ndarray]]:
        """Step 1: fit M^s (cross-fitted over ``folds``: out-of-fold outputs on every row, then
        refit on all rows; else on ``tra``) and put its fusion-row outputs first."""
        tra, fuse_rows, folds = plan
        if self.own_model is None:
            return None, outputs
        if folds is not None:
            own, own_out = self._fit_own_crossfit(frame, target, classes, folds, seed)
            return own, [own_out, *outputs]
        own = self._own_learner(seed).fit(frame.iloc[tra], y[tra])
        own_model = OwnModel(own, list(frame.columns))
        return own, [*self._aligned([own_model], frame.iloc[fuse_rows], classes), *outputs]

    def meta_features(self, X: pd.DataFrame) -> np.ndarray:
        """m(x) of Eq. 2 for new rows: the selected models' outputs, concatenated.

        Probabilities (or raw outputs) for the paper's fusion models; centred log-odds (or
        outputs on the scaled target) for the stacked fusion.

        Parameters
        ----------
        X : DataFrame of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, n_meta)
        """
        check_is_fitted(self, "fusion_model_")
        frame = self._check_frame(X)
        out = self._aligned(self.models_, frame, getattr(self, "classes_", None))
        return self._to_meta(out, self.stacked_, self.target_scale_)

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
        pred = np.asarray(self.fusion_model_.predict(self.meta_features(X)), dtype=np.float64)
        if self.target_scale_ is not None:
            pred = pred * self.target_scale_[1] + self.target_scale_[0]
        return pred


@dataclass(frozen=True)
class _Prepared:
    """What :meth:`Customizer._prepare` computes once for every ``top_m``."""

    metric_name: str
    metric: SelectionMetric
    frame: pd.DataFrame
    target: np.ndarray
    classes: np.ndarray | None
    rows: tuple[np.ndarray, np.ndarray]
    folds: list[tuple[np.ndarray, np.ndarray]] | None
    own: OwnLearner | None
    outputs: list[np.ndarray]
    candidates: list[Any]
    cand_ids: list[str]
    scores: np.ndarray
    fusion_seed: int
    timings: dict[str, float]


def _meta_layout(
    widths: list[int], ids: list[str], classes: np.ndarray | None
) -> tuple[list[slice], list[str]]:
    """Each selected model's block of meta-feature columns, and the columns' names."""
    blocks: list[slice] = []
    names: list[str] = []
    start = 0
    suffixes = [f":{c}" for c in classes] if classes is not None else [""]
    for width, model_id in zip(widths, ids, strict=True):
        blocks.append(slice(start, start + width))
        start += width
        names.extend(f"{model_id}{s}" for s in suffixes)
    return blocks, names
