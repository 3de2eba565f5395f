"""De-biased PushSum and the directed exponential graph (proxyfl.txt §3.4, Algorithm 1 l. 7–11)."""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pubsubml.errors import DataValidationError
from pubsubml.methods.proxyfl.pushsum import (
    SimulatedPushSum,
    combine_messages,
    exponential_edges,
    exponential_matrix,
    exponential_offset,
    mix,
    push_message,
)


@pytest.fixture(autouse=True)
def _one_torch_thread() -> Iterator[None]:
    """One intra-op thread: the 2-core test machine is shared, and spinning threads stall."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_offsets_cycle_through_powers_of_two_up_to_ceil_log2() -> None:
    assert [exponential_offset(t, 6) for t in range(6)] == [1, 2, 4, 1, 2, 4]
    assert [exponential_offset(t, 8) for t in range(4)] == [1, 2, 4, 1]
    assert [exponential_offset(t, 9) for t in range(5)] == [1, 2, 4, 8, 1]
    assert exponential_offset(3, 2) == 1
    assert exponential_offset(0, 1) == 0


@pytest.mark.parametrize("K", [2, 3, 5, 6, 7, 8, 13, 16])
def test_each_client_sends_one_message_and_receives_one(K: int) -> None:
    for t in range(5):
        edges = exponential_edges(t, range(K))
        assert sorted(e.sender for e in edges) == list(range(K))
        assert sorted(e.receiver for e in edges) == list(range(K))
        assert all(e.sender != e.receiver for e in edges)


def test_information_reaches_everyone_within_ceil_log2_rounds() -> None:
    # Fig. 2: after ⌈log2 K⌉ rounds every node has heard from every other one.
    for K in (5, 6, 8, 11):
        reach = [{k} for k in range(K)]
        for t in range(math.ceil(math.log2(K))):
            new = [set(r) for r in reach]
            for e in exponential_edges(t, range(K)):
                new[e.receiver] |= reach[e.sender]
            reach = new
        assert all(r == set(range(K)) for r in reach)


def test_dropped_clients_are_skipped_and_the_rest_stay_connected() -> None:
    edges = exponential_edges(0, [0, 3, 7])
    assert {(e.sender, e.receiver) for e in edges} == {(0, 3), (3, 7), (7, 0)}
    assert exponential_edges(4, [5]) == []
    with pytest.raises(DataValidationError):
        exponential_edges(0, [1, 1])


def test_pushsum_without_training_converges_to_the_exact_average_for_six_clients() -> None:
    K, d = 6, 5
    theta0 = torch.randn(K, d, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    theta, w = theta0.clone(), torch.ones(K, dtype=torch.float64)
    comm = SimulatedPushSum(K)
    for t in range(60):
        theta, w = comm.exchange(t, range(K), theta, w, range(K))
    torch.testing.assert_close(theta, theta0.mean(0).expand(K, d), atol=1e-12, rtol=0)


def test_debiasing_recovers_the_average_when_p_is_not_doubly_stochastic() -> None:
    # Clients push different shares (asymmetric links): P is column- but not row-stochastic, so
    # the raw numerators drift to π-weighted values and only θ = x / w is the average (§3.4).
    K, d = 6, 3
    shares = [0.5, 0.9, 0.2, 0.7, 0.35, 0.6]
    theta0 = torch.randn(K, d, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    theta, w = theta0.clone(), torch.ones(K, dtype=torch.float64)
    numer = theta0.clone()
    for t in range(200):
        P = exponential_matrix(t, K, share=shares)
        theta, w = mix(P, theta, w)
        numer = P @ numer
    target = theta0.mean(0).expand(K, d)
    torch.testing.assert_close(theta, target, atol=1e-10, rtol=0)
    assert not torch.allclose(numer, target, atol=1e-3)  # without de-biasing: biased
    assert not torch.allclose(w, torch.ones(K, dtype=torch.float64), atol=1e-3)


def test_pushsum_among_the_remaining_clients_averages_their_proxies() -> None:
    K = 6
    theta0 = torch.arange(K, dtype=torch.float64).unsqueeze(1).repeat(1, 2)
    theta, w = theta0.clone(), torch.ones(K, dtype=torch.float64)
    comm, live = SimulatedPushSum(K), [0, 2, 3, 5]
    for t in range(80):
        theta, w = comm.exchange(t, range(K), theta, w, live)
    torch.testing.assert_close(theta[live], theta0[live].mean(0).expand(4, 2))
    torch.testing.assert_close(theta[[1, 4]], theta0[[1, 4]])  # dropped: untouched


@settings(max_examples=30, deadline=None)
@given(K=st.integers(2, 17), t=st.integers(0, 40), seed=st.integers(0, 10_000))
def test_a_round_conserves_the_pushed_mass(K: int, t: int, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    theta = torch.randn(K, 4, generator=g, dtype=torch.float64)
    w = torch.rand(K, generator=g, dtype=torch.float64) + 0.5
    new_theta, new_w = SimulatedPushSum(K).exchange(t, range(K), theta, w, range(K))
    torch.testing.assert_close(new_w.sum(), w.sum())
    torch.testing.assert_close(
        (new_w.unsqueeze(1) * new_theta).sum(0), (w.unsqueeze(1) * theta).sum(0)
    )


def test_messages_carry_the_numerator_and_the_weight() -> None:
    msg, kept = push_message(torch.tensor([2.0, -4.0]), torch.tensor(0.5), 0.25)
    torch.testing.assert_close(msg, torch.tensor([0.25, -0.5, 0.125]))
    torch.testing.assert_close(kept, torch.tensor([0.75, -1.5, 0.375]))
    theta, w = combine_messages(kept, [msg])
    torch.testing.assert_close(theta, torch.tensor([2.0, -4.0]))
    assert float(w) == 0.5
    with pytest.raises(DataValidationError):
        combine_messages(kept, [torch.zeros(2)])


def test_mix_rejects_a_matrix_that_loses_mass() -> None:
    P = torch.tensor([[0.5, 0.0], [0.4, 1.0]], dtype=torch.float64)
    with pytest.raises(DataValidationError, match="column-stochastic"):
        mix(P, torch.zeros(2, 1, dtype=torch.float64), torch.ones(2, dtype=torch.float64))
    with pytest.raises(DataValidationError):
        exponential_matrix(0, 3, share=1.5)
