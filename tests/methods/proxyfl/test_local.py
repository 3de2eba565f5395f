"""Tests of pubsubml.methods.proxyfl.local: ClientCohort, the local state of ProxyFL clients."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import pytest
import torch
from torch import Tensor, nn

from pubsubml.errors import DataValidationError, InvalidPrivacyParameterError
from pubsubml.methods.proxyfl.local import ClientCohort, DMLConfig, mlp_factory
from pubsubml.privacy.accountants import compute_epsilon
from pubsubml.privacy.events import DPEvent

pytestmark = pytest.mark.usefixtures("one_thread")
D, K, HIDDEN = 4, 3, (5,)
CFG = DMLConfig(batch_size=10, delta=1e-3, lr=0.01)


def _assert_close(
    actual: Tensor, expected: Tensor, *, rtol: float = 1.3e-6, atol: float = 1e-5
) -> None:
    """Same shape and dtype, equal within tolerance (torch.testing's float32 defaults)."""
    assert actual.shape == expected.shape and actual.dtype == expected.dtype
    assert torch.allclose(actual, expected, rtol=rtol, atol=atol), (actual, expected)


def _data(sizes: Sequence[int], seed: int = 0) -> list[tuple[Tensor, Tensor]]:
    gen = torch.Generator().manual_seed(seed)
    W = torch.randn(D, K, generator=gen)
    out = []
    for n in sizes:
        X = torch.randn(n, D, generator=gen)
        out.append((X, (X @ W).argmax(1)))
    return out


def _cohort(
    ids: Sequence[int], data: Sequence[tuple[Tensor, Tensor]], private: bool = True,
    config: DMLConfig = CFG,
) -> ClientCohort:  # fmt: skip
    factories = [mlp_factory((6,))] * len(ids) if private else None
    return ClientCohort(client_ids=ids, data=data, n_classes=K, proxy_hidden=HIDDEN,
                        private_factories=factories, config=config, seed=7)  # fmt: skip


def test_a_client_trains_the_same_alone_as_within_a_cohort() -> None:
    # Prepare: client 1 simulated with two others, and alone as a peer would run it.
    data = _data((40, 60, 8))
    together, alone = _cohort([0, 1, 2], data), _cohort([1], data[1:2])
    # Execute
    for cohort in (together, alone):
        for _ in range(2):
            cohort.train_round()
    # Assert: its proxy, private model and accounting depend only on its own seed and data.
    _assert_close(together.flat_proxies()[1], alone.flat_proxies()[0])
    assert together.privates is not None and alone.privates is not None
    pairs = zip(together.privates[1].parameters(), alone.privates[0].parameters(), strict=True)
    for p, q in pairs:
        _assert_close(p, q)
    assert together.accountants[1].events == alone.accountants[0].events
    assert not torch.allclose(together.flat_proxies()[0], together.flat_proxies()[1])


def test_epsilon_is_the_accountant_on_the_steps_that_ran() -> None:
    data = _data((40, 60, 8))  # q = 10/40, 10/60 and min(1, 10/8) = 1
    cohort = _cohort([0, 1, 2], data, private=False)
    assert [cohort.epsilon(s) for s in range(3)] == [0.0, 0.0, 0.0]
    for _ in range(2):
        cohort.train_round()
    for s, (q, steps) in enumerate([(0.25, 4), (1 / 6, 6), (1.0, 1)]):
        one = DPEvent(mechanism="subsampled_gaussian", noise_multiplier=1.0, sample_rate=q,
                      count=steps)  # fmt: skip
        assert cohort.round_event(s) == one
        assert cohort.accountants[s].events == [one.model_copy(update={"count": 2 * steps})]
    # Two rounds of client 0 (PLD accounting is slow: one client stands for all).
    assert cohort.epsilon(0) == pytest.approx(
        compute_epsilon([cohort.round_event(0)] * 2, 1e-3), rel=1e-9
    )
    assert cohort.dp_steps() == [8, 12, 2] and cohort.rounds_trained == [2, 2, 2]
    assert cohort.privacy_guarantee == "dp"  # no private model: plain DP-SGD


def test_inactive_clients_neither_train_nor_spend() -> None:
    cohort = _cohort([0, 1, 2], _data((20, 20, 20)))
    before = cohort.flat_proxies()
    assert cohort.privates is not None
    private_before = [p.detach().clone() for p in cohort.privates[1].parameters()]
    cohort.active[1] = False
    cohort.train_round()
    after = cohort.flat_proxies()
    assert torch.equal(after[1], before[1]) and not torch.equal(after[0], before[0])
    assert all(
        torch.equal(p, q)
        for p, q in zip(private_before, cohort.privates[1].parameters(), strict=True)
    )
    assert cohort.rounds_trained == [1, 0, 1] and cohort.dp_steps() == [2, 0, 2]
    assert cohort.epsilon(1) == 0.0 and not bool(cohort.willing()[1])


def test_willing_looks_one_round_ahead_against_each_budget() -> None:
    data = _data((40, 40, 40))  # q = 0.25, 4 steps a round
    one_round = compute_epsilon(
        [DPEvent(mechanism="subsampled_gaussian", noise_multiplier=1.0, sample_rate=0.25,
                 count=4)], 1e-3,
    )  # fmt: skip
    budgets = (math.inf, 0.5 * one_round, one_round + 1e-9)
    cohort = _cohort([0, 1, 2], data, config=dataclasses.replace(CFG, epsilon_budget=budgets))
    assert cohort.willing().tolist() == [True, False, True]
    cohort.train_round()
    assert cohort.willing().tolist() == [True, False, False]
    assert cohort.epsilon(2) <= budgets[2]


def test_without_dp_nothing_is_accounted() -> None:
    cohort = _cohort([0, 1], _data((20, 30)), config=dataclasses.replace(CFG, dp=False))
    assert cohort.privacy_guarantee == "none" and cohort.epsilon(0) == 0.0
    before = cohort.flat_proxies()
    cohort.train_round()
    assert cohort.epsilon(0) == math.inf and cohort.dp_steps() == [0, 0]
    assert cohort.willing().tolist() == [True, True]
    assert not torch.equal(cohort.flat_proxies(), before)  # trained all the same
    with pytest.raises(ValueError, match="without DP"):
        cohort.attach_audit([None, None])


def test_released_gradients_are_seen_once_per_step() -> None:
    cohort = _cohort([0, 1], _data((20, 40)), private=False)
    P = cohort.flat_proxies().shape[1]
    seen: list[Tensor] = []
    with pytest.raises(ValueError, match="one canary entry"):
        cohort.attach_audit([None, torch.zeros(1, P + 1)])
    cohort.attach_audit([None, None], release_hook=lambda g: seen.append(g.clone()))
    cohort.train_round()
    assert len(seen) == max(cohort.steps) == 4 and all(g.shape == (2, P) for g in seen)
    # Client 0 runs 2 steps: its row is left at zero once it stops.
    assert bool(seen[0][0].any()) and not bool(seen[3][0].any()) and bool(seen[3][1].any())


def test_proxy_predictions_are_the_relu_mlp_of_the_flat_parameters() -> None:
    cohort = _cohort([0, 1], _data((20, 20)), private=False)
    flat = torch.randn_like(cohort.flat_proxies())
    cohort.load_proxies(flat)
    X = torch.randn(6, D)
    for s in range(2):
        mlp = nn.Sequential(nn.Linear(D, HIDDEN[0]), nn.ReLU(), nn.Linear(HIDDEN[0], K))
        nn.utils.vector_to_parameters(flat[s], mlp.parameters())
        with torch.no_grad():
            expected = torch.softmax(mlp(X), -1)
        _assert_close(cohort.predict_proba(s, X, model="proxy"), expected)
        # Without private models, "private" falls back to the proxy.
        _assert_close(cohort.predict_proba(s, X), expected)


def test_private_predictions_leave_the_model_in_training_mode() -> None:
    cohort = _cohort([0], _data((20,)))
    assert cohort.privates is not None
    module = cohort.privates[0]
    X = torch.randn(5, D)
    with torch.no_grad():
        expected = torch.softmax(module(X), -1)
    _assert_close(cohort.predict_proba(0, X), expected)
    assert module.training


@pytest.mark.parametrize(
    ("ids", "data", "match"),
    [
        ([0, 1], _data((10,)), "one \\(X, y\\) pair per client"),
        ([], [], "one \\(X, y\\) pair per client"),
        ([0], [(torch.zeros(0, D), torch.zeros(0, dtype=torch.long))], "expected X"),
        ([0], [(torch.zeros(5, D), torch.zeros(5, 1, dtype=torch.long))], "expected X"),
        ([0], [(torch.zeros(5, D), torch.zeros(4, dtype=torch.long))], "expected X"),
        ([0], [(torch.full((5, D), math.nan), torch.zeros(5, dtype=torch.long))], "finite"),
        ([0], [(torch.zeros(5, D), torch.full((5,), -1))], "labels"),
        ([0, 1], [*_data((10,)), (torch.zeros(5, D + 1), torch.zeros(5, dtype=torch.long))],
         "feature dimension"),
    ],
)  # fmt: skip
def test_malformed_data_is_refused(
    ids: list[int], data: list[tuple[Tensor, Tensor]], match: str
) -> None:
    with pytest.raises(DataValidationError, match=match):
        _cohort(ids, data, private=False)


def test_delta_must_be_below_one_over_each_client_size() -> None:
    with pytest.raises(InvalidPrivacyParameterError):
        _cohort([0, 1], _data((100, 5)), config=dataclasses.replace(CFG, delta=0.25))
