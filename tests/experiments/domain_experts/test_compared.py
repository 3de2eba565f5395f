"""The compared methods and the privacy sweep of the domain-experts experiments
(fl-domain-experts.txt §4.1–4.3)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pubsubml.data import hyperplane_schema
from pubsubml.experiments.domain_experts.compared import (
    PRIVACY_LEVELS,
    Algorithm,
    accuracy,
    privacy_fold,
    report_privacy_sweep,
    rmse,
    run_label,
    score_methods,
)
from pubsubml.experiments.domain_experts.experiments import (
    CLASSIFICATION,
    classification_users,
    regression_users,
)
from pubsubml.methods.domain_experts.federation import DomainExpertsFL
from pubsubml.schema import FeatureSchema

pytestmark = pytest.mark.usefixtures("one_thread")


def test_scores_and_run_label() -> None:
    assert rmse(np.array([1.0, 3.0]), np.array([1.0, 1.0])) == pytest.approx(np.sqrt(2))
    assert accuracy(np.array([0, 1, 1]), np.array([0, 1, 0])) == pytest.approx(2 / 3)
    assert run_label(CLASSIFICATION.options(smoke=True)) == "smoke run (seed 0)"
    assert run_label(CLASSIFICATION.options(seeds=5)) == "full run (seeds 0–4)"


def test_score_methods_label_what_each_method_released() -> None:
    users = regression_users(60, 20, 30, seed=0)
    schema = FeatureSchema.numeric(["x", "y"], lower=-8.0, upper=8.0)

    def make(alg: Algorithm, sigma: float | None, dp: bool) -> DomainExpertsFL:
        return DomainExpertsFL(
            schema=schema, task="regression", algorithm=alg, rounds=3, batch_size=20,
            noise_multiplier=sigma, lr_general=1.0, dp=dp, accountant="rdp", random_state=0,
        )  # fmt: skip

    rows, fits = score_methods(users, make, 2.0, True, rmse, seed=0)
    assert sorted(fits) == [1, 2]
    frame = pd.DataFrame(rows)
    assert len(frame) == 2 * 5 and set(frame.user) == {1, 2}
    released = frame.groupby("method").guarantee.first().to_dict()
    assert released == {
        "Baseline": "nothing released", "FL": "dp", "Alg 1": "paper accounting", "Alg 2": "dp",
        "FT-FL": "dp",
    }  # fmt: skip
    assert (frame[frame.method == "Baseline"].epsilon == 0).all()
    assert (frame[frame.method != "Baseline"].epsilon > 0).all()
    # Least squares on the user's rows beats three noisy rounds of the federation.
    by_method = frame.groupby("method").score.mean()
    assert by_method["Baseline"] < by_method["FL"]


def test_privacy_fold_names_the_dp_models() -> None:
    users = classification_users(2, seed=0)

    def make(alg: Algorithm, eps: float | None, dp: bool) -> DomainExpertsFL:
        return DomainExpertsFL(
            schema=hyperplane_schema(10), classes=[0, 1], algorithm=alg, rounds=2, batch_size=10,
            target_epsilon=eps or 1.0, dp=dp, accountant="rdp", random_state=0,
        )  # fmt: skip

    private = privacy_fold(users, make, "4", seed=0)
    assert [r["method"] for r in private[:5]] == ["Baseline", "DP-FL", "Alg 1", "Alg 2", "FT-DP-FL"]
    assert all(0 <= r["accuracy"] <= 1 for r in private)
    assert max(r["epsilon"] for r in private) <= 4.0 + 1e-9
    plain = privacy_fold(users, make, "none", seed=0)
    assert {r["method"] for r in plain} == {"Baseline", "FL", "Alg 1", "Alg 2", "FT-FL"}
    assert {r["guarantee"] for r in plain} == {"none", "nothing released"}
    assert PRIVACY_LEVELS["none"] == (None, False)
    with pytest.raises(KeyError):
        privacy_fold(users, make, "3", seed=0)


def test_privacy_sweep_report_is_mean_se_over_seeds(tmp_path: Path) -> None:
    rows = [
        {"seed": s, "fold": 0, "privacy": p, "smoke": True, "method": m, "user": u,
         "accuracy": a, "epsilon": 1.0, "guarantee": "dp"}
        for s, base in ((0, 0.5), (1, 0.7))
        for p in ("none", "2")
        for m in ("Baseline", "DP-FL")
        for u, a in ((1, base - 0.1), (2, base + 0.1))
    ]  # fmt: skip
    written = report_privacy_sweep(
        pd.DataFrame(rows), tmp_path, name="sweep", title="A sweep", notes="Setup."
    )
    assert [p.name for p in written] == ["sweep.csv", "sweep.md", "sweep.png"]
    csv = pd.read_csv(tmp_path / "sweep.csv")
    assert list(csv.columns) == [
        "seed", "privacy", "method", "user", "accuracy", "epsilon", "guarantee"
    ]  # fmt: skip
    md = (tmp_path / "sweep.md").read_text(encoding="utf-8")
    # Per seed the mean over users is 0.5 and 0.7; std over users is 0.1414 in both.
    assert "| none | Baseline | 0.600 ± 0.100 | 2 | 0.1414 |" in md
    assert md.index("| none |") < md.index("| 2 |")  # levels in the order they ran
    assert "Setup. mean ± SE: over seeds" in md
