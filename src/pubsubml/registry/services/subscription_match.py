"""What a subscription asks for, and whether a model answers it (pubsub-ml.txt §3.2).

A subscription names a channel F1 ∨ … ∨ Fk of feature sets, a task and optionally a label set;
:class:`SubscriptionMatch` holds them parsed, and :meth:`SubscriptionMatch.accepts` decides a
delivery, for a publish matching its model against the subscriptions of its task and for a new
subscription's backfill of the history.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pubsubml.registry.tables import SubscriptionRow
from pubsubml.schema import Channel

__all__ = ["SubscriptionMatch"]


@functools.lru_cache(maxsize=4096)
def _channel(text: str) -> Channel:
    return Channel.parse(text)


@functools.lru_cache(maxsize=4096)
def _classes(classes_json: str | None) -> frozenset[Any] | None:
    return None if classes_json is None else frozenset(json.loads(classes_json))


@dataclass(frozen=True)
class SubscriptionMatch:
    """What a subscription asks for: channel, task, label set, and which site it serves."""

    subscription_id: str
    site_id: int
    channel: Channel
    task: str
    classes: frozenset[Any] | None

    @classmethod
    def from_row(cls, row: SubscriptionRow) -> SubscriptionMatch:
        """Build from a stored subscription."""
        return cls.from_columns(row.id, row.site_id, row.channel, row.task, row.classes_json)

    @classmethod
    def from_columns(
        cls,
        subscription_id: str,
        site_id: int,
        channel: str,
        task: str,
        classes_json: str | None,
    ) -> SubscriptionMatch:
        """Build from a stored subscription's columns.  Channels and label sets are parsed once
        per distinct text (many subscriptions share them), so matching a model against thousands
        of subscriptions parses a handful."""
        return cls(subscription_id, site_id, _channel(channel), task, _classes(classes_json))

    def accepts(
        self,
        *,
        publisher_id: int,
        task: str,
        classes: Sequence[Any] | None,
        features: Iterable[str],
        public: bool,
        visible_to: frozenset[int],
    ) -> bool:
        """True when the model is delivered to this subscription (pubsub-ml.txt §3.2).

        The model must be visible to the subscriber, not its own, of the same task, with classes
        inside the subscription's label set (when one was given), and its input features must
        contain every feature of at least one term of the channel.
        """
        if publisher_id == self.site_id or task != self.task:
            return False
        if not public and self.site_id not in visible_to:
            return False
        if self.classes is not None and not set(classes or ()) <= self.classes:
            return False
        return self.channel.matches(features)
