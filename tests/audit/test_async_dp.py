"""Many-run audit of the async-DP Laplace answers: tight below the claim, above it when broken."""

from __future__ import annotations

import pytest

from pubsubml.audit.async_dp import audit_async_dp


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 4.0])
def test_the_shipped_answer_is_audited_close_to_but_below_its_claim(epsilon: float) -> None:
    r = audit_async_dp(epsilon=epsilon, runs=20_000)

    assert r.method == "many-run" and r.delta == 0.0 and r.claimed_epsilon == epsilon
    assert 0.4 * epsilon < r.lower_bound <= epsilon


@pytest.mark.parametrize("variant", ["noise-x0.1", "l2-clip"])
def test_a_broken_answer_is_caught(variant: str) -> None:
    r = audit_async_dp(epsilon=1.0, variant=variant, runs=20_000)

    assert r.violated


def test_same_seed_same_bound() -> None:
    a, b = audit_async_dp(runs=2_000, seed=4), audit_async_dp(runs=2_000, seed=4)
    assert (a.lower_bound, a.correct) == (b.lower_bound, b.correct)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"variant": "clip-off"}, "variant"),
        ({"epsilon": 0.0}, "epsilon"),
        ({"runs": 10}, "runs"),
        ({"confidence": 0.0}, "confidence"),
    ],
)
def test_bad_parameters_are_refused(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        audit_async_dp(**kwargs)  # type: ignore[arg-type]
