"""Many-run black-box audits of the diffprivlib learners (logistic, naive Bayes, forest)."""

from __future__ import annotations

import pytest

from pubsubml.audit.diffprivlib import audit_diffprivlib, audit_dp_logistic


def test_the_shipped_model_stays_below_its_claim_and_a_tenfold_budget_is_caught() -> None:
    correct = audit_dp_logistic(epsilon=0.5, runs=800)
    broken = audit_dp_logistic(epsilon=0.5, runs=800, variant="epsilon-x10")

    assert correct.claimed_epsilon == broken.claimed_epsilon == 0.5
    assert correct.lower_bound <= 0.5 and not correct.violated
    assert broken.violated and broken.method == "many-run"


@pytest.mark.parametrize(
    ("model", "target"), [("naive_bayes", "dp-naive-bayes"), ("forest", "dp-random-forest")]
)
def test_class_count_models_are_audited_under_replace_one(model: str, target: str) -> None:
    correct = audit_diffprivlib(model, epsilon=1.0, runs=1500)  # type: ignore[arg-type]
    broken = audit_diffprivlib(model, epsilon=1.0, runs=1500, variant="epsilon-x10")  # type: ignore[arg-type]

    assert correct.target == broken.target == target
    assert not correct.violated
    assert broken.violated


def test_a_forest_whose_leaves_spend_the_full_epsilon_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # diffprivlib's leaves are ε-DP for add/remove only; without the ε/2 run the replace-one
    # claim is wrong by 2x, which a many-run audit measures
    from pubsubml.learners.forest import DPRandomForestClassifier

    monkeypatch.setattr(DPRandomForestClassifier, "_replace_one_factor", 1.0)
    r = audit_diffprivlib("forest", epsilon=1.0, runs=2000)

    assert r.violated


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"variant": "noise-off"}, "variant"), ({"epsilon": -1.0}, "epsilon"), ({"runs": 5}, "runs")],
)
def test_bad_parameters_are_refused(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        audit_dp_logistic(**kwargs)
    with pytest.raises(ValueError, match="model"):
        audit_diffprivlib("svm")  # type: ignore[arg-type]
