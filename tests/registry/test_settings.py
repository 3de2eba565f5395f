"""Tests of pubsubml.registry.settings: RegistrySettings validation and ``from_env``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr, ValidationError

from pubsubml.registry.settings import DEFAULT_MAX_UPLOAD_BYTES, RegistrySettings

STRONG = "s" * 16


def _settings(tmp_path: Path, **changes: Any) -> RegistrySettings:
    values: dict[str, Any] = {
        "database_url": "sqlite:///r.db",
        "store_dir": tmp_path,
        "admin_token": STRONG,
        **changes,
    }
    return RegistrySettings(**values)


def test_defaults(tmp_path: Path) -> None:
    s = _settings(tmp_path)

    assert s.max_upload_bytes == DEFAULT_MAX_UPLOAD_BYTES == 64 * 1024 * 1024
    assert (s.validation_workers, s.max_concurrent_publishes) == (2, 16)
    assert s.validation_memory_bytes == 4 << 30
    assert s.dev is False and s.orphan_grace_seconds == 0.0
    assert s.store_dir == tmp_path


def test_admin_token_length_boundary(tmp_path: Path) -> None:
    assert _settings(tmp_path, admin_token="k" * 16).admin_token.get_secret_value() == "k" * 16

    with pytest.raises(ValidationError, match="at least 16 characters"):
        _settings(tmp_path, admin_token="k" * 15)


@pytest.mark.parametrize(
    "token", [" " * 12 + "admin", "PASSWORD" + " " * 10, "\tChangeMe" + " " * 9]
)
def test_padded_or_capitalised_well_known_tokens_are_refused(tmp_path: Path, token: str) -> None:
    assert len(token) >= 16

    with pytest.raises(ValidationError, match="default or short admin token"):
        _settings(tmp_path, admin_token=token)


def test_dev_mode_keeps_a_given_token_and_fills_an_empty_one(tmp_path: Path) -> None:
    kept = _settings(tmp_path, dev=True, admin_token="dev")
    filled = _settings(tmp_path, dev=True, admin_token=SecretStr(""))
    other = _settings(tmp_path, dev=True, admin_token="")

    assert kept.admin_token.get_secret_value() == "dev"  # weak tokens are allowed in dev mode
    assert len(filled.admin_token.get_secret_value()) >= 32
    assert filled.admin_token != other.admin_token  # random per instance


def test_the_admin_token_does_not_leak_into_representations(tmp_path: Path) -> None:
    token = "very-private-admin-token-1234"
    s = _settings(tmp_path, admin_token=token)

    assert token not in repr(s) and token not in str(s)
    assert token not in s.model_dump_json()


def test_settings_are_frozen_and_refuse_unknown_fields(tmp_path: Path) -> None:
    s = _settings(tmp_path)

    with pytest.raises(ValidationError):
        s.max_upload_bytes = 1  # type: ignore[misc]
    with pytest.raises(ValidationError, match="extra"):
        _settings(tmp_path, max_upload_size=1)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("database_url", ""),
        ("max_upload_bytes", 0),
        ("long_poll_max_seconds", 0.0),
        ("feed_poll_interval", -1.0),
        ("sse_heartbeat_seconds", 0.0),
        ("orphan_grace_seconds", -0.5),
        ("validation_workers", 65),
        ("validation_cpu_seconds", 3601.0),
        ("validation_memory_bytes", (1 << 30) - 1),
        ("max_concurrent_publishes", 1025),
        ("publish_wait_seconds", 0.0),
    ],
)
def test_out_of_range_limits_are_refused(tmp_path: Path, name: str, value: Any) -> None:
    with pytest.raises(ValidationError, match=name):
        _settings(tmp_path, **{name: value})


@pytest.mark.parametrize(
    ("url", "sqlite"),
    [("sqlite:///x.db", True), ("sqlite://", True), ("postgresql+psycopg://u@h/db", False)],
)
def test_is_sqlite(tmp_path: Path, url: str, sqlite: bool) -> None:
    assert _settings(tmp_path, database_url=url).is_sqlite is sqlite


def test_from_env_explicit_database_store_and_dev_flag(tmp_path: Path) -> None:
    env = {
        "PUBSUBML_REGISTRY_DATA": str(tmp_path / "ignored"),
        "PUBSUBML_REGISTRY_DB": "postgresql+psycopg://u@127.0.0.1/db",
        "PUBSUBML_REGISTRY_STORE": str(tmp_path / "objects"),
        "PUBSUBML_REGISTRY_DEV": "YES",
    }

    s = RegistrySettings.from_env(env)

    assert s.database_url == env["PUBSUBML_REGISTRY_DB"] and not s.is_sqlite
    assert s.store_dir == tmp_path / "objects"
    assert s.dev and len(s.admin_token.get_secret_value()) >= 32


@pytest.mark.parametrize(
    ("raw", "dev"), [("1", True), ("true", True), ("0", False), ("on", False), ("", False)]
)
def test_from_env_dev_values(raw: str, dev: bool) -> None:
    env = {"PUBSUBML_REGISTRY_DEV": raw, "PUBSUBML_ADMIN_TOKEN": STRONG}

    assert RegistrySettings.from_env(env).dev is dev


def test_from_env_defaults_to_registry_data_in_the_working_folder() -> None:
    s = RegistrySettings.from_env({"PUBSUBML_ADMIN_TOKEN": STRONG})

    assert s.database_url == f"sqlite:///{Path('registry-data') / 'registry.db'}"
    assert s.store_dir == Path("registry-data") / "artifacts"


def test_from_env_reads_every_limit_and_skips_empty_values(tmp_path: Path) -> None:
    env = {
        "PUBSUBML_REGISTRY_DATA": str(tmp_path),
        "PUBSUBML_ADMIN_TOKEN": STRONG,
        "PUBSUBML_VALIDATION_MEMORY_BYTES": str(2 << 30),
        "PUBSUBML_PUBLISH_WAIT_SECONDS": "1.5",
        "PUBSUBML_ORPHAN_GRACE_SECONDS": "60",
        "PUBSUBML_MAX_UPLOAD_BYTES": "",  # empty: the default
    }

    s = RegistrySettings.from_env(env)

    assert s.validation_memory_bytes == 2 << 30
    assert s.publish_wait_seconds == 1.5 and s.orphan_grace_seconds == 60.0
    assert s.max_upload_bytes == DEFAULT_MAX_UPLOAD_BYTES


@pytest.mark.parametrize(("raw", "on"), [("false", False), ("0", False), ("true", True)])
def test_from_env_reads_the_feed_settings(raw: str, on: bool) -> None:
    env = {
        "PUBSUBML_ADMIN_TOKEN": STRONG,
        "PUBSUBML_FEED_WAKEUPS": raw,
        "PUBSUBML_FEED_POLL_INTERVAL": "2",
    }

    s = RegistrySettings.from_env(env)

    assert s.feed_wakeups is on and s.feed_poll_interval == 2.0
    assert RegistrySettings.from_env({"PUBSUBML_ADMIN_TOKEN": STRONG}).feed_wakeups is True


def test_from_env_refuses_a_malformed_limit(tmp_path: Path) -> None:
    env = {"PUBSUBML_ADMIN_TOKEN": STRONG, "PUBSUBML_MAX_UPLOAD_BYTES": "lots"}

    with pytest.raises(ValidationError, match="max_upload_bytes"):
        RegistrySettings.from_env(env)


def test_from_env_overrides_win_and_none_is_ignored(tmp_path: Path) -> None:
    env = {
        "PUBSUBML_REGISTRY_DATA": str(tmp_path),
        "PUBSUBML_ADMIN_TOKEN": STRONG,
        "PUBSUBML_MAX_UPLOAD_BYTES": "1000",
    }

    s = RegistrySettings.from_env(
        env, max_upload_bytes=2000, admin_token="o" * 20, store_dir=None, dev=None
    )

    assert s.max_upload_bytes == 2000
    assert isinstance(s.admin_token, SecretStr) and s.admin_token.get_secret_value() == "o" * 20
    assert s.store_dir == tmp_path / "artifacts" and s.dev is False


def test_from_env_reads_the_process_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("PUBSUBML_REGISTRY_DB", "PUBSUBML_REGISTRY_STORE", "PUBSUBML_REGISTRY_DEV"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PUBSUBML_REGISTRY_DATA", str(tmp_path))
    monkeypatch.setenv("PUBSUBML_ADMIN_TOKEN", STRONG)
    monkeypatch.setenv("PUBSUBML_VALIDATION_WORKERS", "5")

    s = RegistrySettings.from_env()

    assert s.validation_workers == 5 and s.store_dir == tmp_path / "artifacts"
    assert s.admin_token.get_secret_value() == STRONG


def test_the_database_store_is_chosen_by_name(tmp_path: Path) -> None:
    s = RegistrySettings.from_env(
        {
            "PUBSUBML_REGISTRY_STORE": "database",
            "PUBSUBML_REGISTRY_DB": f"sqlite:///{tmp_path}/r.db",
        },
        admin_token=STRONG,
    )
    assert s.artifact_store == "database"
    assert s.lock_dir == tmp_path  # the upload lock's files lie beside the database file
    folder = RegistrySettings.from_env(
        {"PUBSUBML_REGISTRY_STORE": "./database"}, admin_token=STRONG
    )
    assert folder.artifact_store == "files" and folder.store_dir == Path("database")
    assert folder.lock_dir == folder.store_dir
    pg = _settings(tmp_path, database_url="postgresql+psycopg://u@h/db", artifact_store="database")
    assert pg.lock_dir is None  # advisory locks: no folder at all
    with pytest.raises(ValidationError, match="artifact_store"):
        _settings(tmp_path, artifact_store="s3")
