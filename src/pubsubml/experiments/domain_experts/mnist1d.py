"""100 users on mnist1d: the MNIST experiment of fl-domain-experts.txt §4.3 (Fig. 7), offline.

MNIST itself is not shipped offline; mnist1d (generated in memory by the ``mnist1d`` package, 40
features, 10 classes) stands in.  As in §4.3 the training set is cut into 100 disjoint equal
partitions, one per user, each split 80/20 into training and validation rows; the test set is
split equally too; the model is linear.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from pubsubml.data.synthetic import make_mnist1d
from pubsubml.experiments.domain_experts.experiments import (
    Algorithm,
    DomainExpertsExperimentConfig,
    privacy_sweep,
)
from pubsubml.methods.domain_experts.federation import DomainExpertsFL
from pubsubml.schema import FeatureSchema

__all__ = ["MNIST1D_BOUND", "mnist1d_users", "run_mnist1d"]

# mnist1d's generator standardizes its output to mean 0 and standard deviation 1; ±4 is a public
# bound by that construction (values beyond are clipped), not a statistic of our sample.
MNIST1D_BOUND = 4.0


def mnist1d_users(
    n_users: int, per_user: int, test_per_user: int, seed: int
) -> list[dict[str, Any]]:
    """``n_users`` disjoint equal partitions of mnist1d: train (80 %), val (20 %) and test rows.

    ``train`` (all of a user's training partition) feeds the federation; ``tune``/``val`` are its
    80/20 split for local training with early stopping.
    """
    X, y, X_test, y_test = make_mnist1d(n_users * per_user, n_users * test_per_user, seed=seed)
    cols = [f"x{j}" for j in range(X.shape[1])]
    users = []
    n_tune = round(0.8 * per_user)
    for i in range(n_users):
        Xi = pd.DataFrame(X[i * per_user : (i + 1) * per_user], columns=cols)
        yi = y[i * per_user : (i + 1) * per_user]
        rows = slice(i * test_per_user, (i + 1) * test_per_user)
        users.append(
            {
                "train": (Xi, yi),
                "tune": (Xi[:n_tune], yi[:n_tune]),
                "val": (Xi[n_tune:].reset_index(drop=True), yi[n_tune:]),
                "test": (pd.DataFrame(X_test[rows], columns=cols), y_test[rows]),
            }
        )
    return users


def run_mnist1d(cfg: DomainExpertsExperimentConfig, out_dir: Path) -> pd.DataFrame:
    """§4.3 analogue: accuracy per method at no privacy, ε = 4 and ε = 2 (δ = 1e-5)."""
    n_users, per_user, test_per_user = (10, 100, 20) if cfg.smoke else (100, 120, 30)
    rounds = 10 if cfg.smoke else 100
    users = mnist1d_users(n_users, per_user, test_per_user, seed=42 + cfg.seed)
    out_dir.mkdir(parents=True, exist_ok=True)
    schema = FeatureSchema.numeric(
        [f"x{j}" for j in range(40)], lower=-MNIST1D_BOUND, upper=MNIST1D_BOUND
    )

    def make(alg: Algorithm, eps: float | None, dp: bool) -> DomainExpertsFL:
        return DomainExpertsFL(
            schema=schema, classes=list(range(10)), algorithm=alg, rounds=rounds,
            batch_size=10, gate_fraction=0.2, target_epsilon=eps or 1.0, target_delta=1e-5,
            lr_general=0.5, lr_private=0.05, lr_gate=0.05, dp=dp, random_state=cfg.seed,
        )  # fmt: skip

    return privacy_sweep(
        users,
        make,
        cfg,
        out_dir / "domain-experts-mnist1d",
        title="100 users on mnist1d (stand-in for fl-domain-experts.txt §4.3, Fig. 7)",
        notes=f"{cfg.size} run: {n_users} users with {per_user} mnist1d training rows each "
        f"(the paper: 600 MNIST images each); MoE: 80 % expert + 20 % gate rows; Baseline: "
        "logistic regression on all of them; FT: 80 % train + 20 % validation; "
        f"{test_per_user} test rows per user; {rounds} rounds, all users every round, batch 10, C = 1, linear models; mean and std of accuracy over users.",
    )
