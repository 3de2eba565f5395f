"""The RDP accountant: Rényi DP curves of the events over dp-accounting's orders (conservative,
fast).

Each event maps to a dp-accounting event whose RDP curve dp-accounting's ``RdpAccountant``
computes (cached per event); a composition adds the curves and converts them to ε at δ.  An
``approx_dp`` event (known only by (ε_i, δ_i)) has no curve: it joins by basic composition,
ε = ε_RDP(δ − Σδ_i) + Σε_i.  A ``repeat_and_select`` event (Papernot & Steinke 2022) maps to
dp-accounting's ``RepeatAndSelectDpEvent``, which has an RDP curve (and no PLD: the PLD
accountant falls back on this one for it).

References
----------
pubsub-ml.txt §3.1 (Definition 1); Mironov, "Rényi differential privacy", CSF 2017; Papernot &
Steinke, "Hyperparameter tuning with Renyi differential privacy", ICLR 2022 (Theorems 2 and 6).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence

import dp_accounting
import numpy as np
from dp_accounting.rdp import rdp_privacy_accountant as rdp_lib

from pubsubml.privacy.accountants.approximate import ApproximateDPAccountant
from pubsubml.privacy.accountants.composition import event_shape
from pubsubml.privacy.events import DPEvent

__all__ = ["DEFAULT_ORDERS", "INTEGER_ORDERS", "RDPPrivacyAccountant", "rdp_epsilon"]

#: Integer RDP orders: a subset of dp-accounting's default orders, fast to evaluate in closed form.
INTEGER_ORDERS: tuple[float, ...] = (*range(2, 64), 128, 256, 512, 1024)
#: dp-accounting's default RDP orders, those of every reported RDP ε.
DEFAULT_ORDERS: tuple[float, ...] = tuple(rdp_lib.DEFAULT_RDP_ORDERS)


def dp_accounting_event(event: DPEvent) -> dp_accounting.DpEvent:
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
            dp_accounting.ComposedDpEvent([dp_accounting_event(e) for e in event.events or ()]),
            float(event.mean or 1.0),
            event_shape(event),
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
        rdp_lib.RdpAccountant(orders=list(orders)).compose(dp_accounting_event(single)).rdp
    )
    curve.setflags(write=False)
    return curve


def rdp_epsilon(events: tuple[DPEvent, ...], delta: float, orders: tuple[float, ...]) -> float:
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


class RDPPrivacyAccountant(ApproximateDPAccountant):
    """Rényi DP over dp-accounting's default orders (conservative; a fast check).

    Examples
    --------
    >>> acc = RDPPrivacyAccountant()
    >>> acc.step(noise_multiplier=1.0, sample_rate=0.01, steps=100)
    >>> acc.mechanism(), round(acc.get_epsilon(1e-5), 2)
    ('rdp', 1.21)
    """

    @classmethod
    def mechanism(cls) -> str:
        return "rdp"

    @classmethod
    def grouped_epsilon(cls, events: tuple[DPEvent, ...], delta: float) -> float:
        return rdp_epsilon(events, delta, DEFAULT_ORDERS)
