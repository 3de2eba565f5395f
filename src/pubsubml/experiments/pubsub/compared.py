"""The methods of the PubSub-ML evaluation, measured on one fold of one multi-site scenario.

pubsub-ml.txt §7.3 compares PubSub-ML with eight baselines: PubSub-ML* (publishers without DP), Own
(the subscriber alone, non-private), FedAvg, FedProx and FedAdam with DP, each vanilla (V) and
fine-tuned by the subscriber without DP (F).  Joint (all sites' data pooled, non-private) is the upper
bound.  §7.4 fixes the protocol: 5-fold cross-validation; a publisher trains on 80 % of its data; the
subscriber holds out 20 % for testing and splits the rest 60 / 20 (of all its data) into the training
set of its own model and the customization set.  Budgets are per site: PubSub-ML publishers use their
own ε, the FL baselines the minimum ε across all sites (§8.2.1), so that every site gets at least the
protection it asked for.  All FL rounds of all clients are accounted by the FL estimators themselves.

Two departures are configurable (:class:`~pubsubml.experiments.pubsub.consortium.MethodConfig`): the
subscriber's own model, the same learner for Own and inside CUSTOMIZE, is by default an
:class:`~pubsubml.methods.pubsub.own.OwnLearner` chosen by cross-validation (``own_model="paper"`` gives
Table 4's network), and CUSTOMIZE runs with the :class:`~pubsubml.methods.pubsub.customizer.Customizer`'s
defaults (``customizer="paper"`` gives the Tra/Cus protocol).  A scenario with an external
``test`` set is scored on it instead of on folds of the subscriber's rows.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from pubsubml.experiments.metrics import score
from pubsubml.experiments.pubsub.consortium import (
    FL_METHODS,
    LEARNERS,
    METHODS,
    MethodConfig,
    Scenario,
    SimSite,
)
from pubsubml.experiments.pubsub.site_models import (
    network,
    own_model,
    publisher_learner,
    train_publishers,
)
from pubsubml.experiments.runner import Record, kfold_indices
from pubsubml.methods.pubsub.customizer import Customizer
from pubsubml.methods.pubsub.own_crossfit import CrossFitStore

__all__ = [
    "FL_METHODS",
    "LEARNERS",
    "METHODS",
    "MethodConfig",
    "Scenario",
    "SimSite",
    "evaluate_fold",
    "fine_tune_federated",
    "fit_federated",
    "paper_protocol",
    "publisher_learner",
    "train_publishers",
]

_SELECTION = {"f1_minority": "f1_minority", "accuracy": "accuracy", "one_minus_mse": "mse"}


def paper_protocol(metric: str) -> dict[str, Any]:
    """The :class:`~pubsubml.methods.pubsub.customizer.Customizer` options of the paper's CUSTOMIZE.

    M^s on ``Tra`` (75 % of the subscriber's training part, 60 % of all its rows), the fully
    connected fusion layer on ``Cus`` (the other 25 %), candidates ranked by the scenario's
    ``metric`` (pubsub-ml.txt §4, §7.2, §8).
    """
    return {
        "cv": "holdout",
        "fusion_model": "linear",
        "train_split": 0.75,
        "fusion_split": 0.25,
        "selection_metric": _SELECTION.get(metric),
    }


def _score(scenario: Scenario, model: Any, X: pd.DataFrame, y: np.ndarray) -> float:
    return score(scenario.metric, y, model.predict(X), minority=scenario.minority)


def _auc(scenario: Scenario, model: Any, X: pd.DataFrame, y: np.ndarray) -> float:
    """ROC AUC from the model's probabilities (NaN for regression or a one-class test part)."""
    if scenario.task != "classification" or scenario.classes is None or len(np.unique(y)) < 2:
        return math.nan
    proba = model.predict_proba(X)
    return score("roc_auc", y, proba=proba, classes=scenario.classes)


def fit_federated(
    scenario: Scenario,
    name: str,
    clients: list[tuple[pd.DataFrame, np.ndarray]],
    config: MethodConfig,
    seed: int,
) -> Any:
    """Train the FL baseline ``name`` ("FedAvg", "FedProx", "FedAdam") over ``clients``.

    Every site gets the minimum ε of the scenario (pubsub-ml.txt §8.2.1: FL needs one noise
    level for all clients), where PubSub-ML publishers each use their own.

    Parameters
    ----------
    scenario : Scenario
    name : str
        A key of ``FL_METHODS``.
    clients : list of (DataFrame, ndarray)
        Each site's training rows and labels.
    config : MethodConfig
    seed : int

    Returns
    -------
    FederatedMLP
        The fitted global model.
    """
    from pubsubml.methods import federated

    cls = getattr(federated, FL_METHODS[name])
    # Every site, the subscriber included, is an FL client: the federation runs at the smallest
    # budget of all of them (§8.2.1).
    epsilon = federated.min_epsilon(
        [s.epsilon for s in (*scenario.publishers, scenario.subscriber)]
    )
    params: dict[str, Any] = {
        "schema": scenario.schema,
        "task": scenario.task,
        "classes": scenario.classes,
        "hidden_layer_sizes": config.hidden_layer_sizes,
        "rounds": config.fl_rounds,
        "local_epochs": config.fl_local_epochs,
        "batch_size": config.batch_size,
        "client_fraction": config.fl_client_fraction,
        "lr": config.lr,
        "dp": ("central" if config.fl_dp == "central" else True) if config.dp else False,
        "target_epsilon": epsilon,
        "target_delta": scenario.delta,
        "random_state": seed,
    }
    if config.dp and config.dp_defaults:
        # The same public-input rule as the DP publishers' networks (dp_sgd_defaults): the
        # learning rate for DP-SGD at this input width, so both sides of the comparison train
        # in a DP regime rather than at the non-private 1e-3.
        from pubsubml.learners import dp_sgd_defaults

        n_min = min(len(y) for _, y in clients)
        params["lr"] = dp_sgd_defaults(
            n_min,
            epsilon,
            scenario.delta,
            scenario.schema.n_encoded,
            model="mlp",
            task=scenario.task,
        ).learning_rate
    fl = cls(**(params | config.fl_options.get(FL_METHODS[name], {})))
    return fl.fit(clients)


def fine_tune_federated(
    fl: Any, X: pd.DataFrame, y: np.ndarray, config: MethodConfig, seed: int
) -> Any:
    """The "(F)" variant: the subscriber fine-tunes a copy of ``fl`` on its own rows, non-privately.

    pubsub-ml.txt §8.2.3; ``config.fine_tune_epochs`` local epochs.
    """
    from pubsubml.methods.federated import fine_tune

    return fine_tune(fl, X, y, epochs=config.fine_tune_epochs, random_state=seed)


def _fold_rows(
    scenario: Scenario, *, seed: int, fold: int, folds: int
) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    """(publishers' training rows, subscriber's training rows, subscriber's test rows).

    With an external test set every site trains on all of its rows and the subscriber's test part
    is empty (the test rows are ``scenario.test``).
    """
    sub = scenario.subscriber
    if scenario.test is not None:
        if sub.ids is not None:
            raise ValueError("an external test set cannot be combined with shared row ids")
        if fold < 0:
            raise ValueError(f"the repeat index must be >= 0, got {fold}")
        trains = [np.arange(len(s.y)) for s in scenario.publishers]
        return trains, np.arange(len(sub.y)), np.arange(0)
    if sub.ids is not None:
        pub_ids = [s.ids for s in scenario.publishers if s.ids is not None]
        if len(pub_ids) != len(scenario.publishers):
            raise ValueError("either every site has row ids or none has")
        universe = np.unique(np.concatenate([sub.ids, *pub_ids]))
        test_ids = universe[kfold_indices(len(universe), folds, fold, seed, stratify=False)[1]]
        trains = [np.flatnonzero(~np.isin(ids, test_ids)) for ids in pub_ids]
        in_test = np.isin(sub.ids, test_ids)
        return trains, np.flatnonzero(~in_test), np.flatnonzero(in_test)
    strat = scenario.task == "classification"
    trains = [
        kfold_indices(s.y if strat else len(s.y), folds, fold, seed, stratify=strat)[0]
        for s in scenario.publishers
    ]
    tr, te = kfold_indices(sub.y if strat else len(sub.y), folds, fold, seed, stratify=strat)
    return trains, tr, te


def _joined(
    scenario: Scenario, pub_trains: Sequence[np.ndarray], tr: np.ndarray, te: np.ndarray
) -> tuple[pd.DataFrame, np.ndarray, pd.DataFrame]:
    """Joint's pooled data where sites share row ids (Scenarios 3–4): one row per id.

    Every site's columns of an id are joined into one row (what pooling the sites' tables would
    give); features no site holds for an id come from the public defaults.  Training rows are the
    ids in some site's training part; the evaluation rows are the subscriber's test ids, with every
    column any site holds for them (the folds keep those ids out of every training part).

    Returns
    -------
    X_train, y_train, X_eval
    """
    sites = [*scenario.publishers, scenario.subscriber]
    frames = []
    label: dict[Any, Any] = {}
    for site in sites:
        assert site.ids is not None
        frames.append(site.X.set_axis(pd.Index(site.ids), axis=0))
        label.update(zip(site.ids.tolist(), site.y.tolist(), strict=True))
    joined = frames[0]
    for frame in frames[1:]:
        joined = joined.combine_first(frame)
    sub_ids = scenario.subscriber.ids
    assert sub_ids is not None
    pub_ids = [s.ids for s in scenario.publishers if s.ids is not None]
    train_ids = np.unique(
        np.concatenate([*(ids[t] for ids, t in zip(pub_ids, pub_trains, strict=True)), sub_ids[tr]])
    )
    columns = [c for c in scenario.schema.names if c in joined.columns]
    defaults = {f.name: f.default for f in scenario.schema if f.name in joined.columns}
    joined = joined.fillna(defaults)  # an id no site holds that column for
    X = scenario.schema.extend(joined.loc[train_ids, columns].reset_index(drop=True))
    y = np.asarray([label[i] for i in train_ids.tolist()])
    X_eval = scenario.schema.extend(joined.loc[sub_ids[te], columns].reset_index(drop=True))
    return X, y, X_eval


def evaluate_fold(
    scenario: Scenario,
    *,
    seed: int,
    fold: int,
    folds: int = 5,
    methods: Sequence[str] = METHODS,
    config: MethodConfig | None = None,
    cross_fits: CrossFitStore | None = None,
) -> list[Record]:
    """Score each of ``methods`` on the subscriber's test part of fold ``fold``.

    Parameters
    ----------
    scenario : Scenario
        With ``scenario.test`` set, every site trains on all of its rows and every method is
        scored on the external test set; ``fold`` is then a repeat index that only seeds the
        models, and ``folds`` is unused.
    seed : int
        Seeds the folds and every model.
    fold, folds : int
        Which fold of a ``folds``-fold split (stratified for classification) is the test part.
    methods : sequence of str
        A subset of :data:`METHODS`.
    config : MethodConfig, optional
    cross_fits : CrossFitStore, optional
        Where the own model's cross-fits are kept for reuse: Own, PubSub-ML and PubSub-ML* share
        M^s (the same learner, rows and seed), so it is cross-fitted once per fold
        (:class:`~pubsubml.methods.pubsub.own_crossfit.CrossFitStore`); a new store per call by default, one
        store shared by calls that score the same subscriber.  Each method's ``seconds`` still
        include the cross-fit's seconds, as if it had run again.

    Returns
    -------
    list of dict
        ``{"method", "score", "auc", "epsilon", "seconds"}`` per method; ``epsilon`` is the
        largest ε any site spent for that method (``inf`` for non-private methods).  Own and the
        PubSub-ML methods add ``own_choice`` (the own model's kind, ``"paper"`` for Table 4's
        network); the PubSub-ML methods add ``fallback`` (whether CUSTOMIZE fell back to the own
        model alone).

    Raises
    ------
    ValueError
        An unknown method name or own model.

    References
    ----------
    pubsub-ml.txt §7.3 (methods), §7.4 (protocol).
    """
    config = config or MethodConfig()
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise ValueError(f"unknown methods {unknown}; choose from {METHODS}")
    pub_trains, tr, te = _fold_rows(scenario, seed=seed, fold=fold, folds=folds)
    run = _Fold(scenario, config, pub_trains, tr, te, rs=seed * 1000 + fold)
    store = CrossFitStore() if cross_fits is None else cross_fits
    return [run.record(method, store) for method in methods]


_Run = tuple[Any, pd.DataFrame, float, Record]


class _Fold:
    """One fold of one seed: the rows every method trains on and is scored on (§7.4)."""

    def __init__(
        self,
        scenario: Scenario,
        config: MethodConfig,
        pub_trains: list[np.ndarray],
        tr: np.ndarray,
        te: np.ndarray,
        *,
        rs: int,
    ) -> None:
        self.scenario = scenario
        self.config = config
        self.pub_trains = pub_trains
        self.tr, self.te = tr, te
        self.rs = rs
        sub = scenario.subscriber
        self.X_tr, self.y_tr = sub.X.iloc[tr], sub.y[tr]
        if scenario.test is not None:
            self.X_te, self.y_te = scenario.test.X, scenario.test.y
        else:
            self.X_te, self.y_te = sub.X.iloc[te], sub.y[te]
        self.fl_models: dict[str, Any] = {}
        self.fl_seconds: dict[str, float] = {}
        self.extra_seconds = 0.0
        self.cross_fits: CrossFitStore | None = None

    def record(self, method: str, cross_fits: CrossFitStore) -> Record:
        """Train ``method``, time it and score it on the test rows.

        A cross-fit of the own model taken from ``cross_fits`` adds the seconds it took when it
        ran, so ``seconds`` is the method's time as if it had trained alone.
        """
        self.extra_seconds = 0.0
        reused = cross_fits.reused_seconds
        t0 = time.perf_counter()
        self.cross_fits = cross_fits  # given to the own model of Own and of CUSTOMIZE
        model, X_eval, eps, extra = self._run(method)
        seconds = time.perf_counter() - t0 + self.extra_seconds
        seconds += cross_fits.reused_seconds - reused
        value = _score(self.scenario, model, X_eval, self.y_te)
        auc = _auc(self.scenario, model, X_eval, self.y_te)
        record = {"method": method, "score": value, "auc": auc, "epsilon": eps}
        return record | {"seconds": seconds} | extra

    def _run(self, method: str) -> _Run:
        if method == "PubSub-ML":
            return self.pubsub(self.config.dp)
        if method == "PubSub-ML*":
            return self.pubsub(False)
        if method == "Own":
            return self.own()
        if method == "Joint":
            return self.joint()
        return self.fl(method[:-3], tuned=method[-2] == "F")

    def pubsub(self, dp: bool) -> _Run:
        """PubSub-ML (DP publishers) or PubSub-ML* (non-DP): publish, then CUSTOMIZE."""
        scenario, config, rs = self.scenario, self.config, self.rs
        models = train_publishers(scenario, self.pub_trains, config, dp=dp, seed=rs)
        own = own_model(scenario, config, rs) if config.own_model == "paper" else config.own_model
        protocol: dict[str, Any] = {}
        if config.customizer == "paper":  # Tra/Cus holdout and the fully connected layer (§4)
            protocol = paper_protocol(scenario.metric)
        cust = Customizer(
            models=models,
            task=scenario.task,
            own_model=own,
            top_m=config.top_m,
            schema=scenario.schema,
            classes=scenario.classes,
            random_state=rs,
            cross_fits=self.cross_fits,
            **protocol,
        ).fit(self.X_tr, self.y_tr)
        eps = max(float(getattr(m.estimator, "epsilon_", math.inf)) for m in models)
        choice = "paper" if config.own_model == "paper" else _choice(cust.own_model_)
        extra = {"own_choice": choice, "fallback": bool(cust.fallback_)}
        return cust, self.X_te, eps, extra

    def own(self) -> _Run:
        """The subscriber's own model on its own rows."""
        learner = own_model(self.scenario, self.config, self.rs, cross_fits=self.cross_fits)
        model = learner.fit(self.X_tr, self.y_tr)
        return model, self.X_te, math.inf, {"own_choice": _choice(model)}

    def joint(self) -> _Run:
        """One non-private network on the pooled rows of every site (the upper reference)."""
        scenario = self.scenario
        if scenario.subscriber.ids is not None:  # one population: join the sites' columns per id
            X, y, X_eval = _joined(scenario, self.pub_trains, self.tr, self.te)
        else:
            frames = [
                scenario.schema.extend(s.X.iloc[t])
                for s, t in zip(scenario.publishers, self.pub_trains, strict=True)
            ]
            X = pd.concat([*frames, scenario.schema.extend(self.X_tr)], ignore_index=True)
            y = np.concatenate(
                [
                    *(s.y[t] for s, t in zip(scenario.publishers, self.pub_trains, strict=True)),
                    self.y_tr,
                ]
            )
            X_eval = scenario.schema.extend(self.X_te)
        net = network(scenario, scenario.schema, self.config, dp=False, random_state=self.rs)
        return net.fit(X, y), X_eval, math.inf, {}

    def fl(self, name: str, tuned: bool) -> _Run:
        """A federated baseline, trained once per fold; its (F) variant fine-tunes it locally."""
        scenario, config, rs = self.scenario, self.config, self.rs
        if name not in self.fl_models:
            t0 = time.perf_counter()
            clients = [
                (scenario.schema.extend(s.X.iloc[t]), s.y[t])
                for s, t in zip(scenario.publishers, self.pub_trains, strict=True)
            ] + [(scenario.schema.extend(self.X_tr), self.y_tr)]
            self.fl_models[name] = fit_federated(scenario, name, clients, config, rs)
            self.fl_seconds[name] = time.perf_counter() - t0
        elif tuned:  # the (F) variant's time includes training the global model it starts from
            self.extra_seconds += self.fl_seconds[name]
        model = self.fl_models[name]
        eps = float(model.epsilon_)
        X_eval = scenario.schema.extend(self.X_te)
        if tuned:
            X_own = scenario.schema.extend(self.X_tr)
            model = fine_tune_federated(model, X_own, self.y_tr, config, rs)
        return model, X_eval, eps, {}


def _choice(own: Any) -> str:
    """The kind an own model ended up as: an OwnLearner's ``choice_``, else Table 4's network."""
    return str(getattr(own, "choice_", "paper"))
