"""The one interface methods use to publish, subscribe and fetch models.

Methods (``pubsubml.methods``) never talk HTTP or touch a database: they talk to a :class:`Hub`.
:class:`LocalHub` implements it in-process for simulations; the registry's ``RegistryClient``
implements it over HTTP for deployments, so simulation and deployment share method code (the same
split as Flower's strategies and grids; DESIGN.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from pubsubml.artifacts.card import ModelCard
    from pubsubml.schema import Channel

__all__ = ["FeedItem", "Hub"]


@dataclass(frozen=True)
class FeedItem:
    """One entry of a subscription's feed: a model matching the subscription.

    Attributes
    ----------
    cursor : int
        Monotonically increasing position in the feed; pass it back as ``after`` to resume.
    model_id : str
    card : ModelCard
    """

    cursor: int
    model_id: str
    card: ModelCard


@runtime_checkable
class Hub(Protocol):
    """Publish/subscribe transport for model artifacts (pubsub-ml.txt §3.2, §6 Discussion)."""

    def publish(self, card: ModelCard, weights: bytes) -> str:
        """Publish a signed card and its weights; returns the model id.

        Publishing the same digest twice returns the same id (idempotent).  The card's privacy
        record must already be charged to the publisher's ledger.
        """
        ...

    def subscribe(
        self,
        site: str,
        channel: Channel,
        *,
        task: str,
        classes: Sequence[Any] | None = None,
    ) -> str:
        """Register a subscription of ``site`` to ``channel``; returns the subscription id.

        Models published before the subscription are delivered too.
        """
        ...

    def poll(self, subscription_id: str, *, after: int = 0, timeout: float = 0.0) -> list[FeedItem]:
        """Feed items of the subscription with cursor > ``after``, oldest first.

        ``timeout`` > 0 waits up to that many seconds for a new item (long poll).
        """
        ...

    def fetch(self, model_id: str) -> tuple[ModelCard, bytes]:
        """The card and the weights of a model the caller may see."""
        ...

    def report_contributions(self, subscriber: str, scores: Mapping[str, float]) -> None:
        """Record a subscriber's normalized contribution score per model id (pfl-stacking.txt §3)."""
        ...
