"""JSON bodies of the registry API (``Base`` / ``Create`` / ``Public`` pydantic schemas).

Every name a caller can choose (site names, model ids, subscription ids) is checked against a
strict pattern before it reaches the database or the file system, so ids such as ``../../etc``
or ``x' OR '1'='1`` are rejected with HTTP 422 (or answered 404 when they appear in a path).
"""

from __future__ import annotations

import math
import re
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)

from pubsubml.privacy.events import DPEvent, Neighbouring
from pubsubml.schema import Feature

__all__ = [
    "SITE_NAME_PATTERN",
    "ContributionList",
    "ContributionPublic",
    "ContributionReport",
    "ErrorBody",
    "EventPage",
    "EventPublic",
    "FeatureList",
    "FeedItemPublic",
    "FeedPage",
    "LedgerPublic",
    "ModelList",
    "ModelPublic",
    "ReleasePublic",
    "ScopeList",
    "ScopePublic",
    "ScopeRegister",
    "SiteBase",
    "SiteCreate",
    "SiteCreated",
    "SiteList",
    "SitePublic",
    "SiteToken",
    "SubscriptionCreate",
    "SubscriptionList",
    "SubscriptionPublic",
    "TokenRotate",
]

SITE_NAME_PATTERN = r"^[A-Za-z][A-Za-z0-9_\-]{0,63}$"
MODEL_ID_PATTERN = r"^[0-9a-f]{32}$"
_SITE_NAME_RE = re.compile(SITE_NAME_PATTERN)
_B64_KEY_RE = re.compile(r"^[A-Za-z0-9+/]{43}=$")

Role = Literal["publisher", "subscriber", "both"]
Task = Literal["classification", "regression"]
Label = str | int | float


def check_site_name(name: str) -> str:
    """Validate a site name (a letter, then letters, digits, ``_`` or ``-``; at most 64).

    Examples
    --------
    >>> check_site_name("hospital-1")
    'hospital-1'
    """
    if not isinstance(name, str) or not _SITE_NAME_RE.fullmatch(name):
        raise ValueError(
            f"invalid site name {str(name)[:80]!r}: use a letter then letters, digits, '_' or '-' "
            "(at most 64 characters)"
        )
    return name


class ErrorBody(BaseModel):
    """Every 4xx/5xx answer: a machine-readable code and a human-readable message."""

    error: str = Field(examples=["not_found"])
    detail: str = Field(examples=["model '0123…' not found"])
    errors: list[dict[str, Any]] | None = None


# ---- sites ------------------------------------------------------------------------------
class SiteBase(BaseModel):
    """A participating site and its declared personalized budget (ε^p, δ^p) (pubsub-ml.txt §3.2)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=SITE_NAME_PATTERN, examples=["hospital-1"])
    roles: Role = "both"
    public_key: str | None = Field(
        default=None, description="Standard base64 of the raw 32-byte Ed25519 public key."
    )
    epsilon_budget: float = Field(gt=0, description="Declared total ε budget (> 0, finite).")
    delta_budget: float = Field(gt=0, lt=1, description="Declared δ budget in (0, 1).")

    @field_validator("public_key")
    @classmethod
    def _key(cls, v: str | None) -> str | None:
        if v is not None and not _B64_KEY_RE.fullmatch(v):
            raise ValueError("public_key must be the standard base64 of a raw 32-byte Ed25519 key")
        return v

    @field_validator("epsilon_budget")
    @classmethod
    def _finite(cls, v: float) -> float:
        if not math.isfinite(v):
            raise ValueError("epsilon_budget must be finite")
        return v

    @model_validator(mode="after")
    def _publisher_key(self) -> SiteBase:
        if self.roles != "subscriber" and self.public_key is None:
            raise ValueError("a publishing site needs its Ed25519 public_key")
        return self


class SiteCreate(SiteBase):
    """Body of ``POST /v1/sites`` (administrator only); the token may get an expiry."""

    token_expires_in_days: int | None = Field(default=None, ge=1, le=3650)


class TokenRotate(BaseModel):
    """Body of ``POST /v1/sites/{name}/token``: the new token's lifetime (none: no expiry)."""

    model_config = ConfigDict(extra="forbid")

    expires_in_days: int | None = Field(default=None, ge=1, le=3650)


class SiteToken(BaseModel):
    """A site's new token (shown only in this answer) and its lifetime."""

    name: str
    token: str
    token_created_at: datetime
    token_expires_at: datetime | None


class SitePublic(SiteBase):
    """A site as every authenticated caller sees it."""

    model_config = ConfigDict(extra="forbid", from_attributes=True)

    key_id: str | None = None
    created_at: datetime
    token_created_at: datetime | None = None
    token_expires_at: datetime | None = None
    token_revoked_at: datetime | None = None
    token_changed_by: str | None = None


class SiteCreated(SitePublic):
    """Answer of ``POST /v1/sites``: the only time the site's token is shown."""

    token: str


class SiteList(BaseModel):
    """``GET /v1/sites``."""

    sites: list[SitePublic]


# ---- features ---------------------------------------------------------------------------
class FeatureList(BaseModel):
    """The consortium's feature dictionary, or features to add to it (pubsub-ml.txt §3.2)."""

    model_config = ConfigDict(extra="forbid")

    features: list[Feature] = Field(max_length=4096)


