"""One-run audit of a ProxyFL client's DP proxy: canaries through ClientCohort's own step."""

from __future__ import annotations

import pytest
import torch

from pubsubml.audit.proxyfl import audit_proxyfl
from pubsubml.methods.proxyfl.dml import DMLConfig
from pubsubml.methods.proxyfl.local import ClientCohort

FAST = {"canaries": 300, "rows": 500, "rounds": 4}


def test_the_dp_proxy_stays_below_its_claim() -> None:
    r = audit_proxyfl(epsilon=1.0, **FAST)

    assert r.claimed_epsilon == pytest.approx(1.0, abs=0.01)
    assert r.lower_bound <= r.claimed_epsilon and r.details["guarantee"] == "dp"


@pytest.mark.parametrize("variant", ["noise-x0.1", "clip-off"])
def test_a_broken_proxy_is_caught(variant: str) -> None:
    r = audit_proxyfl(epsilon=0.5, variant=variant, **FAST)

    assert r.claimed_epsilon == pytest.approx(0.5, abs=0.01)
    assert r.violated


def test_paper_accounting_runs_the_paper_configuration() -> None:
    r = audit_proxyfl(epsilon=1.0, variant="paper-accounting", **FAST)

    # gradient canaries bypass the flaw (a dependence of other records' gradients on the data)
    assert r.details["guarantee"] == "paper accounting"
    assert r.claimed_epsilon == pytest.approx(1.0, abs=0.01)


def test_the_claim_is_what_the_clients_accountant_recorded() -> None:
    X, y = torch.randn(200, 4), torch.randint(0, 2, (200,))
    cohort = ClientCohort(
        client_ids=[0],
        data=[(X, y)],
        n_classes=2,
        proxy_hidden=(8,),
        private_factories=None,
        config=DMLConfig(noise_multiplier=1.3, batch_size=50),
        seed=0,
    )
    seen: list[torch.Tensor] = []
    P = cohort.flat_proxies().shape[1]
    cohort.attach_audit([torch.zeros(3, P)], seen.append)
    cohort.train_round()

    assert len(seen) == cohort.steps[0] and seen[0].shape == (1, P)
    assert len(cohort.accountants[0].events) == 1


def test_audit_hooks_need_dp_and_one_entry_per_client() -> None:
    X, y = torch.randn(50, 4), torch.randint(0, 2, (50,))

    def cohort(dp: bool) -> ClientCohort:
        return ClientCohort(
            client_ids=[0],
            data=[(X, y)],
            n_classes=2,
            proxy_hidden=(8,),
            private_factories=None,
            config=DMLConfig(dp=dp, delta=1e-3),
            seed=0,
        )

    with pytest.raises(ValueError, match="one canary entry"):
        cohort(True).attach_audit([None, None])
    with pytest.raises(ValueError, match="without DP"):
        cohort(False).attach_audit([None])
