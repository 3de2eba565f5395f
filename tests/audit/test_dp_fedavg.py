"""One-run audit of client-level DP-FedAvg: canary clients through the real server mechanism."""

from __future__ import annotations

import pytest

from pubsubml.audit.dp_fedavg import audit_dp_fedavg

FAST = {"canaries": 300, "real_clients": 4, "rows_per_client": 30, "rounds": 40}


def test_the_server_mechanism_stays_below_its_claim() -> None:
    r = audit_dp_fedavg(epsilon=1.0, **FAST)

    assert r.claimed_epsilon == pytest.approx(1.0, abs=0.01)  # the server's accountant
    assert r.lower_bound <= r.claimed_epsilon and not r.violated
    assert r.canary == "client" and r.details["rounds"] == 40


@pytest.mark.parametrize("variant", ["noise-off", "noise-x0.1", "clip-off"])
def test_a_broken_server_is_caught_under_the_shipped_claim(variant: str) -> None:
    r = audit_dp_fedavg(epsilon=1.0, variant=variant, **FAST)

    assert r.claimed_epsilon == pytest.approx(1.0, abs=0.01)
    assert r.violated and r.lower_bound > 2 * r.claimed_epsilon


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"variant": "paper-accounting"}, "variant"),
        ({"rounds": 0}, "rounds"),
        ({"client_fraction": 1.5}, "client_fraction"),
        ({"canaries": 1}, "canaries"),
    ],
)
def test_bad_parameters_are_refused(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        audit_dp_fedavg(**kwargs)  # type: ignore[arg-type]
