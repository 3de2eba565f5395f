"""CUSTOMIZE: a subscriber fuses subscribed black-box models with its own (pubsub-ml.txt §4).

:class:`Customizer` is Algorithm 2 as a scikit-learn estimator, and ``fit(X, y)`` reads as the
algorithm, on the subscriber's private DataFrame.  Where each of the five steps happens:

1. **M^s** — :mod:`~pubsubml.methods.pubsub.own` (the learner, the same as the Own baseline) and
   :mod:`~pubsubml.methods.pubsub.own_crossfit` (its rows: by default cross-fitted over 5 folds,
   every row's output from the model that did not see it, then refitted on all rows, as
   :class:`sklearn.ensemble.StackingClassifier` does; ``cv="holdout"``: the paper's Tra/Cus);
2. **Sel** — :mod:`~pubsubml.methods.pubsub.selection`: every candidate of M^s ∪ Λ_s is scored
   on the fusion rows (M^s by its out-of-fold outputs) and the ``top_m`` best are kept;
3. **O^s** (Eq. 3) — :mod:`~pubsubml.methods.pubsub.outputs`: the selected models' outputs on
   feature-extended inputs x', concatenated as m(x) (Eq. 2);
4. **f_c** — :mod:`~pubsubml.methods.pubsub.fusion`, fitted on O^s over the fusion rows;
5. **C^s = f_c ∘ m** — here: :meth:`Customizer.predict` / :meth:`Customizer.predict_proba`.

``fit`` runs Step 1 and Step 2's scores (``_candidates``, shared by every ``top_m``), then Steps
2–4 (``_fuse``), as scikit-learn's ``_BaseStacking.fit`` runs its folds, base estimators and final
estimator.  The subscriber's inputs (public schema, classes, received models verified by trusted
keys) come from :func:`~pubsubml.methods.pubsub.subscription.prepare_subscription`.  Subscribed
models are black boxes (DESIGN.md, "Model-agnostic through outputs"; Theorem 4), DP or not:
non-private publishers give PubSub-ML* (pubsub-ml.txt §7.3, §8.3.4).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import clone
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from pubsubml.errors import DataValidationError
from pubsubml.methods.pubsub.customizer_params import CustomizerParams, Folds
from pubsubml.methods.pubsub.fusion import fusion_kind, make_fusion
from pubsubml.methods.pubsub.outputs import (
    candidate_ids,
    check_frame,
    fusion_targets,
    meta_features,
    meta_layout,
    target_scale,
)
from pubsubml.methods.pubsub.own import OwnLearner, OwnModel
from pubsubml.methods.pubsub.selection import select_top
from pubsubml.methods.pubsub.task import Task, encode_targets

__all__ = ["OWN_ID", "Customizer", "Task"]

OWN_ID = "own"
"""The own model's name among the candidates."""


