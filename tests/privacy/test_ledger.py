"""Tests of pubsubml.privacy.ledger: sequential vs parallel composition, refusal, JSON."""

from __future__ import annotations

import pytest

from pubsubml.errors import (
    DuplicateReleaseError,
    InvalidPrivacyParameterError,
    PrivacyBudgetExceededError,
)
from pubsubml.privacy import DPEvent, PrivacyLedger, Release, compute_epsilon

DELTA = 1e-5
MODEL = DPEvent(mechanism="gaussian", noise_multiplier=6.0)
QUERY = DPEvent(mechanism="laplace", noise_multiplier=4.0)


def _release(release_id: str, *events: DPEvent, scope: tuple[str, ...] | None = None) -> Release:
    return Release(release_id=release_id, events=events or (MODEL,), scope=scope)


#: The chunks the tests' site declares (months and numbered chunks).
CHUNKS = ["jan", "feb", "mar", "apr", *(f"chunk{t}" for t in range(100))]


def _ledger(budget: float = 10.0, backend: str = "pld") -> PrivacyLedger:
    ledger = PrivacyLedger(site="h1", epsilon_budget=budget, delta=DELTA, backend=backend)  # type: ignore[arg-type]
    ledger.register_scopes(CHUNKS)
    return ledger


def test_a_chunk_must_be_registered_before_a_release_names_it() -> None:
    ledger = PrivacyLedger(site="h1", epsilon_budget=10.0, delta=DELTA)
    # Ten made-up labels on the same rows would otherwise be charged as one release.
    with pytest.raises(InvalidPrivacyParameterError, match="not registered"):
        ledger.charge(_release("a", scope=("week1",)))
    assert ledger.releases == [] and ledger.spent_epsilon() == 0.0
    assert ledger.register_scopes(["week1", "week2", "week1"]) == ["week1", "week2"]
    assert ledger.register_scopes(["week2"]) == []  # again: nothing new, time kept
    ledger.charge(_release("a", scope=("week1",)))
    with pytest.raises(InvalidPrivacyParameterError, match=r"\['week3'\]"):
        ledger.epsilon_if_charged(_release("b", scope=("week2", "week3")))
    ledger.charge(_release("whole"))  # the whole data set needs no registration
    for bad in ([""], ["x" * 129], ["tab\there"]):
        with pytest.raises(InvalidPrivacyParameterError, match="scope label"):
            ledger.register_scopes(bad)
    with pytest.raises(InvalidPrivacyParameterError, match="not a string"):
        ledger.register_scopes("week9")
    assert list(ledger.scopes) == ["week1", "week2"]
    assert PrivacyLedger.from_json(ledger.to_json()).scopes == ledger.scopes


def test_same_scope_composes_sequentially_through_the_accountant() -> None:
    # Prepare
    ledger = _ledger()
    first, second = _release("a", MODEL), _release("b", QUERY)
    eps_first = compute_epsilon([MODEL], DELTA)
    eps_second = compute_epsilon([QUERY], DELTA)

    # Execute
    ledger.charge(first)
    spent = ledger.charge(second)

    # Assert: more than either alone, less than the naive sum, and equal to the accountant's.
    assert max(eps_first, eps_second) < spent < eps_first + eps_second
    assert spent == compute_epsilon([MODEL, QUERY], DELTA)
    assert ledger.spent_epsilon() == spent


def test_disjoint_chunks_compose_in_parallel() -> None:
    ledger = _ledger()
    ledger.charge(_release("a", MODEL, scope=("jan",)))
    ledger.charge(_release("b", QUERY, scope=("feb",)))
    assert ledger.spent_epsilon() == max(
        compute_epsilon([MODEL], DELTA), compute_epsilon([QUERY], DELTA)
    )


def test_stream_of_disjoint_chunks_keeps_epsilon_constant() -> None:
    # A stream publisher trains each model on its own chunk (pubsub-ml.txt §6.2, Theorems 5–6).
    ledger = _ledger(budget=compute_epsilon([MODEL], DELTA))
    first = ledger.charge(_release("m0", scope=("chunk0",)))
    for t in range(1, 100):
        assert ledger.charge(_release(f"m{t}", scope=(f"chunk{t}",))) == first
    assert len(ledger.releases) == 100
    assert ledger.spent_epsilon() == first


