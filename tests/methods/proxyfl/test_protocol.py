"""ProxyFL in simulation: DP proxy training, privacy accounting, drop-out, privacy of what is sent
(proxyfl.txt §3)."""

from __future__ import annotations

import dataclasses
import logging
import math
import warnings
from collections.abc import Iterator, Sequence

import dp_accounting
import numpy as np
import pytest
import torch
from torch import Tensor

from pubsubml.errors import (
    DataValidationError,
    InvalidPrivacyParameterError,
    PaperAccountingWarning,
)
from pubsubml.methods.proxyfl.baselines import create_method
from pubsubml.methods.proxyfl.local import ClientCohort, mlp_factory
from pubsubml.methods.proxyfl.protocol import DMLConfig, ProxyFL, WeakPrivacyWarning, warn_if_weak
from pubsubml.methods.proxyfl.pushsum import SimulatedPushSum
from pubsubml.privacy.accountants import compute_epsilon, pld_discretization_interval
from pubsubml.privacy.events import DPEvent


@pytest.fixture(autouse=True)
def _one_torch_thread() -> Iterator[None]:
    """One intra-op thread: the 2-core test machine is shared, and spinning threads stall."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


K, D, C = 4, 6, 3


def _clients(sizes: Sequence[int] = (80, 80, 80, 80), seed: int = 0) -> list[tuple[Tensor, Tensor]]:
    g = torch.Generator().manual_seed(seed)
    W = torch.randn(D, C, generator=g)
    out = []
    for n in sizes:
        X = torch.randn(n, D, generator=g)
        out.append((X, (X @ W).argmax(1)))
    return out


CFG = DMLConfig(batch_size=20, delta=1e-3)


def _fit(**kw: object) -> ProxyFL:
    clients = kw.pop("clients", _clients())
    params = {"n_classes": C, "rounds": 2, "proxy_hidden": (8,), "config": CFG, **kw}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", WeakPrivacyWarning)
        return ProxyFL(**params).fit(clients)  # type: ignore[arg-type]


class Spy(SimulatedPushSum):
    """Records the proxies handed to the transport and every message it routes."""

    def __init__(self, n: int) -> None:
        super().__init__(n, record=True)
        self.before: list[Tensor] = []

    def exchange(self, round_, client_ids, theta, weights, participants):  # type: ignore[no-untyped-def]
        self.before.append(theta.clone())
        return super().exchange(round_, client_ids, theta, weights, participants)


def test_private_model_never_leaves_its_client() -> None:
    clients = _clients()
    spy = Spy(K)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", WeakPrivacyWarning)
        model = ProxyFL(n_classes=C, rounds=3, proxy_hidden=(8,), config=CFG).fit(clients)
        spy_model = ProxyFL(n_classes=C, rounds=3, proxy_hidden=(8,), config=CFG)
        spy_model.fit(clients, communicator=spy)
    cohort = spy_model.cohort_
    d_proxy = cohort.flat_proxies().shape[1]
    private = [
        torch.cat([p.detach().flatten() for p in m.parameters()]) for m in cohort.privates or []
    ]
    assert len(spy.sent) == 3 * K
    for round_, sender, _receiver, msg in spy.sent:
        assert msg.shape == (d_proxy + 1,)  # the proxy and its push weight, nothing else
        before = spy.before[round_][sender]
        torch.testing.assert_close(msg[:-1] / msg[-1], before)  # the (de-biased) proxy itself
        assert all(msg.numel() != p.numel() for p in private)
    # the spy changes nothing: same run, same proxies and private models
    torch.testing.assert_close(model.cohort_.flat_proxies(), cohort.flat_proxies())


def test_epsilon_equals_an_independent_dp_accounting_computation() -> None:
    clients = _clients(sizes=(80, 40, 80, 40))
    model = _fit(clients=clients, rounds=1)
    for k, (X, _) in enumerate(clients):
        q = min(1.0, 20 / len(X))
        steps = round(1 / q)
        event = dp_accounting.SelfComposedDpEvent(
            dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(1.0)), steps
        )
        ours = DPEvent(
            mechanism="subsampled_gaussian", noise_multiplier=1.0, sample_rate=q, count=steps
        )
        interval = pld_discretization_interval([ours], 1e-3)
        pld = dp_accounting.pld.PLDAccountant(value_discretization_interval=interval).compose(event)
        assert model.epsilons_[k] == pytest.approx(pld.get_epsilon(1e-3), rel=1e-12)
        rdp = dp_accounting.rdp.RdpAccountant().compose(event).get_epsilon(1e-3)
        assert model.epsilons_[k] <= rdp
        assert model.cohort_.dp_steps()[k] == steps


def test_beta_above_zero_is_paper_accounting_and_beta_zero_is_dp() -> None:
    # β > 0: the proxy's KL target is the private model, trained without noise on the same rows.
    with pytest.warns(PaperAccountingWarning, match="not a DP guarantee"):
        paper = ProxyFL(n_classes=C, rounds=1, proxy_hidden=(4,), config=CFG).fit(_clients())
    assert CFG.beta > 0 and paper.privacy_guarantee_ == "paper accounting"
    with warnings.catch_warnings():
        warnings.simplefilter("error", PaperAccountingWarning)
        warnings.simplefilter("ignore", WeakPrivacyWarning)
        dp = _fit(config=dataclasses.replace(CFG, beta=0.0), rounds=1)
        # no private model (FedAvg-style proxies): the proxy loss is plain cross-entropy
        avg = create_method("FedAvg", n_classes=C, rounds=1, proxy_hidden=(4,), config=CFG)
        avg.fit(_clients())
    assert dp.privacy_guarantee_ == avg.privacy_guarantee_ == "dp"
    # the same steps are accounted either way: only what the number covers differs
    assert dp.epsilons_ == paper.epsilons_


def test_a_client_at_its_budget_stops_training_and_sending(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Client 2 has fewer records, so a larger sample rate and a faster-growing ε.
    clients = _clients(sizes=(80, 80, 40, 80))
    # The budget lets q = 0.25 clients run 3 rounds (12 steps); client 2 (q = 0.5, 2 steps a round)
    # exceeds it in its second round (ε 3.16 after one round, 4.48 after two; budget 4.18).
    three_rounds = DPEvent(
        mechanism="subsampled_gaussian", noise_multiplier=1.0, sample_rate=0.25, count=12
    )
    budget = compute_epsilon([three_rounds], 1e-3) + 1e-9
    spy = Spy(K)
    cfg = DMLConfig(batch_size=20, delta=1e-3, epsilon_budget=budget)
    with (
        caplog.at_level(logging.INFO, logger="pubsubml.methods.proxyfl.protocol"),
        warnings.catch_warnings(),
    ):
        warnings.simplefilter("ignore", WeakPrivacyWarning)
        model = ProxyFL(n_classes=C, rounds=3, proxy_hidden=(8,), config=cfg)
        model.fit(clients, communicator=spy)
    assert [r.active[2] for r in model.history_] == [True, False, False]
    assert all(r.active[k] for r in model.history_ for k in (0, 1, 3))
    assert any(sender == 2 for t, sender, _, _ in spy.sent if t == 0)
    assert all(2 not in (sender, receiver) for t, sender, receiver, _ in spy.sent if t >= 1)
    assert model.cohort_.dp_steps()[2] == 2
    assert model.epsilons_[2] <= budget
    assert "client 2 reached its privacy budget" in caplog.text
    # the others go on among themselves, and its proxy is frozen once it left
    assert {s for t, s, _, _ in spy.sent if t == 2} == {0, 1, 3}
    torch.testing.assert_close(spy.before[2][2], spy.before[1][2])


def test_weak_configurations_warn_loudly(caplog: pytest.LogCaptureFixture) -> None:
    # The paper's σ = 1 and q = 0.25 over 60 rounds (240 steps) give ε in the tens at δ = 1e-3.
    cohort = ProxyFL(n_classes=C, proxy_hidden=(4,), config=CFG)._make_cohort(
        _clients(), list(range(K))
    )
    with caplog.at_level(logging.WARNING), pytest.warns(WeakPrivacyWarning, match="weak guarantee"):
        warn_if_weak(cohort, 60)
    assert "weak guarantee" in caplog.text
    with warnings.catch_warnings():
        warnings.simplefilter("error", WeakPrivacyWarning)
        warn_if_weak(cohort, 1)  # ε ≈ 3: no warning
    no_dp = DMLConfig(batch_size=20, delta=1e-3, dp=False)
    with pytest.warns(WeakPrivacyWarning, match="no privacy guarantee"):
        model = ProxyFL(n_classes=C, rounds=1, proxy_hidden=(4,), config=no_dp).fit(_clients())
    assert model.epsilons_ == [math.inf] * K


def test_bad_input_raises_before_training() -> None:
    bad_labels = [(X, y + 5) for X, y in _clients()]
    with pytest.raises(DataValidationError, match="labels"):
        _fit(clients=bad_labels)
    with pytest.raises(InvalidPrivacyParameterError):
        _fit(config=DMLConfig(batch_size=20, delta=0.05))  # δ ≥ 1/n
    with pytest.raises(InvalidPrivacyParameterError):
        DMLConfig(epsilon_budget=0.0)
    with pytest.raises(ValueError, match="alpha"):
        DMLConfig(alpha=1.0)


def test_runs_are_reproducible_and_private_models_may_differ_in_architecture() -> None:
    def cnn(n_features: int, n_classes: int) -> torch.nn.Module:
        return torch.nn.Sequential(
            torch.nn.Unflatten(1, (1, n_features)),
            torch.nn.Conv1d(1, 4, 3, padding=1),
            torch.nn.ReLU(),
            torch.nn.Flatten(),
            torch.nn.Linear(4 * n_features, n_classes),
        )

    archs = [mlp_factory((8,)), cnn, mlp_factory((16, 8)), cnn]
    a = _fit(private_model=archs, seed=5)
    b = _fit(private_model=archs, seed=5)
    torch.testing.assert_close(a.cohort_.flat_proxies(), b.cohort_.flat_proxies())
    X = _clients()[0][0]
    np.testing.assert_allclose(a.predict_proba(X, client=1), b.predict_proba(X, client=1))
    assert a.predict(X, client=3).shape == (len(X),)
    assert a.predict_proba(X, client=0, model="proxy").shape == (len(X), C)


def test_cohort_proxies_round_trip_as_flat_rows() -> None:
    cohort = ClientCohort(
        client_ids=range(K),
        data=_clients(),
        n_classes=C,
        proxy_hidden=(8,),
        private_factories=None,
        config=CFG,
        seed=0,
    )
    flat = torch.randn_like(cohort.flat_proxies())
    cohort.load_proxies(flat)
    torch.testing.assert_close(cohort.flat_proxies(), flat)
    with pytest.raises(DataValidationError):
        cohort.load_proxies(flat[:, :-1])
