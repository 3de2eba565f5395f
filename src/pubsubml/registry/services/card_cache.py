"""A bounded cache of published model cards, shared by the feed reads of one process."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable

__all__ = ["CardCache"]


class CardCache:
    """Published model cards by model id, least recently used dropped first, up to ``max_bytes``.

    A card never changes once its model is published (the registry neither edits nor deletes a
    model), so an entry never goes stale; many subscriptions deliver the same models, so a feed
    read usually finds their cards here and asks the database only for cursors and model ids.
    Safe to share between threads.

    Parameters
    ----------
    max_bytes : int, default=64 MiB
        Bound on the cached JSON text (characters).

    Examples
    --------
    >>> cache = CardCache(max_bytes=12)
    >>> cache.put("a", "{}" * 3); cache.put("b", "{}" * 3)
    >>> cache.get_many(["a", "b", "c"])
    {'a': '{}{}{}', 'b': '{}{}{}'}
    >>> cache.put("c", "{}" * 3)  # over 12 characters: "a", the least recently used, goes
    >>> sorted(cache.get_many(["a", "b", "c"]))
    ['b', 'c']
    """

    def __init__(self, max_bytes: int = 64 * 2**20) -> None:
        self.max_bytes = max_bytes
        self._cards: OrderedDict[str, str] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()

    def get_many(self, model_ids: Iterable[str]) -> dict[str, str]:
        """The cached cards among ``model_ids`` (marked as recently used)."""
        out = {}
        with self._lock:
            for model_id in model_ids:
                card = self._cards.get(model_id)
                if card is not None:
                    self._cards.move_to_end(model_id)
                    out[model_id] = card
        return out

    def put(self, model_id: str, card_json: str) -> None:
        """Keep ``card_json``, dropping the least recently used cards beyond ``max_bytes``."""
        if len(card_json) > self.max_bytes:
            return
        with self._lock:
            old = self._cards.pop(model_id, None)
            self._size += len(card_json) - (0 if old is None else len(old))
            self._cards[model_id] = card_json
            while self._size > self.max_bytes:
                _, dropped = self._cards.popitem(last=False)
                self._size -= len(dropped)
