"""The messages data owners send the learner of Algorithm 1, shared by both ends of the wire.

Each message is one JSON object posted to its own path.  The models are strict: exactly the fields
of the message, ints that are ints (not bools, not numeric strings), finite floats only.  A body is
at most :data:`MAX_BODY_BYTES`, far below any raw data set and far above a p-vector of floats, so
the learner can only ever hold what owners chose to send: n_i at registration and Laplace-noised
gradients of length p.

References
----------
async-dp-cost-of-privacy.txt §3 (Algorithm 1: registration, gradient queries, Eq. 4 answers).
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "LOOPBACK",
    "MAX_BODY_BYTES",
    "AnswerMessage",
    "PeerMessage",
    "RefuseMessage",
    "RegisterMessage",
    "RequestMessage",
]

LOOPBACK = "127.0.0.1"  # the only address any peer listens on or connects to
MAX_BODY_BYTES = 1 << 16


class PeerMessage(BaseModel):
    """A message from data owner i; ``path`` is where it is posted."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False, frozen=True)
    path: ClassVar[str]

    owner: int = Field(ge=0, description="i, the owner's index")


class RegisterMessage(PeerMessage):
    """Owner i announces n_i (public: neighbours differ by replacing one record, Definition 1)."""

    path: ClassVar[str] = "/register"
    n_records: int = Field(ge=1, description="n_i")


class RequestMessage(PeerMessage):
    """Owner i's Poisson clock fired: it asks for a gradient query."""

    path: ClassVar[str] = "/request"


class AnswerMessage(PeerMessage):
    """Owner i's Laplace-noised gradient Q̃_i(D_i; θ̂_k) (Eq. 4) to the query of ``ticket``."""

    path: ClassVar[str] = "/answer"
    ticket: int
    gradient: list[float]


class RefuseMessage(PeerMessage):
    """Owner i declines the query of ``ticket``: its budget is spent, or θ̂_k lies outside Θ."""

    path: ClassVar[str] = "/refuse"
    ticket: int
