"""Sequential composition of DP events, shared by every accountant.

Composition is commutative, so events that differ only in ``count`` merge into one
(:func:`group_events`: the key of every accountant's caches).  The events of one composition
may hold two neighbouring relations (:class:`~pubsubml.privacy.events.DPEvent`): their ε then
holds for replace-one neighbours (:func:`neighbouring_of`), after the add/remove events are
converted (:func:`replace_one_epsilon`, for the (ε, δ) accountants).

References
----------
pubsub-ml.txt §3.1 (Definition 1, (ε, δ)-DP, over add/remove-one neighbours).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from pubsubml.errors import InvalidPrivacyParameterError
from pubsubml.privacy.events import DPEvent, Neighbouring

__all__ = ["event_shape", "group_events", "is_mixed", "neighbouring_of", "replace_one_epsilon"]

_Key = tuple[str, float, float, float, float, tuple[DPEvent, ...], float, float, str]
#: ε at δ of grouped events by one accountant (``accountant(events, delta)``).
GroupedEpsilon = Callable[[tuple[DPEvent, ...], float], float]


def event_shape(event: DPEvent) -> float:
    """The shape η of a ``repeat_and_select`` event as dp-accounting takes it (∞: Poisson)."""
    return math.inf if event.shape is None else float(event.shape)


def _params(event: DPEvent) -> _Key:
    """Everything but ``count``; ``None`` (a field the mechanism does not use) maps to -1
    (a Poisson ``shape``, which is ``None``, maps to ∞)."""
    fields = (event.noise_multiplier, event.sample_rate, event.epsilon, event.delta, event.mean)
    sigma, rate, eps, dlt, mean = (-1.0 if v is None else float(v) for v in fields)
    shape = event_shape(event) if event.mechanism == "repeat_and_select" else -1.0
    return (
        event.mechanism,
        sigma,
        rate,
        eps,
        dlt,
        event.events or (),
        mean,
        shape,
        event.neighbouring,
    )


def group_events(events: Sequence[DPEvent]) -> tuple[DPEvent, ...]:
    """Merge events that differ only in ``count`` into their first occurrence (composition is
    commutative); the order of first occurrence is kept, so appending an event extends the key.

    Raises
    ------
    InvalidPrivacyParameterError
        An entry that is not a :class:`~pubsubml.privacy.events.DPEvent`.
    """
    counts: dict[_Key, tuple[DPEvent, int]] = {}
    for event in events:
        if not isinstance(event, DPEvent):
            raise InvalidPrivacyParameterError(f"expected a DPEvent, got {type(event).__name__}")
        key = _params(event)
        first, n = counts.get(key, (event, 0))
        counts[key] = (first, n + event.count)
    return tuple(
        event if event.count == n else event.model_copy(update={"count": n})
        for event, n in counts.values()
    )


def is_mixed(events: Sequence[DPEvent]) -> bool:
    """Whether the events hold both neighbouring relations."""
    return len({e.neighbouring for e in events}) > 1


def neighbouring_of(events: Sequence[DPEvent]) -> Neighbouring:
    """The neighbouring relation of the ε the accountants report for ``events``:
    ``"replace_one"`` as soon as one event is, else ``"add_remove"``.

    Examples
    --------
    >>> sgd = DPEvent(mechanism="subsampled_gaussian", noise_multiplier=1.0, sample_rate=0.01)
    >>> nb = DPEvent(mechanism="approx_dp", epsilon=0.5, delta=0.0, neighbouring="replace_one")
    >>> neighbouring_of([sgd]), neighbouring_of([sgd, nb])
    ('add_remove', 'replace_one')
    """
    return "replace_one" if any(e.neighbouring == "replace_one" for e in events) else "add_remove"


def _split_for_replace_one(events: Sequence[DPEvent]) -> tuple[list[DPEvent], list[DPEvent]]:
    """(replace-one events, add/remove events that need group privacy): a Gaussian or Laplace
    add/remove event joins the first with half its noise multiplier (its sensitivity at most
    doubles when a record is replaced)."""
    direct: list[DPEvent] = []
    rest: list[DPEvent] = []
    for e in events:
        if e.neighbouring == "replace_one":
            direct.append(e)
        elif e.mechanism in ("gaussian", "laplace"):
            sigma = float(e.noise_multiplier or 0.0) / 2.0
            direct.append(
                e.model_copy(update={"noise_multiplier": sigma, "neighbouring": "replace_one"})
            )
        else:
            rest.append(e)
    return direct, rest


def _group_privacy_event(
    rest: Sequence[DPEvent], delta: float, epsilon_of: GroupedEpsilon
) -> DPEvent | None:
    """The replace-one ``approx_dp`` event of add/remove events composed at a share δ_A of δ:
    (2ε_A, (1 + e^ε_A)·δ_A) with (1 + e^ε_A)·δ_A ≤ δ/2; ``None`` when no finite ε exists."""
    group = group_events(rest)
    guess = epsilon_of(group, delta / 4.0)
    for _ in range(64):
        if not math.isfinite(guess) or guess > 700.0:
            return None
        delta_a = delta / (4.0 * (1.0 + math.exp(guess)))
        eps_a = epsilon_of(group, delta_a)
        if not math.isfinite(eps_a) or eps_a > 700.0:
            return None
        used = (1.0 + math.exp(eps_a)) * delta_a
        if used <= delta / 2.0:
            break
        guess = eps_a
    else:  # pragma: no cover - the guess grows to a fixed point in a few steps
        return None
    return DPEvent(
        mechanism="approx_dp",
        epsilon=max(2.0 * eps_a, 1e-12),
        delta=used,
        neighbouring="replace_one",
    )


def replace_one_epsilon(
    events: tuple[DPEvent, ...], delta: float, epsilon_of: GroupedEpsilon
) -> float:
    """ε at δ, for replace-one neighbours, of grouped events of both relations.

    Replacing a record is removing it then adding another, so an add/remove event is converted:
    a Gaussian or Laplace release whose sensitivity is Δ over add/remove neighbours has
    sensitivity at most 2Δ over replace-one neighbours (triangle inequality), i.e. half its
    noise multiplier; any other add/remove event (DP-SGD steps, ``approx_dp``,
    ``repeat_and_select``) is composed on its own at a share δ_A of δ, and its
    (ε_A, δ_A)-guarantee becomes (2ε_A, (1 + e^ε_A)·δ_A) over replace-one neighbours (group
    privacy for two neighbouring steps), which then composes as an ``approx_dp`` event.  δ_A is
    chosen so that (1 + e^ε_A)·δ_A ≤ δ/2.

    Parameters
    ----------
    events : tuple of DPEvent
        Grouped (:func:`group_events`).
    delta : float
        A valid δ.
    epsilon_of : callable
        The accountant's ε of grouped events at a δ.
    """
    direct, rest = _split_for_replace_one(events)
    if rest:
        converted = _group_privacy_event(rest, delta, epsilon_of)
        if converted is None:
            return math.inf
        direct.append(converted)
    return epsilon_of(group_events(direct), delta)
