"""Noisy sites: publishers whose labels are pure noise (pubsub-ml.txt §8.2.5, appendix C, Fig. 9).

Ten publishers, five drawn as in §8.2.3 and five whose labels carry no information about their
features, and ten subscribers as in §8.2.3 (p3 = 0), each taking its turn.  Every method is
scored by :func:`~pubsubml.experiments.pubsub.compared.evaluate_fold` on one scenario per subscriber;
``n_noisy=0`` gives the same consortium without noise as a control.
"""

from __future__ import annotations

from dataclasses import dataclass

from pubsubml.data import hyperplane_schema
from pubsubml.experiments.pubsub.compared import MethodConfig, Scenario, SimSite, evaluate_fold
from pubsubml.experiments.pubsub.scale.hyperplane import make_consortium
from pubsubml.experiments.runner import Record

__all__ = ["NOISY_METHODS", "NOISY_SIZES", "NoisySizes", "noisy_fold"]

NOISY_METHODS = (
    "PubSub-ML",
    "Own",
    "FedAvg(V)",
    "FedAvg(F)",
    "FedProx(V)",
    "FedProx(F)",
    "FedAdam(V)",
    "FedAdam(F)",
)


@dataclass(frozen=True)
class NoisySizes:
    """Sizes of a run (§8.2.5: 10 publishers, 5 of them noisy, 10 subscribers, 500 rows)."""

    n_publishers: int = 10
    n_noisy: int = 5
    n_subscribers: int = 10
    rows: int = 500
    folds: int = 5
    hidden: tuple[int, ...] = (100, 50)
    epochs: int = 30
    fl_rounds: int = 30


NOISY_SIZES: dict[str, NoisySizes] = {
    "full": NoisySizes(),
    "smoke": NoisySizes(
        n_publishers=4,
        n_noisy=2,
        n_subscribers=2,
        rows=60,
        folds=2,
        hidden=(8,),
        epochs=2,
        fl_rounds=2,
    ),
}


def noisy_fold(seed: int, fold: int, *, size: str = "full", noisy: bool = True) -> list[Record]:
    """Every method on fold ``fold`` for every subscriber; ``noisy=False`` is the clean control.

    Few sites, so the FL baselines take every client in every round (§7.3).

    Returns
    -------
    list of dict
        ``evaluate_fold``'s records with ``subscriber`` and ``n_noisy`` added.
    """
    sizes = NOISY_SIZES[size]
    n_noisy = sizes.n_noisy if noisy else 0
    pubs, subs = make_consortium(
        sizes.n_publishers, sizes.n_subscribers, sizes.rows, seed=seed, n_noisy=n_noisy
    )
    config = MethodConfig(
        hidden_layer_sizes=sizes.hidden,
        epochs=sizes.epochs,
        fl_rounds=sizes.fl_rounds,
        fl_client_fraction=1.0,
        fine_tune_epochs=sizes.epochs,
    )
    publishers = [SimSite(p.data.X, p.data.y) for p in pubs]
    records: list[Record] = []
    for sub in subs:
        scenario = Scenario(
            publishers=publishers,
            subscriber=SimSite(sub.data.X, sub.data.y),
            schema=hyperplane_schema(),
            task="classification",
            classes=(0, 1),
            metric="accuracy",
        )
        for r in evaluate_fold(
            scenario,
            seed=seed,
            fold=fold,
            folds=sizes.folds,
            methods=NOISY_METHODS,
            config=config,
        ):
            records.append({"subscriber": sub.name, "n_noisy": n_noisy, **r})
    return records