# ---- models -----------------------------------------------------------------------------
class ModelPublic(BaseModel):
    """Summary of a published model; ``card`` is the full signed card when requested."""

    model_id: str
    publisher: str
    task: Task
    classes: list[Label] | None
    features: list[str]
    epsilon: float = Field(description="ε recomputed by the registry's PLD accountant.")
    claimed_epsilon: float = Field(description="ε stated on the card.")
    delta: float
    format: Literal["onnx", "safetensors"]
    weights_sha256: str
    size_bytes: int
    visible_to: list[str] | None = Field(
        default=None,
        description="Sites allowed to see the model (null: every site); shown to its publisher only.",
    )
    position: int
    created_at: datetime
    created: bool | None = Field(
        default=None, description="On publish: false when the same model was already published."
    )
    card: dict[str, Any] | None = None


class ModelList(BaseModel):
    """``GET /v1/models``."""

    models: list[ModelPublic]


# ---- subscriptions and feeds ------------------------------------------------------------
class SubscriptionCreate(BaseModel):
    """Body of ``POST /v1/subscriptions``: a channel F1 ∨ … ∨ Fk, a task and a label set."""

    model_config = ConfigDict(extra="forbid")

    site: str | None = Field(default=None, description="Subscriber (default: the caller).")
    channel: str = Field(min_length=1, max_length=8192, examples=["icu_los & age | wbc"])
    task: Task
    classes: list[Label] | None = Field(default=None, max_length=1024)

    @model_validator(mode="after")
    def _labels(self) -> SubscriptionCreate:
        if self.site is not None:
            check_site_name(self.site)
        if self.task == "regression" and self.classes is not None:
            raise ValueError("a regression subscription takes no classes")
        if self.classes is not None and len(set(map(repr, self.classes))) != len(self.classes):
            raise ValueError("classes must be unique")
        return self


class SubscriptionPublic(BaseModel):
    """A subscription."""

    id: str
    site: str
    channel: str
    task: Task
    classes: list[Label] | None
    created_at: datetime


class SubscriptionList(BaseModel):
    """``GET /v1/subscriptions``."""

    subscriptions: list[SubscriptionPublic]


class FeedItemPublic(BaseModel):
    """A model delivered to a subscription at position ``cursor``."""

    cursor: int
    model_id: str
    card: dict[str, Any]


class FeedPage(BaseModel):
    """Feed items after a cursor; ``next_cursor`` is the ``after`` of the next call."""

    items: list[FeedItemPublic]
    next_cursor: int


class EventPublic(BaseModel):
    """An entry of the append-only registry event feed."""

    position: int
    kind: str
    site: str | None
    model_id: str | None
    payload: dict[str, Any]
    created_at: datetime


class EventPage(BaseModel):
    """Events after a position."""

    events: list[EventPublic]
    next_cursor: int


# ---- ledger -----------------------------------------------------------------------------
class ReleasePublic(BaseModel):
    """A release charged to a site's ledger."""

    release_id: str
    description: str
    events: list[DPEvent]
    scope: list[str] | None
    epsilon: float
    delta: float
    model_id: str | None
    created_at: datetime


class ScopePublic(BaseModel):
    """A data chunk the site declared disjoint from its others, and when."""

    label: str
    created_at: datetime


class ScopeRegister(BaseModel):
    """Chunk labels to register (each 1–128 printable characters; at most 256 per request)."""

    model_config = ConfigDict(extra="forbid")

    scopes: list[Annotated[str, StringConstraints(min_length=1, max_length=128)]] = Field(
        min_length=1, max_length=256
    )

    @field_validator("scopes")
    @classmethod
    def _printable(cls, v: list[str]) -> list[str]:
        bad = [s for s in v if not s.isprintable()]
        if bad:
            raise ValueError(f"scope labels must be printable, got {bad[0][:40]!r}")
        return v


class ScopeList(BaseModel):
    """A site's registered data chunks; ``new`` lists those this request added."""

    site: str
    scopes: list[ScopePublic]
    new: list[str] = []


class LedgerPublic(BaseModel):
    """A site's privacy ledger: declared budget, registered chunks, releases and spent ε."""

    site: str
    epsilon_budget: float
    delta_budget: float
    spent_epsilon: float
    remaining_epsilon: float
    neighbouring: Neighbouring = Field(
        default="add_remove",
        description="The neighbouring relation spent ε holds for: replace-one once a release is.",
    )
    scopes: list[ScopePublic] = []
    releases: list[ReleasePublic]


# ---- contributions ----------------------------------------------------------------------
class ContributionReport(BaseModel):
    """A subscriber's normalized contribution score per model (pfl-stacking.txt §3)."""

    model_config = ConfigDict(extra="forbid")

    subscriber: str
    scores: dict[str, float] = Field(max_length=4096)

    @model_validator(mode="after")
    def _normalized(self) -> ContributionReport:
        check_site_name(self.subscriber)
        for model_id, score in self.scores.items():
            if not re.fullmatch(MODEL_ID_PATTERN, model_id):
                raise ValueError(f"invalid model id {model_id[:40]!r}")
            if not (math.isfinite(score) and 0.0 <= score <= 1.0):
                raise ValueError(f"score of {model_id} must be finite and in [0, 1], got {score}")
        if sum(self.scores.values()) > 1.0 + 1e-6:
            raise ValueError("normalized contribution scores must sum to at most 1")
        return self


class ContributionPublic(BaseModel):
    """One stored contribution score."""

    report_id: str
    subscriber: str
    model_id: str
    score: float
    created_at: datetime


class ContributionList(BaseModel):
    """``GET /v1/contributions``."""

    contributions: list[ContributionPublic]
