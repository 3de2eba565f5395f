"""100 users on mnist1d: the MNIST experiment of fl-domain-experts.txt §4.3 (Fig. 7), offline.

MNIST itself is not shipped offline; mnist1d (generated in memory by the ``mnist1d`` package, 40
features, 10 classes) stands in.  As in §4.3 the training set is cut into 100 disjoint equal
partitions, one per user, each split 80/20 into training and validation rows; the test set is
split equally too; the model is linear.  ``domain-experts-mnist1d`` (:data:`MNIST1D`) runs the
privacy sweep of :mod:`.compared` (no privacy, ε = 4, ε = 2) once per seed; it is not
cross-validated.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from pubsubml.data.synthetic import make_mnist1d
from pubsubml.experiments.base import Experiment, RunOptions
from pubsubml.experiments.domain_experts.compared import (
    NO_FOLDS,
    Algorithm,
    privacy_fold,
    privacy_grid,
    report_privacy_sweep,
    run_label,
)
from pubsubml.experiments.runner import Record
from pubsubml.methods.domain_experts.federation import DomainExpertsFL
from pubsubml.schema import FeatureSchema

__all__ = ["MNIST1D", "MNIST1D_BOUND", "mnist1d_fold", "mnist1d_users", "report_mnist1d"]

# mnist1d's generator standardizes its output to mean 0 and standard deviation 1; ±4 is a public
# bound by that construction (values beyond are clipped), not a statistic of our sample.
MNIST1D_BOUND = 4.0
NAME = "domain-experts-mnist1d"
DATA_SEED = 42
"""mnist1d's own default seed; seed s of the experiment generates the data with 42 + s."""


def mnist1d_size(smoke: bool) -> tuple[int, int, int, int]:
    """Users, training rows per user, test rows per user and rounds (smoke: 10, 100, 20, 10)."""
    return (10, 100, 20, 10) if smoke else (100, 120, 30, 100)


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


def mnist1d_fold(seed: int, fold: int, *, privacy: str, smoke: bool) -> list[Record]:
    """§4.3 analogue for one seed at one privacy level (no privacy, ε = 4 or ε = 2, δ = 1e-5)."""
    n_users, per_user, test_per_user, rounds = mnist1d_size(smoke)
    users = mnist1d_users(n_users, per_user, test_per_user, seed=DATA_SEED + seed)
    schema = FeatureSchema.numeric(
        [f"x{j}" for j in range(40)], lower=-MNIST1D_BOUND, upper=MNIST1D_BOUND
    )

    def make(alg: Algorithm, eps: float | None, dp: bool) -> DomainExpertsFL:
        return DomainExpertsFL(
            schema=schema, classes=list(range(10)), algorithm=alg, rounds=rounds,
            batch_size=10, gate_fraction=0.2, target_epsilon=eps or 1.0, target_delta=1e-5,
            lr_general=0.5, lr_private=0.05, lr_gate=0.05, dp=dp, random_state=seed,
        )  # fmt: skip

    return privacy_fold(users, make, privacy, seed)


def report_mnist1d(table: pd.DataFrame, out_dir: Path, opts: RunOptions) -> list[Path]:
    """Writes ``domain-experts-mnist1d.{csv,md,png}`` (accuracy per privacy level and method)."""
    n_users, per_user, test_per_user, rounds = mnist1d_size(opts.smoke)
    return report_privacy_sweep(
        table, out_dir, name=NAME,
        title="100 users on mnist1d (stand-in for fl-domain-experts.txt §4.3, Fig. 7)",
        notes=f"{run_label(opts)}: {n_users} users with {per_user} mnist1d training rows each "
        "(the paper: 600 MNIST images each); MoE: 80 % expert + 20 % gate rows; Baseline: "
        "logistic regression on all of them; FT: 80 % train + 20 % validation; "
        f"{test_per_user} test rows per user; {rounds} rounds, all users every round, batch 10, "
        f"C = 1, linear models; data seed {DATA_SEED} + seed.",
    )  # fmt: skip


MNIST1D = Experiment(
    NAME,
    "Fig. 7 stand-in: 100 users on mnist1d, no DP, ε = 4, 2 (fl-domain-experts.txt §4.3).",
    grid=privacy_grid,
    run_fold=mnist1d_fold,
    report=report_mnist1d,
    folds=1,
    min_folds=1,
    max_folds=1,
    folds_help=NO_FOLDS,
)
"""§4.3 analogue: 100 users × 120 mnist1d rows, linear models, no privacy, ε = 4 and ε = 2."""