def test_whole_data_release_touches_every_chunk() -> None:
    ledger = _ledger()
    ledger.charge(_release("a", MODEL, scope=("jan",)))
    ledger.charge(_release("b", MODEL, scope=("feb", "mar")))
    ledger.charge(_release("defaults", QUERY))  # scope None: the whole data set
    assert ledger.spent_epsilon() == compute_epsilon([MODEL, QUERY], DELTA)
    # A release on a chunk that arrives later still composes with the whole-data release.
    assert ledger.epsilon_if_charged(_release("c", MODEL, MODEL, scope=("apr",))) == (
        compute_epsilon([QUERY, MODEL, MODEL], DELTA)
    )


def test_overlapping_scopes_compose_where_they_overlap() -> None:
    ledger = _ledger()
    ledger.charge(_release("a", MODEL, scope=("jan", "feb")))
    ledger.charge(_release("b", QUERY, scope=("feb",)))
    ledger.charge(_release("c", QUERY, scope=("mar",)))
    assert ledger.spent_epsilon() == compute_epsilon([MODEL, QUERY], DELTA)


def test_refusal_leaves_the_ledger_unchanged() -> None:
    # Prepare: room for one model only.
    ledger = _ledger(budget=compute_epsilon([MODEL], DELTA) * 1.01)
    ledger.charge(_release("a"))
    before = ledger.to_json()

    # Execute / Assert
    with pytest.raises(PrivacyBudgetExceededError, match="nothing was charged"):
        ledger.charge(_release("b"))
    assert ledger.to_json() == before
    # Another chunk does not help: release "a" read the whole data set.
    with pytest.raises(PrivacyBudgetExceededError):
        ledger.charge(_release("c", scope=("apr",)))
    assert ledger.to_json() == before


def test_duplicate_release_id_refused() -> None:
    ledger = _ledger()
    ledger.charge(_release("a", scope=("jan",)))
    before = ledger.to_json()
    with pytest.raises(DuplicateReleaseError):
        ledger.charge(_release("a", scope=("feb",)))
    with pytest.raises(DuplicateReleaseError):
        ledger.epsilon_if_charged(_release("a"))
    assert ledger.to_json() == before


def test_epsilon_if_charged_and_remaining_change_nothing() -> None:
    ledger = _ledger(budget=2.0)
    assert ledger.spent_epsilon() == 0.0
    assert ledger.remaining_epsilon() == 2.0
    would = ledger.epsilon_if_charged(_release("a"))
    assert ledger.releases == []
    assert ledger.charge(_release("a")) == would
    assert ledger.remaining_epsilon() == pytest.approx(2.0 - would)


def test_json_round_trip() -> None:
    ledger = _ledger(backend="rdp")
    ledger.charge(_release("a", MODEL, scope=("jan",)))
    ledger.charge(_release("b", DPEvent(mechanism="approx_dp", epsilon=0.3, delta=0.0)))
    restored = PrivacyLedger.from_json(ledger.to_json())
    assert restored == ledger
    assert restored.spent_epsilon() == ledger.spent_epsilon()
    assert restored.spent_epsilon() == pytest.approx(
        compute_epsilon([MODEL], DELTA, backend="rdp") + 0.3
    )


def test_rdp_ledger_is_more_conservative() -> None:
    pld, rdp = _ledger(), _ledger(backend="rdp")
    for ledger in (pld, rdp):
        ledger.charge(_release("a", MODEL, QUERY))
    assert pld.spent_epsilon() <= rdp.spent_epsilon()


@pytest.mark.parametrize(
    ("budget", "delta"),
    [(0.0, DELTA), (-1.0, DELTA), (float("inf"), DELTA), (1.0, 0.0), (1.0, 1.0), (1.0, 2.0)],
)
def test_bad_budget_rejected(budget: float, delta: float) -> None:
    with pytest.raises(InvalidPrivacyParameterError):
        PrivacyLedger(site="h1", epsilon_budget=budget, delta=delta)


def test_bad_release_and_json_rejected() -> None:
    with pytest.raises(InvalidPrivacyParameterError):
        Release(release_id="a", events=())
    with pytest.raises(InvalidPrivacyParameterError):
        Release(release_id="a", events=(MODEL,), scope=())
    with pytest.raises(InvalidPrivacyParameterError):
        PrivacyLedger.from_json('{"site": "h1", "epsilon_budget": -1, "delta": 1e-5}')
    with pytest.raises(InvalidPrivacyParameterError):
        PrivacyLedger.from_json("not json")
    twice = [_release("a").model_dump(), _release("a").model_dump()]
    with pytest.raises(InvalidPrivacyParameterError):
        PrivacyLedger(site="h1", epsilon_budget=1.0, delta=DELTA, releases=twice)
