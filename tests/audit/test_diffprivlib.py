"""Many-run black-box audit of the DP logistic regression (diffprivlib, objective perturbation)."""

from __future__ import annotations

import pytest

from pubsubml.audit.diffprivlib import audit_dp_logistic


def test_the_shipped_model_stays_below_its_claim_and_a_tenfold_budget_is_caught() -> None:
    correct = audit_dp_logistic(epsilon=0.5, runs=800)
    broken = audit_dp_logistic(epsilon=0.5, runs=800, variant="epsilon-x10")

    assert correct.claimed_epsilon == broken.claimed_epsilon == 0.5
    assert correct.lower_bound <= 0.5 and not correct.violated
    assert broken.violated and broken.method == "many-run"


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"variant": "noise-off"}, "variant"), ({"epsilon": -1.0}, "epsilon"), ({"runs": 5}, "runs")],
)
def test_bad_parameters_are_refused(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        audit_dp_logistic(**kwargs)  # type: ignore[arg-type]
