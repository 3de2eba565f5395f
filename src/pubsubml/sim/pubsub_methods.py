"""The methods of the PubSub-ML evaluation, measured on one fold of one multi-site scenario.

pubsub-ml.txt §7.3 compares PubSub-ML with eight baselines: PubSub-ML* (publishers without DP), Own
(the subscriber alone, non-private), FedAvg, FedProx and FedAdam with DP, each vanilla (V) and
fine-tuned by the subscriber without DP (F).  Joint (all sites' data pooled, non-private) is the upper
bound.  §7.4 fixes the protocol: 5-fold cross-validation; a publisher trains on 80 % of its data; the
subscriber holds out 20 % for testing and splits the rest 60 / 20 (of all its data) into the training
set of its own model and the customization set.  Budgets are per site: PubSub-ML publishers use their
own ε, the FL baselines the minimum ε across all sites (§8.2.1), so that every site gets at least the
protection it asked for.  All FL rounds of all clients are accounted by the FL estimators themselves.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import clone

from pubsubml.learners.mlp import DPMLPClassifier, DPMLPRegressor, fit_many
from pubsubml.learners.registry import create_learner
from pubsubml.methods.outputs import OwnModel
from pubsubml.methods.pubsub import Customizer
from pubsubml.schema import FeatureSchema
from pubsubml.sim.metrics import score
from pubsubml.sim.pubsub_setup import (
    FL_METHODS,
    LEARNERS,
    METHODS,
    MethodConfig,
    Scenario,
    Site,
)
from pubsubml.sim.runner import Record, kfold_indices

__all__ = [
    "FL_METHODS",
    "LEARNERS",
    "METHODS",
    "MethodConfig",
    "Scenario",
    "Site",
    "evaluate_fold",
    "fine_tune_federated",
    "fit_federated",
    "train_publishers",
]

_SELECTION = {"f1_minority": "f1_minority", "accuracy": "accuracy", "one_minus_mse": "mse"}


def _mlp(scenario: Scenario, schema: FeatureSchema, config: MethodConfig, **kw: Any) -> Any:
    common = dict(
        schema=schema,
        hidden_layer_sizes=config.hidden_layer_sizes,
        epochs=config.epochs,
        batch_size=config.batch_size,
        learning_rate=config.lr,
        target_delta=scenario.delta,
        **kw,
    )
    if scenario.task == "classification":
        return DPMLPClassifier(classes=scenario.classes, **common)
    return DPMLPRegressor(**common)


def _publisher_estimator(
    scenario: Scenario, site: Site, config: MethodConfig, *, dp: bool, seed: int
) -> Any:
    schema = scenario.schema.subset(site.X.columns)
    if site.learner == "mlp" or not dp:
        return _mlp(
            scenario,
            schema,
            config,
            dp=dp,
            target_epsilon=site.epsilon if dp else None,
            random_state=seed,
        )
    if site.learner not in LEARNERS or scenario.task != "classification":
        raise ValueError(
            f"unknown publisher learner {site.learner!r}; choose from {list(LEARNERS)}"
        )
    return create_learner(
        LEARNERS[site.learner],
        schema=schema,
        classes=scenario.classes,
        epsilon=site.epsilon,
        random_state=seed,
    )


def train_publishers(
    scenario: Scenario,
    trains: Sequence[np.ndarray],
    config: MethodConfig,
    *,
    dp: bool,
    seed: int,
) -> list[Any]:
    """Train every publisher's model on its rows ``trains[i]`` (DP unless ``dp=False``).

    Publishers with the same columns, model type and budget are trained together on the stacked
    DP-SGD engine (:func:`~pubsubml.learners.mlp.fit_many`); each still has its own seed, sample rate,
    σ and accountant.

    Returns
    -------
    list of models wrapped with their ``input_features`` (in the order of the publishers)
    """
    groups: dict[tuple[Any, ...], list[int]] = {}
    for i, site in enumerate(scenario.publishers):
        key = (tuple(site.X.columns), site.learner if dp else "mlp", site.epsilon if dp else 0.0)
        groups.setdefault(key, []).append(i)
    models: list[Any] = [None] * len(scenario.publishers)
    for (cols, learner, _), members in groups.items():
        first = scenario.publishers[members[0]]
        est = _publisher_estimator(scenario, first, config, dp=dp, seed=seed * 7919 + members[0])
        Xs = [scenario.publishers[i].X.iloc[trains[i]] for i in members]
        ys = [scenario.publishers[i].y[trains[i]] for i in members]
        if learner == "mlp":
            fitted = fit_many(est, Xs, ys)
        else:
            fitted = [
                clone(est).set_params(random_state=seed * 7919 + i).fit(X, y)
                for i, X, y in zip(members, Xs, ys, strict=True)
            ]
        for i, model in zip(members, fitted, strict=True):
            models[i] = OwnModel(model, list(cols))
    return models


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
    """(publishers' training rows, subscriber's training rows, subscriber's test rows)."""
    sub = scenario.subscriber
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
) -> list[Record]:
    """Score each of ``methods`` on the subscriber's test part of fold ``fold``.

    Parameters
    ----------
    scenario : Scenario
    seed : int
        Seeds the folds and every model.
    fold, folds : int
        Which fold of a ``folds``-fold split (stratified for classification) is the test part.
    methods : sequence of str
        A subset of :data:`METHODS`.
    config : MethodConfig, optional

    Returns
    -------
    list of dict
        ``{"method", "score", "epsilon", "seconds"}`` per method; ``epsilon`` is the largest ε any
        site spent for that method (``inf`` for non-private methods).

    Raises
    ------
    ValueError
        An unknown method name.
    """
    config = config or MethodConfig()
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise ValueError(f"unknown methods {unknown}; choose from {METHODS}")
    pub_trains, tr, te = _fold_rows(scenario, seed=seed, fold=fold, folds=folds)
    sub = scenario.subscriber
    X_tr, y_tr, X_te, y_te = sub.X.iloc[tr], sub.y[tr], sub.X.iloc[te], sub.y[te]
    rs = seed * 1000 + fold
    out: list[Record] = []

    out_extra = [0.0]

    def timed(method: str, run: Callable[[], tuple[Any, pd.DataFrame, float]]) -> None:
        out_extra[0] = 0.0
        t0 = time.perf_counter()
        model, X_eval, eps = run()
        seconds = time.perf_counter() - t0 + out_extra[0]
        value = _score(scenario, model, X_eval, y_te)
        auc = _auc(scenario, model, X_eval, y_te)
        out.append(
            {"method": method, "score": value, "auc": auc, "epsilon": eps, "seconds": seconds}
        )

    def pubsub(dp: bool) -> tuple[Any, pd.DataFrame, float]:
        models = train_publishers(scenario, pub_trains, config, dp=dp, seed=rs)
        cust = Customizer(
            models=models,
            task=scenario.task,
            own_model="mlp",
            top_m=config.top_m,
            selection_metric=_SELECTION.get(scenario.metric),
            train_split=0.75,
            fusion_split=0.25,
            schema=scenario.schema,
            classes=scenario.classes,
            random_state=rs,
        ).fit(X_tr, y_tr)
        eps = max(float(getattr(m.estimator, "epsilon_", math.inf)) for m in models)
        return cust, X_te, eps

    def own() -> tuple[Any, pd.DataFrame, float]:
        est = _mlp(scenario, scenario.schema.subset(sub.X.columns), config, dp=False)
        return est.set_params(random_state=rs).fit(X_tr, y_tr), X_te, math.inf

    def joint() -> tuple[Any, pd.DataFrame, float]:
        if sub.ids is not None:  # one population: pool by joining the sites' columns per row id
            X, y, X_eval = _joined(scenario, pub_trains, tr, te)
        else:
            frames = [
                scenario.schema.extend(s.X.iloc[t])
                for s, t in zip(scenario.publishers, pub_trains, strict=True)
            ]
            X = pd.concat([*frames, scenario.schema.extend(X_tr)], ignore_index=True)
            y = np.concatenate(
                [*(s.y[t] for s, t in zip(scenario.publishers, pub_trains, strict=True)), y_tr]
            )
            X_eval = scenario.schema.extend(X_te)
        est = _mlp(scenario, scenario.schema, config, dp=False, random_state=rs).fit(X, y)
        return est, X_eval, math.inf

    fl_cache: dict[str, Any] = {}
    fl_seconds: dict[str, float] = {}

    def fl(name: str, tuned: bool) -> tuple[Any, pd.DataFrame, float]:
        if name not in fl_cache:
            t0 = time.perf_counter()
            clients = [
                (scenario.schema.extend(s.X.iloc[t]), s.y[t])
                for s, t in zip(scenario.publishers, pub_trains, strict=True)
            ] + [(scenario.schema.extend(X_tr), y_tr)]
            fl_cache[name] = fit_federated(scenario, name, clients, config, rs)
            fl_seconds[name] = time.perf_counter() - t0
        elif tuned:  # the (F) variant's time includes training the global model it starts from
            out_extra[0] += fl_seconds[name]
        model = fl_cache[name]
        eps = float(model.epsilon_)
        X_eval = scenario.schema.extend(X_te)
        if tuned:
            model = fine_tune_federated(model, scenario.schema.extend(X_tr), y_tr, config, rs)
        return model, X_eval, eps

    for method in methods:
        if method == "PubSub-ML":
            timed(method, lambda: pubsub(config.dp))
        elif method == "PubSub-ML*":
            timed(method, lambda: pubsub(False))
        elif method == "Own":
            timed(method, own)
        elif method == "Joint":
            timed(method, joint)
        else:
            base, variant = method[:-3], method[-2]
            timed(method, lambda b=base, v=variant: fl(b, v == "F"))  # type: ignore[misc]
    return out
