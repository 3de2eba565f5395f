"""The JetStream streams of the NATS wake-ups: found or created, and the server probed.

With ``jetstream=True`` (:class:`~pubsubml.registry.infrastructure.nats_wakeups.NatsWakeups`)
each wake-up is stored in a stream: the one that already captures the registry's subject, or a
new in-memory stream that keeps the last hour, at most 100,000 messages
(:func:`ensure_stream`).

Needs the optional dependency ``nats-py`` (``pip install 'pubsubml[nats]'``).

References
----------
NATS documentation, "JetStream" (streams, limits) and the nats.py client
(``JetStreamContext.add_stream``, ``find_stream_name_by_subject``).
"""

from __future__ import annotations

import asyncio
from typing import Any

from pubsubml.registry.infrastructure.nats_subjects import check_nats_url, stream_name

__all__ = [
    "STREAM_MAX_AGE_SECONDS",
    "STREAM_MAX_MESSAGES",
    "ensure_stream",
    "is_no_stream_error",
    "jetstream_available",
]

STREAM_MAX_AGE_SECONDS = 3600.0
"""A new stream keeps wake-ups this long: they are hints, read within milliseconds."""

STREAM_MAX_MESSAGES = 100_000
"""A new stream keeps at most this many wake-ups (the oldest are discarded first)."""

_STREAM_NAME_IN_USE = (10058, 10065)  # another configuration of the name; overlapping subjects


async def ensure_stream(js: Any, subject: str) -> str:
    """The name of the JetStream stream that stores ``subject``, created when there is none.

    A stream that already captures the subject is used as it is (an operator's stream for all
    registries, ``pubsubml.feed.>``, or one a replica created); otherwise an in-memory stream
    :func:`stream_name` is created with the limits :data:`STREAM_MAX_AGE_SECONDS` and
    :data:`STREAM_MAX_MESSAGES`.  Replicas that start together may race to create it: the loser
    uses the winner's.

    Raises
    ------
    RuntimeError
        The server does not run JetStream.
    """
    from nats.errors import NoRespondersError
    from nats.js.api import DiscardPolicy, StorageType
    from nats.js.errors import BadRequestError, NotFoundError, ServiceUnavailableError

    try:
        try:
            return str(await js.find_stream_name_by_subject(subject))
        except NotFoundError:
            pass
        try:
            info = await js.add_stream(
                name=stream_name(subject),
                subjects=[subject],
                storage=StorageType.MEMORY,
                max_age=STREAM_MAX_AGE_SECONDS,
                max_msgs=STREAM_MAX_MESSAGES,
                discard=DiscardPolicy.OLD,
            )
            return str(info.config.name)
        except BadRequestError as exc:
            if exc.err_code not in _STREAM_NAME_IN_USE:
                raise
            return str(await js.find_stream_name_by_subject(subject))
    except (NoRespondersError, ServiceUnavailableError) as exc:
        raise RuntimeError(
            "the NATS server does not run JetStream (start nats-server with -js), "
            "or leave the JetStream option off"
        ) from exc


async def jetstream_available(url: str, *, timeout: float = 2.0) -> bool:
    """Whether the NATS server at ``url`` answers and runs JetStream (for this account).

    Raises
    ------
    ValueError
        ``url`` is not a NATS URL (:func:`check_nats_url`).
    """
    import nats

    async def quiet(_exc: Exception) -> None:
        pass

    check_nats_url(url)
    try:  # the client retries a refused connection on its own: bounded here
        client = await asyncio.wait_for(
            nats.connect(
                url,
                connect_timeout=timeout,
                allow_reconnect=False,
                max_reconnect_attempts=1,
                error_cb=quiet,
            ),
            2 * timeout,
        )
    except Exception:  # no server there
        return False
    try:
        await asyncio.wait_for(client.jetstream().account_info(), timeout)
        return True
    except Exception:  # no JetStream: no responders, or it is not enabled for the account
        return False
    finally:
        await client.close()


def is_no_stream_error(exc: Exception) -> bool:
    """Whether a JetStream publish failed because no stream took the subject."""
    from nats.errors import NoRespondersError
    from nats.js.errors import NoStreamResponseError

    return isinstance(exc, NoStreamResponseError | NoRespondersError)
