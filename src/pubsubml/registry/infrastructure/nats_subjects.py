"""The names of a registry's NATS wake-ups: its subject, its JetStream stream, the server URL.

Replicas of one registry must agree on these without talking to each other, so each is derived
from what they share: the subject from the database URL (:func:`feed_subject`), the stream from
the subject (:func:`stream_name`).  :func:`check_nats_url` refuses a URL that names no NATS
server, at settings time.
"""

from __future__ import annotations

import hashlib
from urllib.parse import urlsplit

from sqlalchemy.engine import make_url

__all__ = ["check_nats_url", "feed_subject", "stream_name"]


def feed_subject(database_url: str) -> str:
    """The NATS subject of one registry's feed commits: a digest of its database URL.

    Replicas of one registry name the same database (the password is left out, so replicas
    that hold it differently still agree); registries on other databases or schemas get other
    subjects.

    Examples
    --------
    >>> feed_subject("sqlite:///data/registry.db")[:14]
    'pubsubml.feed.'
    >>> feed_subject("postgresql+psycopg://u:a@h/db") == feed_subject("postgresql+psycopg://u:b@h/db")
    True
    """
    rendered = make_url(database_url).render_as_string(hide_password=True)
    return "pubsubml.feed." + hashlib.sha256(rendered.encode()).hexdigest()[:32]


def stream_name(subject: str) -> str:
    """The JetStream stream created for ``subject`` (a :func:`feed_subject`) when no stream
    captures it yet: its digest after ``PUBSUBML_FEED_``.

    Examples
    --------
    >>> stream_name("pubsubml.feed.0123abcd")
    'PUBSUBML_FEED_0123abcd'
    """
    return "PUBSUBML_FEED_" + subject.rsplit(".", 1)[-1]


def check_nats_url(url: str) -> str:
    """``url`` if it names a NATS server (``nats://``, ``tls://``, ``ws://`` or ``wss://``).

    Raises
    ------
    ValueError
        Another scheme or no host.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("nats", "tls", "ws", "wss") or not parts.hostname:
        raise ValueError(f"a NATS server URL looks like nats://127.0.0.1:4222, got {url!r}")
    return url
