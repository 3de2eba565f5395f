"""The DP-FL baselines of the many-publisher experiments (pubsub-ml.txt §8.2.3, Fig. 4, Table 6).

With many sites, FL samples 10% of the clients per round (§8.2.3).  One global model per FL
method is trained per fold over all publishers and all subscribers as clients (each subscriber
on its 80% fit part), then each subscriber scores it on its test part (V) and fine-tunes it on its
fit part without DP (F).  The estimators and the fine-tuning are those of
:func:`pubsubml.experiments.pubsub.compared.evaluate_fold` (same FL classes, same ε = min over sites).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from pubsubml.data import hyperplane_schema
from pubsubml.experiments.pubsub.compared import (
    FL_METHODS,
    MethodConfig,
    Scenario,
    SimSite,
    fine_tune_federated,
    fit_federated,
)
from pubsubml.experiments.pubsub.scale.sizes import Frame, ScaleSizes
from pubsubml.experiments.runner import Record

__all__ = ["fl_config", "fl_records"]


def fl_config(sizes: ScaleSizes) -> MethodConfig:
    """Table 4's network and §8.2.3's client sampling for the FL baselines."""
    return MethodConfig(
        hidden_layer_sizes=sizes.hidden,
        epochs=sizes.epochs,
        fl_rounds=sizes.fl_rounds,
        fl_client_fraction=sizes.fl_fraction,
        fine_tune_epochs=sizes.fine_tune_epochs,
    )


def fl_records(
    clients: Sequence[Frame],
    sub_fit: Sequence[Frame],
    sub_test: Sequence[Frame],
    *,
    sizes: ScaleSizes,
    seed: int,
    methods: Sequence[str] = tuple(FL_METHODS),
) -> list[Record]:
    """Scores of FedAvg / FedProx / FedAdam, vanilla (V) and fine-tuned (F), per subscriber.

    Parameters
    ----------
    clients : sequence of (X, y)
        Every client's training rows (publishers, then subscribers).
    sub_fit, sub_test : sequences of (X, y)
        Each subscriber's fit part (for fine-tuning) and test part.
    sizes : ScaleSizes
    seed : int
    methods : sequence of str
        Keys of :data:`~pubsubml.experiments.pubsub.compared.FL_METHODS`.

    Returns
    -------
    list of dict
        ``method``, ``subscriber``, ``score``, ``total_s`` (FL training, plus fine-tuning for F;
        the paper's FL runtime) and ``epsilon`` (largest client ε).
    """
    config = fl_config(sizes)
    scenario = Scenario(
        publishers=[SimSite(X, y, epsilon=sizes.epsilon) for X, y in clients],
        subscriber=SimSite(*sub_fit[0], epsilon=sizes.epsilon),
        schema=hyperplane_schema(),
        task="classification",
        classes=(0, 1),
        metric="accuracy",
        delta=sizes.delta,
    )
    out: list[Record] = []
    for name in methods:
        t0 = time.perf_counter()
        model = fit_federated(scenario, name, list(clients), config, seed)
        t_fit = time.perf_counter() - t0
        for j, ((X_fit, y_fit), (X_te, y_te)) in enumerate(zip(sub_fit, sub_test, strict=True)):
            common = {"subscriber": f"s{j}", "epsilon": float(model.epsilon_)}
            out.append(
                {"method": f"{name}(V)", "score": model.score(X_te, y_te), "total_s": t_fit}
                | common
            )
            t1 = time.perf_counter()
            tuned = fine_tune_federated(model, X_fit, y_fit, config, seed + j)
            t_tune = time.perf_counter() - t1
            out.append(
                {"method": f"{name}(F)", "score": tuned.score(X_te, y_te)}
                | {"total_s": t_fit + t_tune}
                | common
            )
    return out
