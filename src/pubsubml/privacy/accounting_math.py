"""Pure privacy-accounting math over dp-accounting: DP events to ε, by PLD (tight) or RDP.

Maps :class:`~pubsubml.privacy.events.DPEvent` to dp-accounting events, privacy loss
distributions (PLDs) and RDP curves, chooses the PLD discretization, and caches what is costly to
rebuild.  No state beyond those caches, and no validation of δ: the public entry points
(:func:`~pubsubml.privacy.accountant.compute_epsilon`,
:func:`~pubsubml.privacy.accountant.pld_discretization_interval`) check their arguments, then call
in here.  This module imports numpy and dp-accounting only (opacus' ``accountants/analysis``).

Every event composes sequentially (the events ran on the same data).  A ``repeat_and_select``
event (Papernot & Steinke 2022) has an RDP curve (dp-accounting's ``RepeatAndSelectDpEvent``) but
no PLD: a composition that holds one is accounted by RDP whatever the backend asked for.

References
----------
pubsub-ml.txt §3.1 (Definition 1, (ε, δ)-DP; Theorem 2, post-processing: ε is fixed by the
mechanisms that touched the data, never by what is done with their output).
"""

from __future__ import annotations

import functools
import math
from collections import OrderedDict
from collections.abc import Callable, Sequence

import dp_accounting
import numpy as np
from dp_accounting.pld import common as pld_common
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from dp_accounting.rdp import rdp_privacy_accountant as rdp_lib

from pubsubml.errors import InvalidPrivacyParameterError
from pubsubml.privacy.events import DPEvent

__all__ = ["PLD_RESOLUTION"]

#: PLD grid step relative to ε: Δ ≤ PLD_RESOLUTION · min(1, ε̂), never above dp-accounting's 1e-4.
PLD_RESOLUTION = 1e-4
# Integer RDP orders: a subset of dp-accounting's default orders, fast to evaluate in closed form.
_INTEGER_ORDERS: tuple[float, ...] = (*range(2, 64), 128, 256, 512, 1024)
_DEFAULT_ORDERS: tuple[float, ...] = tuple(rdp_lib.DEFAULT_RDP_ORDERS)


_Key = tuple[str, float, float, float, float, tuple[DPEvent, ...], float, float, str]


def _params(event: DPEvent) -> _Key:
    """Everything but ``count``; ``None`` (a field the mechanism does not use) maps to -1
    (a Poisson ``shape``, which is ``None``, maps to ∞)."""
    fields = (event.noise_multiplier, event.sample_rate, event.epsilon, event.delta, event.mean)
    sigma, rate, eps, dlt, mean = (-1.0 if v is None else float(v) for v in fields)
    shape = _shape(event) if event.mechanism == "repeat_and_select" else -1.0
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


def _shape(event: DPEvent) -> float:
    """The shape η of a ``repeat_and_select`` event as dp-accounting takes it (∞: Poisson)."""
    return math.inf if event.shape is None else float(event.shape)


def _has_no_pld(events: Sequence[DPEvent]) -> bool:
    """Whether the events hold a mechanism without a PLD (``repeat_and_select``)."""
    return any(e.mechanism == "repeat_and_select" for e in events)


def _group(events: Sequence[DPEvent]) -> tuple[DPEvent, ...]:
    """Merge events that differ only in ``count`` into their first occurrence (composition is
    commutative); the order of first occurrence is kept, so appending an event extends the key."""
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


def _dp_accounting_event(event: DPEvent) -> dp_accounting.DpEvent:
    """The dp-accounting event of a non-``approx_dp`` event, self-composed ``count`` times.

    ``repeat_and_select`` maps to
    ``dp_event.RepeatAndSelectDpEvent(ComposedDpEvent(inner), mean, η)``: one run is the
    sequential composition of the inner events.
    """
    sigma = event.noise_multiplier
    builders: dict[str, Callable[[], dp_accounting.DpEvent]] = {
        "subsampled_gaussian": lambda: dp_accounting.PoissonSampledDpEvent(
            event.sample_rate, dp_accounting.GaussianDpEvent(sigma)
        ),
        "gaussian": lambda: dp_accounting.GaussianDpEvent(sigma),
        "laplace": lambda: dp_accounting.LaplaceDpEvent(sigma),
        "repeat_and_select": lambda: dp_accounting.dp_event.RepeatAndSelectDpEvent(
            dp_accounting.ComposedDpEvent([_dp_accounting_event(e) for e in event.events or ()]),
            float(event.mean or 1.0),
            _shape(event),
        ),
    }
    return dp_accounting.SelfComposedDpEvent(builders[event.mechanism](), event.count)


