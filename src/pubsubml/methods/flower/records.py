"""What travels in Flower's messages and what a site keeps in ``context.state``.

Parameters travel as an ``ArrayRecord`` of NumPy arrays in the order W0, b0, W1, b1, …; DP
events as the JSON of :class:`~pubsubml.privacy.events.DPEvent` in a ``ConfigRecord`` string,
exactly as cards hold them, so nothing is rounded on the way.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord

from pubsubml.privacy.events import DPEvent

__all__ = [
    "PRIVACY_QUERY",
    "STATE_KEY",
    "events_from_json",
    "events_to_json",
    "params_from_record",
    "params_to_record",
]

#: ``context.state`` key of a site's DP record (its accountant's events and its last model).
STATE_KEY = "pubsubml-dp"
#: Message type of the server's end-of-run query: every site answers with its DP events.
PRIVACY_QUERY = "query.pubsubml_privacy"


def params_to_record(params: Sequence[np.ndarray]) -> ArrayRecord:
    """An ``ArrayRecord`` of float32 copies of ``params``."""
    return ArrayRecord([np.ascontiguousarray(p, dtype=np.float32) for p in params])


def params_from_record(record: ArrayRecord) -> list[np.ndarray]:
    """The parameters of an ``ArrayRecord``, in order."""
    return [np.asarray(a, dtype=np.float32) for a in record.to_numpy_ndarrays()]


def events_to_json(events: Sequence[DPEvent]) -> str:
    """The events as a JSON list (the card's form)."""
    return json.dumps([e.model_dump(mode="json") for e in events])


def events_from_json(text: str) -> list[DPEvent]:
    """Events written by :func:`events_to_json`."""
    return [DPEvent.model_validate(e) for e in json.loads(text)]


def state_record(events: Sequence[DPEvent], rounds: int, n_examples: int) -> ConfigRecord:
    """A site's DP record for ``context.state``."""
    return ConfigRecord(
        {"events": events_to_json(events), "rounds": int(rounds), "num-examples": int(n_examples)}
    )
