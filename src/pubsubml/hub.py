"""The one interface methods use to publish, subscribe and fetch models.

Methods (``pubsubml.methods``) never talk HTTP or touch a database: they talk to a :class:`Hub`.
:class:`LocalHub` implements it in-process for simulations; the registry's ``RegistryClient``
implements it over HTTP for deployments, so simulation and deployment share method code (the same
split as Flower's strategies and grids; DESIGN.md).
"""

from __future__ import annotations

import hashlib
import math
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from pubsubml.artifacts.card import ModelCard
    from pubsubml.schema import Channel

__all__ = ["FeedItem", "Hub", "LocalHub"]


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


@dataclass(frozen=True)
class _Subscription:
    site: str
    channel: Channel
    task: str
    classes: frozenset[Any] | None


def _plain(label: Any) -> Any:
    """A label as a plain Python value (``numpy.int64(1)`` → ``1``) for set comparisons."""
    return label.item() if hasattr(label, "item") else label


class LocalHub:
    """In-process :class:`Hub`: cards and weights in memory, one global feed (thread-safe).

    A model reaches a subscription when (pubsub-ml.txt §3.2) its input features contain every
    feature of at least one term of the channel, its task is the subscription's task and, for a
    classifier subscribed with a label set, its classes are a subset of that set (so the subscriber
    can align its outputs by label).  A site's own models are not delivered to it.

    Every publication gets the next position of one global log; a subscription's feed is the
    matching part of the log, so cursors increase monotonically, a subscription created late sees
    every earlier matching model, and polling with the last cursor seen resumes without loss or
    duplication.

    Parameters
    ----------
    trusted_keys : mapping of key id to Ed25519PublicKey, optional
        When given, :meth:`publish` also verifies the card's signature against these keys.
    max_weights_bytes : int, default=256 MiB

    Examples
    --------
    >>> from pubsubml.schema import Channel
    >>> hub = LocalHub()
    >>> sub = hub.subscribe("s1", Channel.parse("age"), task="classification")
    >>> hub.poll(sub)
    []
    """

    def __init__(
        self,
        *,
        trusted_keys: Mapping[str, Any] | None = None,
        max_weights_bytes: int = 256 << 20,
    ) -> None:
        self.trusted_keys = dict(trusted_keys) if trusted_keys is not None else None
        self.max_weights_bytes = max_weights_bytes
        self._cond = threading.Condition()
        self._models: dict[str, tuple[ModelCard, bytes]] = {}
        self._log: list[str] = []  # model ids; the cursor of log[i] is i + 1
        self._subs: dict[str, _Subscription] = {}
        self._contributions: dict[str, dict[str, float]] = {}

    # ---- publishing ---------------------------------------------------------------------
    def publish(self, card: ModelCard, weights: bytes) -> str:
        """Store a card and its weights after checking the digest; returns the model id.

        Raises
        ------
        DigestMismatchError
            SHA-256 of ``weights`` differs from ``card.weights_sha256``.
        SignatureError
            ``trusted_keys`` were given and the card is not validly signed by one of them.
        UntrustedArtifactError
            Weights are not bytes or exceed ``max_weights_bytes``.
        """
        from pubsubml.artifacts.card import ModelCard
        from pubsubml.errors import DigestMismatchError, UntrustedArtifactError

        if not isinstance(card, ModelCard):
            raise TypeError(f"expected a ModelCard, got {type(card).__name__}")
        if not isinstance(weights, bytes | bytearray | memoryview):
            raise UntrustedArtifactError(f"weights must be bytes, got {type(weights).__name__}")
        data = bytes(weights)
        if len(data) > self.max_weights_bytes:
            raise UntrustedArtifactError(
                f"weights are {len(data)} bytes, the limit is {self.max_weights_bytes}"
            )
        digest = hashlib.sha256(data).hexdigest()
        if digest != card.weights_sha256:
            raise DigestMismatchError(
                f"weights digest {digest[:16]}… differs from the card's {card.weights_sha256[:16]}…"
            )
        if self.trusted_keys is not None:
            from pubsubml.artifacts.signing import verify_card

            verify_card(card, self.trusted_keys)
        with self._cond:
            if card.model_id in self._models:  # same publisher and digest: idempotent
                return card.model_id
            self._models[card.model_id] = (card, data)
            self._log.append(card.model_id)
            self._cond.notify_all()
        return card.model_id

    # ---- subscribing --------------------------------------------------------------------
    def subscribe(
        self,
        site: str,
        channel: Channel,
        *,
        task: str,
        classes: Sequence[Any] | None = None,
    ) -> str:
        """Register ``site``'s subscription to ``channel``; returns its id.

        Raises
        ------
        ValueError
            Unknown task, a non-Channel channel, or classes given for regression.
        """
        from pubsubml.schema import Channel

        if not isinstance(channel, Channel):
            raise TypeError(f"expected a Channel, got {type(channel).__name__}; use Channel.parse")
        if task not in ("classification", "regression"):
            raise ValueError(f"task must be 'classification' or 'regression', got {task!r}")
        if classes is not None and task == "regression":
            raise ValueError("a regression subscription takes no classes")
        labels = None if classes is None else frozenset(_plain(c) for c in classes)
        with self._cond:
            sub_id = f"{site}:{len(self._subs) + 1}"
            self._subs[sub_id] = _Subscription(site, channel, task, labels)
        return sub_id

    @staticmethod
    def _matches(sub: _Subscription, card: ModelCard) -> bool:
        if card.publisher == sub.site or card.task != sub.task:
            return False
        if sub.classes is not None and not set(card.classes or ()) <= sub.classes:
            return False
        return sub.channel.matches(card.trained_features)

    def poll(self, subscription_id: str, *, after: int = 0, timeout: float = 0.0) -> list[FeedItem]:
        """Matching feed items with cursor > ``after``, oldest first (waits up to ``timeout`` s).

        Raises
        ------
        NotFoundError
            Unknown subscription.
        ValueError
            ``after`` < 0 or ``timeout`` < 0.
        """
        from pubsubml.errors import NotFoundError

        if after < 0 or timeout < 0:
            raise ValueError(f"after and timeout must be >= 0, got {after}, {timeout}")
        deadline = time.monotonic() + timeout
        with self._cond:
            sub = self._subs.get(subscription_id)
            if sub is None:
                raise NotFoundError(f"unknown subscription {subscription_id!r}")
            while True:
                items = [
                    FeedItem(after + 1 + i, mid, self._models[mid][0])
                    for i, mid in enumerate(self._log[after:])
                    if self._matches(sub, self._models[mid][0])
                ]
                scanned = max(after, len(self._log))
                left = deadline - time.monotonic()
                if items or left <= 0:
                    return items
                self._cond.wait(left)
                after = scanned

    def fetch(self, model_id: str) -> tuple[ModelCard, bytes]:
        """The card and weights of ``model_id``.

        Raises
        ------
        NotFoundError
            Unknown model.
        """
        from pubsubml.errors import NotFoundError

        with self._cond:
            found = self._models.get(model_id)
        if found is None:
            raise NotFoundError(f"unknown model {model_id!r}")
        return found

    # ---- contributions ------------------------------------------------------------------
    def report_contributions(self, subscriber: str, scores: Mapping[str, float]) -> None:
        """Store ``subscriber``'s latest contribution scores (pfl-stacking.txt §3).

        Raises
        ------
        NotFoundError
            A score names an unknown model.
        DataValidationError
            A score is negative, NaN or infinite, or the scores sum to more than 1.
        """
        from pubsubml.errors import DataValidationError, NotFoundError

        clean = {str(k): float(v) for k, v in scores.items()}
        bad = {k: v for k, v in clean.items() if not (math.isfinite(v) and v >= 0)}
        if bad:
            raise DataValidationError(f"contribution scores must be finite and >= 0, got {bad}")
        if sum(clean.values()) > 1 + 1e-6:
            raise DataValidationError("normalized contribution scores must sum to at most 1")
        with self._cond:
            unknown = sorted(k for k in clean if k not in self._models)
            if unknown:
                raise NotFoundError(f"contribution scores name unknown models {unknown[:5]}")
            self._contributions[subscriber] = clean

    def contributions(self) -> dict[str, dict[str, float]]:
        """Every subscriber's latest reported scores: ``{subscriber: {model_id: score}}``."""
        with self._cond:
            return {s: dict(v) for s, v in self._contributions.items()}

    def publisher_of(self, model_id: str) -> str:
        """The publisher of a stored model.

        Raises
        ------
        NotFoundError
            Unknown model.
        """
        return self.fetch(model_id)[0].publisher

    def model_ids(self) -> list[str]:
        """Every stored model's id, in the order they were published."""
        with self._cond:
            return list(self._log)

    def __len__(self) -> int:
        with self._cond:
            return len(self._models)
