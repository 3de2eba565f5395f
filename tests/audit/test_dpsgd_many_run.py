"""Many-run audit of the DP-SGD engine: one Dirac canary over thousands of stacked runs."""

from __future__ import annotations

import pytest

from pubsubml.audit.dpsgd_many_run import audit_dpsgd_many_run
from pubsubml.audit.guesses import runs_to_refute

FAST = {"runs": 400, "rows": 30}


def test_the_engine_stays_below_its_claim() -> None:
    r = audit_dpsgd_many_run(epsilon=1.0, **FAST)

    assert r.claimed_epsilon == pytest.approx(1.0, abs=0.01)
    assert r.method == "many-run" and r.canaries == 400 and r.guesses == 400
    assert r.lower_bound <= r.claimed_epsilon


@pytest.mark.parametrize("variant", ["noise-off", "clip-off"])
def test_a_broken_engine_is_caught(variant: str) -> None:
    r = audit_dpsgd_many_run(epsilon=0.5, variant=variant, **FAST)

    assert r.violated


def test_the_default_run_count_can_refute_the_claim() -> None:
    assert runs_to_refute(8.0, 2000) == 47_696 and runs_to_refute(0.5, 2000) == 2000
    with pytest.raises(ValueError, match="epsilon"):
        runs_to_refute(float("inf"), 2000)


def test_bad_parameters_are_refused() -> None:
    with pytest.raises(ValueError, match="runs"):
        audit_dpsgd_many_run(runs=10)
    with pytest.raises(ValueError, match="learner"):
        audit_dpsgd_many_run("forest", runs=200)  # type: ignore[arg-type]
