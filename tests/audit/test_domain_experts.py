"""One-run audit of a domain-experts user's messages: canaries through user_step."""

from __future__ import annotations

import pytest

from pubsubml.audit.domain_experts import audit_domain_experts

FAST = {"canaries": 200, "rows": 200, "rounds": 60}


@pytest.mark.parametrize("variant", ["correct", "paper-accounting"])
def test_the_messages_stay_below_their_claim(variant: str) -> None:
    r = audit_domain_experts(epsilon=1.0, variant=variant, **FAST)

    assert r.claimed_epsilon == pytest.approx(1.0, abs=0.01)
    assert r.lower_bound <= r.claimed_epsilon
    assert r.details["path"] == ("algorithm-1" if variant == "paper-accounting" else "algorithm-2")


@pytest.mark.parametrize("variant", ["noise-off", "noise-x0.1", "clip-off"])
def test_a_broken_user_is_caught(variant: str) -> None:
    r = audit_domain_experts(epsilon=0.5, variant=variant, **FAST)

    assert r.violated and r.claimed_epsilon == pytest.approx(0.5, abs=0.01)


def test_bad_parameters_are_refused() -> None:
    with pytest.raises(ValueError, match="variant"):
        audit_domain_experts(variant="epsilon-x10")
    with pytest.raises(ValueError, match="rounds"):
        audit_domain_experts(rounds=0)
