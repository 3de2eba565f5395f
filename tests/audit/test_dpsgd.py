"""One-run audits of the DP-SGD learners: correct mechanisms stay below their claim, broken ones
go above it (the audit can fail)."""

from __future__ import annotations

import pytest

from pubsubml.audit.dpsgd import audit_dpsgd
from pubsubml.audit.guesses import draw_inclusion, one_run_bound

FAST = {"canaries": 400, "rows": 300, "epsilon": 1.0}


@pytest.mark.parametrize("learner", ["mlp", "linear"])
@pytest.mark.parametrize("path", ["stacked", "generic", "secure"])
def test_the_shipped_mechanism_stays_below_its_claim(learner: str, path: str) -> None:
    r = audit_dpsgd(learner, path=path, **FAST)  # type: ignore[arg-type]

    assert r.claimed_epsilon == pytest.approx(1.0, abs=0.01)
    assert r.lower_bound <= r.claimed_epsilon
    assert not r.violated
    assert r.details["steps"] > 0 and r.canary == "gradient" and r.method == "one-run"


@pytest.mark.parametrize("variant", ["noise-off", "noise-x0.1", "clip-off"])
@pytest.mark.parametrize("path", ["stacked", "generic", "secure"])
def test_a_broken_mechanism_is_caught(variant: str, path: str) -> None:
    r = audit_dpsgd("mlp", path=path, variant=variant, **FAST)  # type: ignore[arg-type]

    assert r.claimed_epsilon == pytest.approx(1.0, abs=0.01)  # the claim of the shipped mechanism
    assert r.violated and r.lower_bound > 2 * r.claimed_epsilon


def test_a_loose_claim_is_audited_closer_at_large_epsilon() -> None:
    small = audit_dpsgd("linear", **{**FAST, "epsilon": 0.5})
    large = audit_dpsgd("linear", **{**FAST, "epsilon": 8.0})

    assert small.lower_bound <= 0.5 and large.lower_bound <= large.claimed_epsilon
    assert large.lower_bound > small.lower_bound and large.lower_bound > 1.0


def test_same_seed_same_audit_and_the_row_is_flat() -> None:
    a = audit_dpsgd("linear", seed=3, **FAST)
    b = audit_dpsgd("linear", seed=3, **FAST)

    assert (a.lower_bound, a.guesses, a.correct) == (b.lower_bound, b.guesses, b.correct)
    row = a.as_row()
    assert row["detail_path"] == "stacked" and row["violated"] is False


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"epsilon": 0.0}, "epsilon"),
        ({"variant": "noise-x2"}, "variant"),
        ({"canaries": 1}, "canaries"),
        ({"delta": 1.0}, "delta"),
        ({"confidence": 1.5}, "confidence"),
        ({"rows": 5}, "rows"),
        ({"path": "fast"}, "path"),
    ],
)
def test_bad_parameters_are_refused(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        audit_dpsgd("linear", **kwargs)  # type: ignore[arg-type]


def test_guesses_need_one_finite_score_per_canary() -> None:
    import numpy as np

    included = draw_inclusion(10, np.random.default_rng(0))
    with pytest.raises(ValueError, match="one score per canary"):
        one_run_bound(np.zeros(9), included, 1e-5)
    with pytest.raises(ValueError, match="finite"):
        one_run_bound(np.full(10, np.nan), included, 1e-5)
    with pytest.raises(ValueError, match="at least 2"):
        draw_inclusion(1, np.random.default_rng(0))
