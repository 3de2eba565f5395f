"""What an audit reports: the claimed ε, the audited lower bound, and how it was obtained."""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Literal

__all__ = ["AuditResult"]


@dataclasses.dataclass(frozen=True)
class AuditResult:
    """One audit of one mechanism.

    Parameters
    ----------
    target : str
        What was audited, e.g. ``"dpsgd-mlp"`` (see :data:`pubsubml.audit.catalog.AUDITS`).
    variant : str
        ``"correct"`` for the mechanism as shipped, else the deliberate defect of a negative control
        (``"noise-off"``, ``"clip-off"``, ``"noise-x0.1"``, ``"paper-accounting"``).
    claimed_epsilon : float
        The ε the mechanism's accountant reports for what ran (for a negative control: what the
        shipped mechanism would have claimed).
    delta : float
        The δ of the claim.
    lower_bound : float
        ε_lb: at ``confidence``, the mechanism is not (ε, δ)-DP for any ε < ε_lb.
    confidence : float
    method : {"one-run", "many-run"}
    canary : str
        The kind of canary: ``"gradient"`` (Dirac, white-box), ``"input"`` (crafted records, loss),
        ``"client"`` (client-level Dirac updates), ``"record"`` (one record, many runs).
    canaries : int
        ``m`` for a one-run audit; the number of runs for a many-run audit.
    guesses : int
        ``r``, the guesses the bound was computed from (one run), or the runs scored (many runs).
    correct : int
        ``v``, the right guesses.
    runtime_s : float
        Wall time of the audit (training and scoring) on this machine.
    details : dict
        Anything else worth reporting (steps, sample rate, σ, …).
    """

    target: str
    variant: str
    claimed_epsilon: float
    delta: float
    lower_bound: float
    confidence: float
    method: Literal["one-run", "many-run"]
    canary: str
    canaries: int
    guesses: int
    correct: int
    runtime_s: float
    details: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def violated(self) -> bool:
        """True when the audited lower bound exceeds the claimed ε: the claim is wrong."""
        return self.lower_bound > self.claimed_epsilon

    @property
    def tightness(self) -> float:
        """``lower_bound / claimed_epsilon`` (0 for an infinite claim)."""
        if not math.isfinite(self.claimed_epsilon) or self.claimed_epsilon <= 0:
            return 0.0
        return self.lower_bound / self.claimed_epsilon

    def as_row(self) -> dict[str, Any]:
        """A flat dict for tables (``details`` prefixed with ``detail_``)."""
        row = {
            f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "details"
        }
        row["violated"] = self.violated
        row["tightness"] = self.tightness
        row.update({f"detail_{k}": v for k, v in self.details.items()})
        return row
