"""Settings of the registry service.

The registry is the API of pubsub-ml.txt §6 "Discussion": sites register as publishers or
subscribers, register feature metadata and channels, and the service streams published models to
subscribers.  With no configuration it runs embedded (SQLite in WAL mode and a local artifact
folder, DESIGN.md "Embedded default"); ``database_url`` selects PostgreSQL for several stateless
replicas.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from pubsubml.registry.infrastructure.nats_subjects import check_nats_url

__all__ = ["DEFAULT_MAX_UPLOAD_BYTES", "STORE_IN_DATABASE", "RegistrySettings"]

DEFAULT_MAX_UPLOAD_BYTES = 64 * 1024 * 1024
#: The ``--store`` / ``PUBSUBML_REGISTRY_STORE`` value that keeps artifacts in the database (a
#: folder of that name is written ``./database``).
STORE_IN_DATABASE = "database"

# Values that show up in tutorials and example files: never acceptable as a real admin secret.
_WEAK_SECRETS = frozenset(
    {"admin", "changeme", "change-me", "changethis", "default", "dev", "password", "secret", "test"}
)
_MIN_SECRET_LENGTH = 16
# Settings that ``RegistrySettings.from_env`` reads from ``PUBSUBML_<NAME>``.
_ENV_LIMITS = (
    "max_upload_bytes",
    "validation_workers",
    "validation_cpu_seconds",
    "validation_memory_bytes",
    "max_concurrent_publishes",
    "publish_wait_seconds",
    "orphan_grace_seconds",
    "ui_session_max_age",
    "feed_poll_interval",
    "feed_wakeups",
    "nats_url",
    "nats_jetstream",
    "publish_group_max",
)
_TRUE = frozenset({"1", "true", "yes"})
_MIN_SESSION_SECRET_LENGTH = 32


def _random_secret() -> SecretStr:
    return SecretStr(secrets.token_urlsafe(32))


class RegistrySettings(BaseModel):
    """Configuration of one registry process.

    Parameters
    ----------
    database_url : str
        SQLAlchemy URL: ``sqlite:///path/registry.db`` (embedded default) or
        ``postgresql+psycopg://user@host/db``.
    store_dir : Path
        Folder of the artifact store (published weights) when ``artifact_store`` is
        ``"files"``.
    artifact_store : {"files", "database"}, default="files"
        Where published weights are kept: files under ``store_dir``, or chunked rows of the
        registry database (:mod:`~pubsubml.registry.infrastructure.database_artifact_store`), so
        that replicas on different machines share only the database.
    admin_token : SecretStr
        The consortium administrator's bearer token.  Outside ``dev`` mode it must be at least 16
        characters and not a well-known default.
    dev : bool, default=False
        Development mode: an empty admin token is replaced by a random one.
    allow_seeded_noise : bool, default=False
        Research mode: accept cards whose DP noise was seeded (``privacy.noise`` is
        ``"seeded"`` or absent), as simulations publish them.  Off by default, since whoever
        knows a seed can regenerate the noise and subtract it (:mod:`pubsubml.privacy.noise`).
    max_upload_bytes : int, default=64 MiB
        Largest accepted publish request body; larger uploads get HTTP 413 while streaming.
    long_poll_max_seconds : float, default=60
        Upper bound on the ``timeout`` of a long poll.
    feed_poll_interval : float, default=0.5
        How often a waiting reader re-reads the database anyway (models committed by the same
        process, and on PostgreSQL by any replica, wake readers at once).
    publish_group_max : int, default=16
        Most concurrent publishes committed in one transaction (group commit,
        :mod:`~pubsubml.registry.infrastructure.group_commit`); 1 commits each alone.
    feed_wakeups : bool, default=True
        On PostgreSQL, ``LISTEN`` for the feed commits of every replica
        (:mod:`~pubsubml.registry.infrastructure.postgres_wakeups`; one extra connection per
        process).
    nats_url : str, optional
        A NATS server (``nats://127.0.0.1:4222``) through which replicas wake each other's
        readers after a feed commit, on any database
        (:mod:`~pubsubml.registry.infrastructure.nats_wakeups`; needs ``pubsubml[nats]``).
    nats_jetstream : bool, default=False
        Send those wake-ups through a JetStream stream (stored and acknowledged by the server)
        instead of a core NATS subject; needs ``nats_url`` and a server that runs JetStream.
    sse_heartbeat_seconds : float, default=15
        Interval of keep-alive comments on idle Server-Sent Events streams.
    orphan_grace_seconds : float, default=0
        Unreferenced store files younger than this survive the start-up collection (time to
        inspect leftovers).  Replicas sharing a store need no grace: the collection holds the
        upload lock, so it never takes a publish in progress for a leftover.
    validation_workers : int, default=2
        Worker processes that check uploaded weights and recompute ε (pooled, started on first
        use); at most this many validations run at once.
    validation_cpu_seconds : float, default=20
        CPU time one upload's validation may use; beyond it the worker is killed and the upload
        refused (422).  An honest 64 MiB ONNX model loads in about a second.
    validation_memory_bytes : int, default=4 GiB
        Address space of a validation worker (its imports use about 0.5 GB of it).
    max_concurrent_publishes : int, default=16
        Publish requests handled at once (bodies buffered at most this many times); more wait
        up to ``publish_wait_seconds``, then get 503 ``busy``.
    publish_wait_seconds : float, default=30
        See ``max_concurrent_publishes``; also the longest wait for a validation worker.
    ui_session_secret : SecretStr, optional
        Key that signs the web dashboard's session cookies (at least 32 characters).  When not
        set, a random one is generated per process: sessions then end when the process restarts,
        and replicas behind one address need the same secret.
    ui_cookie_secure : bool, default=False
        Send the dashboard's session cookie with the ``Secure`` flag (HTTPS only); set it when the
        registry is served over TLS.
    ui_session_max_age : int, default=28800
        Lifetime of a dashboard session in seconds (8 hours), counted from log-in.

    Raises
    ------
    ValueError
        An empty or default admin token outside ``dev`` mode, a dashboard session secret
        shorter than 32 characters, or a non-positive limit.

    Examples
    --------
    >>> s = RegistrySettings(database_url="sqlite:///r.db", store_dir="store", dev=True)
    >>> len(s.admin_token.get_secret_value()) >= 16
    True
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    database_url: str = Field(min_length=1)
    store_dir: Path
    artifact_store: Literal["files", "database"] = "files"
    admin_token: SecretStr = SecretStr("")
    dev: bool = False
    allow_seeded_noise: bool = False
    max_upload_bytes: int = Field(default=DEFAULT_MAX_UPLOAD_BYTES, gt=0)
    long_poll_max_seconds: float = Field(default=60.0, gt=0)
    feed_poll_interval: float = Field(default=0.5, gt=0)
    feed_wakeups: bool = True
    nats_url: str | None = None
    nats_jetstream: bool = False
    publish_group_max: int = Field(default=16, ge=1, le=1000)
    sse_heartbeat_seconds: float = Field(default=15.0, gt=0)
    orphan_grace_seconds: float = Field(default=0.0, ge=0)
    validation_workers: int = Field(default=2, ge=1, le=64)
    validation_cpu_seconds: float = Field(default=20.0, gt=0, le=3600)
    validation_memory_bytes: int = Field(default=4 << 30, ge=1 << 30)
    max_concurrent_publishes: int = Field(default=16, ge=1, le=1024)
    publish_wait_seconds: float = Field(default=30.0, gt=0, le=3600)
    ui_session_secret: SecretStr = Field(default_factory=_random_secret)
    ui_cookie_secure: bool = False
    ui_session_max_age: int = Field(default=8 * 3600, ge=60, le=30 * 86400)

    @field_validator("nats_url")
    @classmethod
    def _nats_url(cls, value: str | None) -> str | None:
        return None if not value else check_nats_url(value)

    @model_validator(mode="before")
    @classmethod
    def _dev_token(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and data.get("dev"):
            token = data.get("admin_token")
            raw = token.get_secret_value() if isinstance(token, SecretStr) else token
            if not raw:
                return {**data, "admin_token": SecretStr(secrets.token_urlsafe(32))}
        return data

    @model_validator(mode="before")
    @classmethod
    def _session_secret(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and "ui_session_secret" in data:
            secret = data["ui_session_secret"]
            raw = secret.get_secret_value() if isinstance(secret, SecretStr) else secret
            if not raw:
                return {**data, "ui_session_secret": _random_secret()}
            if isinstance(raw, str) and len(raw) < _MIN_SESSION_SECRET_LENGTH:
                raise ValueError(
                    f"the dashboard's session secret must have at least "
                    f"{_MIN_SESSION_SECRET_LENGTH} characters; leave it unset for a random one"
                )
        return data

    @model_validator(mode="after")
    def _jetstream_needs_nats(self) -> RegistrySettings:
        if self.nats_jetstream and self.nats_url is None:
            raise ValueError(
                "nats_jetstream needs a NATS server: set nats_url (PUBSUBML_NATS_URL, "
                "--nats-url) too"
            )
        return self

    @model_validator(mode="after")
    def _strong_secret(self) -> RegistrySettings:
        if self.dev:
            return self
        token = self.admin_token.get_secret_value()
        if not token.strip():
            raise ValueError(
                "refusing to start without an admin token: set PUBSUBML_ADMIN_TOKEN (e.g. "
                "`python -c 'import secrets; print(secrets.token_urlsafe(32))'`) or use --dev"
            )
        if token.strip().lower() in _WEAK_SECRETS or len(token) < _MIN_SECRET_LENGTH:
            raise ValueError(
                f"refusing to start with a default or short admin token (at least "
                f"{_MIN_SECRET_LENGTH} characters, not a well-known value); use --dev for development"
            )
        return self

    @property
    def is_sqlite(self) -> bool:
        """True for the embedded SQLite backend."""
        return self.database_url.startswith("sqlite")

    @property
    def lock_dir(self) -> Path | None:
        """Folder of the upload lock's files on SQLite: the store's, or with the database store
        the database file's (replicas of a SQLite registry share its host); None on
        PostgreSQL, whose advisory locks need no folder."""
        if self.artifact_store == "files":
            return self.store_dir
        if not self.is_sqlite:
            return None
        path = self.database_url.removeprefix("sqlite:///")
        if path in ("", self.database_url, ":memory:") or path.startswith("file:"):
            return self.store_dir
        return Path(path).resolve().parent

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> RegistrySettings:
        """Settings from ``PUBSUBML_*`` environment variables, then ``overrides``.

        ``PUBSUBML_REGISTRY_DATA`` (default ``./registry-data``) holds the default SQLite file and
        artifact folder; ``PUBSUBML_REGISTRY_DB``, ``PUBSUBML_REGISTRY_STORE`` (a folder, or
        ``database`` for the database store),
        ``PUBSUBML_ADMIN_TOKEN``, ``PUBSUBML_REGISTRY_DEV`` (``1``/``true``),
        ``PUBSUBML_ALLOW_SEEDED_NOISE`` (``1``/``true``) and, for the limits,
        ``PUBSUBML_`` + the setting's name in capitals (``PUBSUBML_MAX_UPLOAD_BYTES``,
        ``PUBSUBML_VALIDATION_WORKERS``, ``PUBSUBML_VALIDATION_CPU_SECONDS``,
        ``PUBSUBML_VALIDATION_MEMORY_BYTES``, ``PUBSUBML_MAX_CONCURRENT_PUBLISHES``,
        ``PUBSUBML_PUBLISH_WAIT_SECONDS``, ``PUBSUBML_ORPHAN_GRACE_SECONDS``,
        ``PUBSUBML_UI_SESSION_MAX_AGE``, ``PUBSUBML_FEED_POLL_INTERVAL``,
        ``PUBSUBML_FEED_WAKEUPS`` (``true``/``false``), ``PUBSUBML_NATS_URL``,
        ``PUBSUBML_NATS_JETSTREAM`` (``true``/``false``), ``PUBSUBML_PUBLISH_GROUP_MAX``) override
        single settings, and so do the dashboard's
        ``PUBSUBML_UI_SESSION_SECRET`` and ``PUBSUBML_UI_COOKIE_SECURE`` (``1``/``true``).
        Overrides that are ``None`` are ignored.
        """
        env = os.environ if env is None else env
        data_dir = Path(env.get("PUBSUBML_REGISTRY_DATA", "registry-data"))
        values: dict[str, Any] = {
            "database_url": env.get("PUBSUBML_REGISTRY_DB")
            or f"sqlite:///{data_dir / 'registry.db'}",
            "store_dir": data_dir / "artifacts",
            "admin_token": SecretStr(env.get("PUBSUBML_ADMIN_TOKEN", "")),
            "dev": env.get("PUBSUBML_REGISTRY_DEV", "").lower() in _TRUE,
            "allow_seeded_noise": env.get("PUBSUBML_ALLOW_SEEDED_NOISE", "").lower() in _TRUE,
            "ui_cookie_secure": env.get("PUBSUBML_UI_COOKIE_SECURE", "").lower() in _TRUE,
        }
        store = env.get("PUBSUBML_REGISTRY_STORE")
        if store == STORE_IN_DATABASE:
            values["artifact_store"] = "database"
        elif store:
            values["store_dir"] = store
        if env.get("PUBSUBML_UI_SESSION_SECRET"):
            values["ui_session_secret"] = SecretStr(env["PUBSUBML_UI_SESSION_SECRET"])
        for name in _ENV_LIMITS:
            raw = env.get(f"PUBSUBML_{name.upper()}")
            if raw:
                values[name] = raw  # converted and range-checked by the model
        values.update({k: v for k, v in overrides.items() if v is not None})
        for name in ("admin_token", "ui_session_secret"):
            if isinstance(values.get(name), str):
                values[name] = SecretStr(values[name])
        return cls(**values)