def _approx_dp_totals(events: Sequence[DPEvent]) -> tuple[float, float]:
    """Basic composition of the ``approx_dp`` events: (Σ count·ε, Σ count·δ)."""
    approx = [e for e in events if e.mechanism == "approx_dp"]
    return (
        math.fsum(e.count * float(e.epsilon or 0.0) for e in approx),
        math.fsum(e.count * float(e.delta or 0.0) for e in approx),
    )


@functools.lru_cache(maxsize=1024)
def _single_rdp(event: DPEvent, orders: tuple[float, ...]) -> np.ndarray:
    """RDP curve of one run of ``event`` (``count`` ignored), from dp-accounting's RdpAccountant.

    Cached: a ledger that recomposes at every charge adds cached curves instead of recomputing
    them (an uncached subsampled-Gaussian curve costs tens of milliseconds).
    """
    single = event.model_copy(update={"count": 1})
    curve = np.asarray(
        rdp_lib.RdpAccountant(orders=list(orders)).compose(_dp_accounting_event(single)).rdp
    )
    curve.setflags(write=False)
    return curve


def _rdp_epsilon(events: tuple[DPEvent, ...], delta: float, orders: tuple[float, ...]) -> float:
    """RDP ε; ``approx_dp`` events join by basic composition (their ε added, their δ subtracted).

    The curve is Σ count · curve(event) in event order, the same arithmetic as ``RdpAccountant``.
    """
    approx_eps, approx_delta = _approx_dp_totals(events)
    curve = [e for e in events if e.mechanism != "approx_dp"]
    rest = delta - approx_delta
    if rest <= 0.0:
        return approx_eps if not curve and rest == 0.0 else math.inf
    if not curve:
        return approx_eps
    total = np.zeros(len(orders), dtype=np.float64)
    for event in curve:
        total += event.count * _single_rdp(event.model_copy(update={"count": 1}), orders)
    return float(rdp_lib.compute_epsilon(list(orders), total, rest)[0]) + approx_eps


def _nice_interval(epsilon_hint: float, resolution: float) -> float:
    """Largest value of the 1-2-5 series <= resolution·min(1, ε̂), floored at resolution/100."""
    scale = min(1.0, epsilon_hint) if math.isfinite(epsilon_hint) and epsilon_hint > 0 else 1.0
    wanted = max(resolution * scale, resolution / 100.0)
    exponent = math.floor(math.log10(wanted))
    for mantissa in (5.0, 2.0, 1.0):
        candidate = float(f"{mantissa:g}e{exponent}")
        if candidate <= wanted * (1.0 + 1e-9):
            return candidate
    return float(f"1e{exponent}")  # pragma: no cover - 1·10^e <= wanted always holds


@functools.lru_cache(maxsize=16)
def _single_pld(event: DPEvent, interval: float) -> pld_lib.PrivacyLossDistribution:
    """The PLD of one run (``count`` ignored) of a non-Gaussian event, as ``PLDAccountant``
    builds it.  Building it is the costly part, so it is cached apart from the self-composition."""
    sigma = float(event.noise_multiplier or 0.0)
    builders: dict[str, Callable[[], pld_lib.PrivacyLossDistribution]] = {
        "subsampled_gaussian": lambda: pld_lib.from_gaussian_mechanism(
            standard_deviation=sigma,
            value_discretization_interval=interval,
            sampling_prob=event.sample_rate,
        ),
        "laplace": lambda: pld_lib.from_laplace_mechanism(
            parameter=sigma, value_discretization_interval=interval
        ),
        "approx_dp": lambda: pld_lib.from_privacy_parameters(
            pld_common.DifferentialPrivacyParameters(event.epsilon or 0.0, event.delta or 0.0),
            value_discretization_interval=interval,
        ),
    }
    return builders[event.mechanism]()


def _event_pld(event: DPEvent, interval: float) -> pld_lib.PrivacyLossDistribution:
    """The PLD of an event self-composed ``count`` times, exactly as ``PLDAccountant`` does it."""
    if event.mechanism == "gaussian":  # Gaussian self-composition is a Gaussian with σ/√count.
        return pld_lib.from_gaussian_mechanism(
            standard_deviation=float(event.noise_multiplier or 0.0) / math.sqrt(event.count),
            value_discretization_interval=interval,
        )
    return _single_pld(event.model_copy(update={"count": 1}), interval).self_compose(event.count)


_PrefixKey = tuple[tuple[DPEvent, ...], float]
_PREFIXES: OrderedDict[_PrefixKey, pld_lib.PrivacyLossDistribution] = OrderedDict()
_MAX_PREFIXES = 32