class Customizer(CustomizerParams):
    """CUSTOMIZE(s, loss) of pubsub-ml.txt Algorithm 2: the customized model C^s = f_c ∘ m.

    Parameters
    ----------
    models : sequence of black-box models, optional
        The subscribed models Λ_s, already fitted black boxes.  Each needs only the names of
        its inputs (``input_features``, else ``feature_names_in_``: any scikit-learn estimator
        fitted on a DataFrame qualifies), called on the subscriber's rows restricted to them
        after the ones it lacks are added at ``schema``'s public defaults (a feature outside
        ``schema`` is left for the model to fill, as a ``PublishedModel`` does from its card);
        ``predict_proba`` and its labels (``classes``, else ``classes_``, each among the
        subscriber's classes) for classification, ``predict`` for regression; optionally a
        ``model_id``.  Never refitted; :func:`clone` shares them.  With ``runner``, the runner
        calls them instead (``published_runner`` takes ``PublishedModel`` s only).
    task : {"classification", "regression"}, default="classification"
    own_model : {"auto", "mlp", "forest", "logistic"}, estimator or None, default="auto"
        M^s, an :class:`~pubsubml.methods.pubsub.own.OwnLearner` of this kind: ``"auto"`` picks the
        candidate with the best out-of-fold loss on the subscriber's rows (M^s is never
        published, so this costs no privacy).  An estimator taking the DataFrame is cloned.
        ``None`` uses no own model; then every row goes to the fusion.
    fusion_model : {"stacked", "linear", "forest"} or estimator, default="stacked"
        f_c (:mod:`~pubsubml.methods.pubsub.fusion`).  ``"stacked"``: a ``StackedFusion`` on
        centred log-odds, the own model's weight unpenalised, λ chosen by internal CV over a grid
        with ∞ (= M^s alone).  ``"linear"``: the paper's fully connected layer (§7.2) on
        probabilities (L2 logistic regression with C = 1, or ridge); ``"forest"``: a random-forest
        meta-model (pfl-stacking.txt §4).  A ``StackedFusion`` instance keeps its options (e.g.
        ``rule="1se"``); any other estimator is cloned and fitted on probabilities.
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
    cross_fits : CrossFitStore, optional
        Reuse M^s's cross-fit from this store when the Own baseline (an ``OwnLearner`` given the
        same store) or another customizer already ran it on the same rows and seed
        (:class:`~pubsubml.methods.pubsub.own_crossfit.CrossFitStore`); shared by ``clone``.

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

    # ---- fit: Algorithm 2 ---------------------------------------------------------------------
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
        pool = self._candidates(X, y)  # Step 1: M^s; Step 2: every candidate's score on Cus
        return self._fuse(pool)  # Step 2: Sel; Step 3: O^s; Step 4: f_c

    def fit_top_ms(self, X: pd.DataFrame, y: Any, top_ms: Sequence[int | None]) -> list[Customizer]:
        """One fitted clone per ``top_m`` of ``top_ms``, sharing Step 1 and the outputs.

        The own model M^s (its cross-fit and refit), the subscribed models' outputs and the
        candidates' scores do not depend on ``top_m``; they are computed once, then each clone
        selects its top m and fits its fusion model (Steps 2–4).  Each clone is the customizer
        ``clone(self).set_params(top_m=m).fit(X, y)`` gives, the same selection, weights and
        predictions, for about the cost of one fit plus a fusion per extra ``top_m`` (pubsub-ml.txt
        §8.2.3, Fig. 4).  Every clone's ``fit_timings_`` has the shared ``"own"``/``"outputs"``.

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
        pool = self._candidates(X, y)
        return [c._fuse(pool) for c in clones]

    def _candidates(self, X: pd.DataFrame, y: Any) -> _Candidates:
        """Step 1 and the scores of Step 2: what every ``top_m`` shares."""
        metric_name, metric = self._check_params()
        frame = check_frame(X, self.schema)
        y_arr = np.asarray(y).reshape(-1)
        if len(y_arr) != len(frame):
            raise DataValidationError(f"y has {len(y_arr)} values for {len(frame)} rows")
        classes, target = encode_targets(y_arr, self.task, self.classes)
        published = list(self.models or [])
        ids = candidate_ids(published, self.model_ids, reserved=OWN_ID)
        if self.own_model is None and not published:
            raise ValueError("nothing to customize: no subscribed models and no own model")
        rs = check_random_state(self.random_state)
        # The folds and M^s take the seed OwnLearner(random_state=...) takes, so M^s is exactly
        # the Own baseline fitted with the same random_state.
        own_seed = int(rs.randint(0, 2**31 - 1))
        fusion_seed = int(rs.randint(0, 2**31 - 1))
        tra, fuse_rows, folds = self._plan_rows(target, own_seed)
        # Λ_s's outputs on the fusion rows first: a model that cannot be aligned to the label
        # set fails here, before any training.
        t0 = time.perf_counter()
        outputs = self._outputs(published, frame.iloc[fuse_rows], classes)
        t1 = time.perf_counter()
        # Step 1: M^s, its outputs first among the candidates'.
        own, own_outputs = self._fit_own(
            frame, y_arr, target, classes, (tra, fuse_rows, folds), own_seed
        )
        t2 = time.perf_counter()
        # Step 2 (first half): every candidate of M^s ∪ Λ_s scored on the fusion rows.
        outputs = own_outputs + outputs
        scores = metric.score(target[fuse_rows], np.stack(outputs))
        return _Candidates(
            metric_name=metric_name,
            frame=frame,
            target=target,
            classes=classes,
            rows=(tra, fuse_rows),
            folds=folds,
            own=own,
            outputs=outputs,
            models=([OwnModel(own, list(frame.columns))] if own is not None else []) + published,
            ids=([OWN_ID] if own is not None else []) + ids,
            scores=scores,
            fusion_seed=fusion_seed,
            timings={"own": t2 - t1, "outputs": t1 - t0, "score": time.perf_counter() - t2},
        )

    def _fuse(self, pool: _Candidates) -> Customizer:
        """Steps 2–4 for this ``top_m``: select, build O^s and fit f_c; sets the fitted state."""
        _, metric = self._check_params()
        t2 = time.perf_counter()
        stacked = fusion_kind(self.fusion_model) == "stacked"
        # Step 2: Sel, the top_m best candidates (M^s always kept by the stacked fusion).
        selected = select_top(
            pool.scores, metric, self.top_m, keep_first=stacked and pool.own is not None
        )
        t3 = time.perf_counter()
        # Step 3: O^s = {(m(x), y)} over the fusion rows (Eq. 3).
        fusion_y = pool.target[pool.rows[1]]
        scale = None
        if stacked and self.task == "regression":
            scale = target_scale(fusion_y, self.target_bounds)
        meta = meta_features(
            [pool.outputs[i] for i in selected], task=self.task, stacked=stacked, scale=scale
        )
        # Step 4: the fusion model f_c, trained on O^s.
        fusion = make_fusion(
            self.fusion_model,
            task=self.task,
            seed=pool.fusion_seed,
            width=pool.outputs[0].shape[1],
            has_own=pool.own is not None and 0 in selected,
        )
        fusion.fit(meta, fusion_targets(fusion_y, scale))
        timings = {"own": pool.timings["own"], "outputs": pool.timings["outputs"]}
        timings["select"] = t3 - t2 + pool.timings["score"]
        timings["fuse"] = time.perf_counter() - t3
        self.stacked_ = stacked
        self.target_scale_ = scale
        self.fit_timings_ = timings
        return self._set_fitted(pool, selected, meta, fusion)

    def _set_fitted(
        self, pool: _Candidates, selected: np.ndarray, meta: np.ndarray, fusion: Any
    ) -> Customizer:
        """Step 5's C^s = f_c ∘ m: the fitted attributes ``predict`` reads."""
        if pool.classes is not None:
            self.classes_ = pool.classes
        self.n_features_in_ = pool.frame.shape[1]
        self.feature_names_in_ = np.asarray(pool.frame.columns, dtype=object)
        self.train_index_, self.fusion_index_ = pool.rows
        self.folds_ = pool.folds
        self.own_model_ = pool.own
        self.candidate_ids_ = pool.ids
        self.selection_metric_ = pool.metric_name
        self.selection_scores_ = pool.scores
        self.selected_ = selected
        self.selected_ids_ = [pool.ids[i] for i in selected]
        self.models_ = [pool.models[i] for i in selected]
        self.meta_blocks_, self.meta_feature_names_ = meta_layout(
            [pool.outputs[i].shape[1] for i in selected], self.selected_ids_, pool.classes
        )
        self.meta_std_ = meta.std(axis=0)
        self.fusion_model_ = fusion
        self.fallback_ = bool(getattr(fusion, "fallback_", False))
        weights = getattr(fusion, "weights_", None) if self.stacked_ else None
        self.fusion_weights_ = (
            {}
            if weights is None
            else {i: float(w) for i, w in zip(self.selected_ids_, weights, strict=True)}
        )
        return self

    # ---- Step 1: M^s ------------------------------------------------------------------------------
    def _fit_own(
        self,
        frame: pd.DataFrame,
        y: np.ndarray,
        target: np.ndarray,
        classes: np.ndarray | None,
        plan: tuple[np.ndarray, np.ndarray, Folds | None],
        seed: int,
    ) -> tuple[OwnLearner | None, list[np.ndarray]]:
        """Step 1: M^s and its outputs on the fusion rows (none without an own model).

        Cross-fitted over the folds (out-of-fold outputs on every row, then refit on all rows),
        else fitted on ``Tra``.
        """
        tra, fuse_rows, folds = plan
        if self.own_model is None:
            return None, []
        own = self._own_learner(seed)
        if folds is not None:
            n_classes = 0 if classes is None else len(classes)
            found = own.cross_fit(frame, target, folds=folds, seed=seed, n_classes=n_classes)
            return own.adopt(found, classes, frame), [found.oof]
        own.fit(frame.iloc[tra], y[tra])
        return own, self._outputs(
            [OwnModel(own, list(frame.columns))], frame.iloc[fuse_rows], classes
        )

    # ---- Step 5: C^s = f_c ∘ m ----------------------------------------------------------------
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
        frame = check_frame(X, self.schema)
        out = self._outputs(self.models_, frame, getattr(self, "classes_", None))
        return meta_features(out, task=self.task, stacked=self.stacked_, scale=self.target_scale_)

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
class _Candidates:
    """M^s ∪ Λ_s with their outputs and scores on the fusion rows: what every ``top_m`` shares."""

    metric_name: str
    frame: pd.DataFrame
    target: np.ndarray
    classes: np.ndarray | None
    rows: tuple[np.ndarray, np.ndarray]
    folds: Folds | None
    own: OwnLearner | None
    outputs: list[np.ndarray]
    models: list[Any]
    ids: list[str]
    scores: np.ndarray
    fusion_seed: int
    timings: dict[str, float]
