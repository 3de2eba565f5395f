"""The checks of a publish that run on untrusted bytes: the weights' safe loader and ε recomputed.

Both are pure functions of the card, the weights and the publisher's δ, and both cost time and
memory that the uploader controls (an ONNX graph, DP events to compose), so the registry runs
:func:`validate_untrusted` in a pooled worker process with CPU-time and memory limits
(:mod:`pubsubml.artifacts.validation_pool`), never in the server process.

References
----------
pubsub-ml.txt §3.1 (Definition 1: (ε, δ)-DP) and §3.2 (publishers publish (ε^p, δ^p)-DP models).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pubsubml.artifacts.card import ModelCard
from pubsubml.artifacts.codecs import DecodeOptions
from pubsubml.artifacts.privacy_record import Accountant
from pubsubml.artifacts.published import build_runner
from pubsubml.errors import InvalidPrivacyParameterError, PubsubmlError
from pubsubml.privacy.accountants.release import release_epsilon
from pubsubml.privacy.events import DPEvent

__all__ = ["MAX_CARD_EPSILON", "MAX_DISTINCT_EVENTS", "recompute_epsilon", "validate_untrusted"]

_EPSILON_RTOL = 1e-6
#: Largest ε a card may carry, checked by RDP (milliseconds) before the PLD accountant runs: ε
#: beyond it is no meaningful guarantee (a likelihood ratio up to e^100), and the exact
#: accountant's time and memory grow with ε (σ = 0.2 over 10⁴ steps: 12 s and 1.7 GB).
MAX_CARD_EPSILON = 100.0
#: Most distinct DP events (identical events grouped) the registry composes for one card.
MAX_DISTINCT_EVENTS = 32


def recompute_epsilon(card: ModelCard, site_delta: float) -> float:
    """ε of the card's DP events, recomputed; refuse cards that claim less.

    At δ in (0, 1) the PLD accountant composes the events (tight).  δ = 0 is accepted only for
    pure ε-DP events (Laplace, or ``approx_dp`` with δ_i = 0, e.g. diffprivlib models), composed
    by basic composition; any other event needs δ > 0.  The card's δ may not exceed the
    publisher's δ budget ``site_delta``: a small ε at a large δ is not a small cost (ε = 0.28 at
    δ = 0.3 can be ε ≈ 4.4 at δ = 1e-5), and the ε shown and filtered on is the card's.
    """
    record = card.privacy
    if not record.events or math.isinf(record.epsilon):
        raise InvalidPrivacyParameterError(
            "the registry accepts differentially private models only: this card has no DP events "
            "(ε = ∞)"
        )
    if not 0.0 <= record.delta < 1.0:
        raise InvalidPrivacyParameterError(f"δ must be in (0, 1), the card says {record.delta}")
    if record.delta > site_delta:
        raise InvalidPrivacyParameterError(
            f"the card's δ = {record.delta:g} exceeds the publisher's δ = {site_delta:g}: state "
            "the model's ε at a δ no larger than the site's"
        )
    _check_cost(record.events, record.delta)
    try:
        epsilon = release_epsilon(record.events, record.delta)
    except PubsubmlError as exc:
        raise InvalidPrivacyParameterError(
            f"the card's DP events cannot be accounted at δ = {record.delta:g}: {exc}"
        ) from None
    except (ArithmeticError, ValueError, MemoryError) as exc:
        raise InvalidPrivacyParameterError(
            f"the card's DP events cannot be accounted at δ = {record.delta:g} "
            f"({type(exc).__name__})"
        ) from None
    if not math.isfinite(epsilon) or epsilon <= 0:
        raise InvalidPrivacyParameterError(
            f"the card's DP events give no finite ε > 0 at δ = {record.delta:g} (got {epsilon})"
        )
    if record.epsilon < epsilon * (1.0 - _EPSILON_RTOL):
        raise InvalidPrivacyParameterError(
            f"the card claims ε = {record.epsilon:.6g}, but its DP events give ε = {epsilon:.6g} at "
            f"δ = {record.delta:g}; a card may not claim less than its events cost"
        )
    return float(epsilon)


def _check_cost(events: Sequence[DPEvent], delta: float) -> None:
    """Refuse, cheaply, DP events the exact accountant should never be asked to compose.

    Too many distinct events, or an RDP ε (an upper bound, within a factor of about 1.4 of the
    exact ε at these scales, computed in milliseconds) above :data:`MAX_CARD_EPSILON`; also any
    event the accountants cannot evaluate (an overflow, an unbounded grid), as a 422, not a 500.
    """
    distinct = len(set(events))
    if distinct > MAX_DISTINCT_EVENTS:
        raise InvalidPrivacyParameterError(
            f"the card has {distinct} distinct DP events; the registry composes at most "
            f"{MAX_DISTINCT_EVENTS} (group repeated steps into one event with a count)"
        )
    backend: Accountant = "pure" if delta == 0.0 else "rdp"
    try:
        bound = release_epsilon(events, delta, backend)
    except PubsubmlError:
        return  # the exact accounting below reports it with its reason
    except (ArithmeticError, ValueError, MemoryError) as exc:
        raise InvalidPrivacyParameterError(
            f"the card's DP events cannot be accounted at δ = {delta:g} ({type(exc).__name__})"
        ) from None
    if not bound <= MAX_CARD_EPSILON:
        raise InvalidPrivacyParameterError(
            f"the card's DP events give ε ≈ {bound:.3g} at δ = {delta:g} by RDP, above the "
            f"{MAX_CARD_EPSILON:g} the registry accepts: that is no meaningful DP guarantee"
        )


def validate_untrusted(
    card: ModelCard, weights: bytes, *, site_delta: float, max_weights_bytes: int
) -> float:
    """Load ``weights`` with the safe loader of the card's format and recompute the card's ε.

    Returns
    -------
    float
        ε of the card's DP events at the card's δ (see :func:`recompute_epsilon`).

    Raises
    ------
    UntrustedArtifactError
        The weights fail a safety check (pickle, external data, a forbidden ONNX operator, a
        shape that disagrees with the card).
    InvalidPrivacyParameterError
        See :func:`recompute_epsilon`.
    """
    build_runner(card, weights, DecodeOptions(max_bytes=max_weights_bytes, intra_op_threads=1))
    return recompute_epsilon(card, site_delta)
