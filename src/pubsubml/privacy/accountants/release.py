"""ε of a release from its DP events: the one computation every reported ε goes through.

The learner that trains a model, the privacy record of its card, the site's ledger, the
registry's publish check and ledger, and the registry's dashboard all call
:func:`release_epsilon` on the release's events, so one release has one ε wherever it is shown.

References
----------
pubsub-ml.txt §3.1 (Definition 1; Theorem 2, post-processing: ε is fixed by the mechanisms that
touched the data) and §5 Theorem 3 (each publisher's (ε^p, δ^p) holds for everything it
publishes).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pubsubml.privacy.accountants.registry import accountant_class
from pubsubml.privacy.events import DPEvent

__all__ = ["compute_epsilon", "default_accountant", "release_epsilon"]


def default_accountant(delta: float) -> str:
    """The accountant of an ε at δ when none is named: ``"pure"`` at δ = 0 (basic composition of
    pure ε-DP events), else ``"pld"`` (tight)."""
    return "pure" if delta == 0.0 else "pld"


def release_epsilon(
    events: Sequence[DPEvent], delta: float, accountant: str | None = None
) -> float:
    """ε at δ of the release made of ``events`` (their sequential composition, on the same data).

    Parameters
    ----------
    events : sequence of DPEvent
        What ran, in any order (composition is commutative).
    delta : float
        Target δ: in (0, 1) for ``"pld"`` and ``"rdp"``, 0 for ``"pure"``.
    accountant : str, optional
        A registered accountant (:func:`~pubsubml.privacy.accountants.registry.create_accountant`):
        ``"pld"`` (privacy loss distributions, tight), ``"rdp"`` (Rényi DP over dp-accounting's
        default orders, conservative and fast) or ``"pure"`` (basic composition of pure ε-DP
        events at δ = 0).  Default: :func:`default_accountant` of δ.

    Returns
    -------
    float
        ε ≥ 0; ``math.inf`` when no finite ε exists at this δ.

    Raises
    ------
    InvalidPrivacyParameterError
        On a δ the accountant does not handle, a non-DPEvent, or (``"pure"``) an event that is
        not pure ε-DP.
    UnknownAccountantError
        On an unknown accountant.

    Notes
    -----
    The result is a valid bound only if the events describe what actually ran: Poisson sampling
    for DP-SGD, the stated noise, and sensitivities from public bounds.  It holds for the events'
    neighbouring relation (:func:`~pubsubml.privacy.accountants.composition.neighbouring_of`),
    replace-one as soon as one event is.  A ``repeat_and_select`` event has no PLD: the PLD
    accountant accounts a sequence holding one by RDP.

    Examples
    --------
    >>> e = DPEvent(mechanism="subsampled_gaussian", noise_multiplier=1.0, sample_rate=0.01, count=100)
    >>> release_epsilon([e], 1e-5) <= release_epsilon([e], 1e-5, accountant="rdp")
    True
    >>> release_epsilon([DPEvent(mechanism="approx_dp", epsilon=0.5, delta=0.0)] * 2, 0.0)
    1.0
    """
    name = default_accountant(delta) if accountant is None else accountant
    return float(accountant_class(name).epsilon_of(events, delta))


def compute_epsilon(
    events: Sequence[DPEvent], delta: float, *, backend: Literal["pld", "rdp"] = "pld"
) -> float:
    """ε at δ ∈ (0, 1) of the sequential composition of ``events``: :func:`release_epsilon` by the
    (ε, δ) accountant ``backend``, PLD unless told otherwise.

    Examples
    --------
    >>> e = DPEvent(mechanism="subsampled_gaussian", noise_multiplier=1.0, sample_rate=0.01, count=100)
    >>> compute_epsilon([e], 1e-5) == release_epsilon([e], 1e-5, accountant="pld")
    True
    """
    return release_epsilon(events, delta, accountant=backend)
