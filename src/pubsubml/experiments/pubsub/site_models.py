"""The models a PubSub-ML evaluation trains: publishers' models and the subscriber's own model.

pubsub-ml.txt §7.2 (Table 4) trains every site's network for 30 epochs with minibatch 100; §8.2.2
lets publishers choose other DP model types.  :func:`train_publishers` trains each publisher's
model to its own budget (the model types of :data:`~pubsubml.experiments.pubsub.consortium.LEARNERS`), and
:func:`own_model` builds the subscriber's own model M^s, one definition for the Own baseline and
for CUSTOMIZE (§4 Step 1, §7.3).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from sklearn.base import clone

from pubsubml.experiments.pubsub.consortium import (
    APPROXIMATE_DP,
    LEARNERS,
    NONPRIVATE_LEARNERS,
    NONPRIVATE_PARAMS,
    OWN_MODELS,
    MethodConfig,
    Scenario,
    SimSite,
)
from pubsubml.learners.catalog import create_learner
from pubsubml.learners.mlp import DPMLPClassifier, DPMLPRegressor, fit_many
from pubsubml.methods.pubsub.own import OwnLearner, OwnModel
from pubsubml.methods.pubsub.own_crossfit import CrossFitStore
from pubsubml.schema import FeatureSchema

__all__ = ["network", "own_model", "publisher_learner", "train_publishers"]


def network(
    scenario: Scenario, schema: FeatureSchema, config: MethodConfig, *, dp: bool, **kw: Any
) -> Any:
    """Table 4's network (pubsub-ml.txt §7.2), unfitted.

    Parameters
    ----------
    scenario : Scenario
        Gives the task, the public label set and δ.
    schema : FeatureSchema
        The public schema of the columns it trains on.
    config : MethodConfig
        Layers, epochs, batch and learning rate; with ``config.dp_defaults``, DP-SGD training
        (``dp=True``) leaves the batch size and learning rate to the learner (``"auto"``).
    dp : bool
    **kw
        Further parameters of :class:`~pubsubml.learners.mlp.DPMLPClassifier` /
        :class:`~pubsubml.learners.mlp.DPMLPRegressor` (``epsilon``, ``random_state``).
    """
    auto = dp and config.dp_defaults
    common = dict(
        schema=schema,
        hidden_layer_sizes=config.hidden_layer_sizes,
        epochs=config.epochs,
        batch_size="auto" if auto else config.batch_size,
        learning_rate="auto" if auto else config.lr,
        delta=scenario.delta,
        dp=dp,
        **kw,
    )
    if scenario.task == "classification":
        return DPMLPClassifier(classes=scenario.classes, **common)
    return DPMLPRegressor(**common)


def publisher_learner(task: str, kind: str, *, dp: bool) -> str | None:
    """The registered learner a publisher of model type ``kind`` trains, ``None`` for the network.

    Parameters
    ----------
    task : {"classification", "regression"}
    kind : str
        A key of :data:`~pubsubml.experiments.pubsub.consortium.LEARNERS`.
    dp : bool
        ``False`` gives the non-private counterpart (PubSub-ML*, pubsub-ml.txt §8.3.4): a model
        type without one in :data:`~pubsubml.experiments.pubsub.consortium.NONPRIVATE_LEARNERS` trains Table 4's
        network without DP.

    Raises
    ------
    ValueError
        An unknown ``kind``, or one without a learner for ``task``.
    """
    if kind not in LEARNERS or task not in LEARNERS[kind]:
        raise ValueError(
            f"unknown publisher learner {kind!r} for {task}; choose from "
            f"{[k for k, names in LEARNERS.items() if task in names]}"
        )
    if kind == "mlp":
        return None
    if dp:
        return LEARNERS[kind][task]
    return NONPRIVATE_LEARNERS.get(kind, {}).get(task)


def _publisher_estimator(
    scenario: Scenario, site: SimSite, config: MethodConfig, *, dp: bool, seed: int
) -> Any:
    """The publisher's unfitted model: its type, its budget ε and the scenario's δ."""
    schema = scenario.schema.subset(site.X.columns)
    name = publisher_learner(scenario.task, site.learner, dp=dp)
    if name is None:
        return network(
            scenario,
            schema,
            config,
            dp=dp,
            epsilon=site.epsilon if dp else None,
            random_state=seed,
            noise_seed=seed if dp else None,  # a simulation: reproducible noise
        )
    params: dict[str, Any] = {"schema": schema}
    if scenario.task == "classification":
        params["classes"] = scenario.classes
    if dp:
        # A simulation: reproducible noise.
        params |= {"epsilon": site.epsilon, "random_state": seed, "noise_seed": seed}
        if name in APPROXIMATE_DP:
            params["delta"] = scenario.delta
    else:  # the non-private linear models are deterministic: no seed
        params |= NONPRIVATE_PARAMS.get(name, {})
    return create_learner(name, **params)


def own_model(
    scenario: Scenario,
    config: MethodConfig,
    seed: int,
    *,
    cross_fits: CrossFitStore | None = None,
) -> Any:
    """The subscriber's own model M^s, unfitted (the Own baseline; M^s inside CUSTOMIZE).

    ``config.own_model="paper"`` is Table 4's network without DP (pubsub-ml.txt §7.3); any other
    value is an :class:`~pubsubml.methods.pubsub.own.OwnLearner` of that kind, which keeps its
    cross-fit in ``cross_fits`` (if given) for CUSTOMIZE to reuse.
    """
    if config.own_model not in OWN_MODELS:
        raise ValueError(f"unknown own model {config.own_model!r}; choose from {OWN_MODELS}")
    schema = scenario.schema.subset(scenario.subscriber.X.columns)
    if config.own_model == "paper":
        return network(scenario, schema, config, dp=False, random_state=seed)
    return OwnLearner(
        task=scenario.task,
        kind=config.own_model,
        schema=schema,
        classes=scenario.classes,
        random_state=seed,
        cross_fits=cross_fits,
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
        name = publisher_learner(scenario.task, site.learner, dp=dp)
        key = (tuple(site.X.columns), name, site.epsilon if dp else 0.0)
        groups.setdefault(key, []).append(i)
    models: list[Any] = [None] * len(scenario.publishers)
    for (cols, name, _), members in groups.items():
        first = scenario.publishers[members[0]]
        est = _publisher_estimator(scenario, first, config, dp=dp, seed=seed * 7919 + members[0])
        Xs = [scenario.publishers[i].X.iloc[trains[i]] for i in members]
        ys = [scenario.publishers[i].y[trains[i]] for i in members]
        if name is None:  # Table 4's networks, trained together
            fitted = fit_many(est, Xs, ys)
        else:
            keys = est.get_params()
            fitted = []
            for i, X, y in zip(members, Xs, ys, strict=True):
                seeds = {k: seed * 7919 + i for k in ("random_state", "noise_seed") if k in keys}
                one = clone(est).set_params(**seeds)
                fitted.append(one.fit(X, y))
        for i, model in zip(members, fitted, strict=True):
            models[i] = OwnModel(model, list(cols))
    return models