def _composed_pld(events: tuple[DPEvent, ...], interval: float) -> pld_lib.PrivacyLossDistribution:
    """identity ∘ PLD(e₁) ∘ … ∘ PLD(eₖ), as ``PLDAccountant`` composes, resuming from the longest
    cached prefix: a ledger that appends a release composes one PLD, not all of them again."""
    start, composed = 0, pld_lib.identity(value_discretization_interval=interval)
    for k in range(len(events), 0, -1):
        hit = _PREFIXES.get((events[:k], interval))
        if hit is not None:
            _PREFIXES.move_to_end((events[:k], interval))
            start, composed = k, hit
            break
    for k in range(start, len(events)):
        composed = composed.compose(_event_pld(events[k], interval))
        if k >= len(events) - 2:  # keep the whole key and the key less its last group
            _PREFIXES[(events[: k + 1], interval)] = composed
    while len(_PREFIXES) > _MAX_PREFIXES:
        _PREFIXES.popitem(last=False)
    return composed


def _pld_epsilon(events: tuple[DPEvent, ...], delta: float, interval: float) -> float:
    """PLD ε at δ of the composition of ``events`` on a grid of step ``interval``."""
    return float(_composed_pld(events, interval).get_epsilon_for_delta(delta))


def _pld_interval(events: tuple[DPEvent, ...], delta: float) -> float:
    """PLD grid step for grouped ``events`` at a valid δ (documented at
    :func:`~pubsubml.privacy.accountant.pld_discretization_interval`): the 1-2-5 value not above
    ``PLD_RESOLUTION · min(1, ε̂)``, ε̂ the RDP estimate over integer orders."""
    hint = _rdp_epsilon(events, delta, _INTEGER_ORDERS) if events else math.inf
    return _nice_interval(hint, PLD_RESOLUTION)


@functools.lru_cache(maxsize=4096)
def _cached_epsilon(events: tuple[DPEvent, ...], delta: float, backend: str) -> float:
    if not events:
        return 0.0
    return _BACKENDS[backend](events, delta)


def _pld_backend(events: tuple[DPEvent, ...], delta: float) -> float:
    if _has_no_pld(events):  # no PLD for repeat-and-select: the (conservative) RDP bound
        return _rdp_epsilon(events, delta, _DEFAULT_ORDERS)
    return _pld_epsilon(events, delta, _pld_interval(events, delta))


def _rdp_backend(events: tuple[DPEvent, ...], delta: float) -> float:
    return _rdp_epsilon(events, delta, _DEFAULT_ORDERS)


# Explicit map from a backend name to its ε function (no string dispatch elsewhere).
_BACKENDS: dict[str, Callable[[tuple[DPEvent, ...], float], float]] = {
    "pld": _pld_backend,
    "rdp": _rdp_backend,
}


def _is_mixed(events: Sequence[DPEvent]) -> bool:
    """Whether the events hold both neighbouring relations."""
    return len({e.neighbouring for e in events}) > 1


def _replace_one_epsilon(events: tuple[DPEvent, ...], delta: float, backend: str) -> float:
    """ε at δ, for replace-one neighbours, of grouped events of both relations.

    Replacing a record is removing it then adding another, so an add/remove event is converted:
    a Gaussian or Laplace release whose sensitivity is Δ over add/remove neighbours has
    sensitivity at most 2Δ over replace-one neighbours (triangle inequality), i.e. half its
    noise multiplier; any other add/remove event (DP-SGD steps, ``approx_dp``,
    ``repeat_and_select``) is composed on its own at a share δ_A of δ, and its
    (ε_A, δ_A)-guarantee becomes (2ε_A, (1 + e^ε_A)·δ_A) over replace-one neighbours (group
    privacy for two neighbouring steps), which then composes as an ``approx_dp`` event.  δ_A is
    chosen so that (1 + e^ε_A)·δ_A ≤ δ/2.
    """
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
    if rest:
        group = _group(rest)
        guess = _cached_epsilon(group, delta / 4.0, backend)
        for _ in range(64):
            if not math.isfinite(guess) or guess > 700.0:
                return math.inf
            delta_a = delta / (4.0 * (1.0 + math.exp(guess)))
            eps_a = _cached_epsilon(group, delta_a, backend)
            if not math.isfinite(eps_a) or eps_a > 700.0:
                return math.inf
            used = (1.0 + math.exp(eps_a)) * delta_a
            if used <= delta / 2.0:
                break
            guess = eps_a
        else:  # pragma: no cover - the guess grows to a fixed point in a few steps
            return math.inf
        direct.append(
            DPEvent(
                mechanism="approx_dp",
                epsilon=max(2.0 * eps_a, 1e-12),
                delta=used,
                neighbouring="replace_one",
            )
        )
    return _cached_epsilon(_group(direct), delta, backend)
