"""Tests of pubsubml.registry.ui.session: the sealed token, CSRF tokens, cookie options and the
dashboard's settings."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr, ValidationError

from pubsubml.registry.settings import RegistrySettings
from pubsubml.registry.ui.session import (
    CSRFError,
    TokenSealer,
    check_csrf,
    csrf_token,
    end_session,
    pop_notice,
    session_options,
    start_session,
)

SECRET = "s" * 32


def _settings(tmp_path: Path, **changes: Any) -> RegistrySettings:
    values: dict[str, Any] = {
        "database_url": "sqlite:///r.db",
        "store_dir": tmp_path,
        "admin_token": "a" * 24,
        **changes,
    }
    return RegistrySettings(**values)


# ---- the sealed token ---------------------------------------------------------------------
def test_a_sealed_token_opens_with_the_same_secret_only() -> None:
    sealed = TokenSealer(SECRET).seal("psm_token")

    assert "psm_token" not in sealed
    assert TokenSealer(SECRET).unseal(sealed, max_age=60) == "psm_token"
    assert TokenSealer("t" * 32).unseal(sealed, max_age=60) is None


def test_an_altered_sealed_token_is_refused() -> None:
    sealer = TokenSealer(SECRET)
    sealed = sealer.seal("psm_token")
    flipped = sealed[:20] + ("A" if sealed[20] != "A" else "B") + sealed[21:]

    assert sealer.unseal(flipped, max_age=60) is None
    assert sealer.unseal("ünicode", max_age=60) is None


def test_a_sealed_token_expires_after_max_age() -> None:
    sealer = TokenSealer(SECRET)
    sealed = sealer.seal("psm_token")
    now = int(time.time())

    assert sealer.unseal(sealed, max_age=60, now=now + 30) == "psm_token"
    assert sealer.unseal(sealed, max_age=60, now=now + 120) is None


# ---- CSRF and the session's content -------------------------------------------------------
def test_csrf_token_is_created_once_per_session_and_checked() -> None:
    session: dict[str, Any] = {}
    token = csrf_token(session)

    check_csrf(session, token)
    assert csrf_token(session) == token and len(token) >= 32
    assert csrf_token({}) != token


@pytest.mark.parametrize("submitted", [None, "", "wrong", "x" * 43])
def test_a_missing_or_wrong_csrf_token_is_refused(submitted: str | None) -> None:
    session: dict[str, Any] = {}
    csrf_token(session)

    with pytest.raises(CSRFError, match="CSRF"):
        check_csrf(session, submitted)


def test_a_session_without_csrf_token_refuses_every_form() -> None:
    with pytest.raises(CSRFError, match="missing"):
        check_csrf({}, "anything")


def test_start_session_replaces_the_old_session() -> None:
    sealer = TokenSealer(SECRET)
    session: dict[str, Any] = {"csrf": "old", "other": 1}

    start_session(session, sealer, "psm_token")

    assert set(session) == {"token", "csrf"}
    assert session["csrf"] != "old"
    assert sealer.unseal(session["token"], max_age=60) == "psm_token"


def test_end_session_leaves_only_a_notice_shown_once() -> None:
    session: dict[str, Any] = {"token": "x", "csrf": "y"}

    end_session(session, "bye")

    assert session == {"notice": "bye"}
    assert pop_notice(session) == "bye"
    assert pop_notice(session) is None and session == {}


# ---- cookie options and settings ----------------------------------------------------------
def test_session_options_make_a_strict_httponly_cookie(tmp_path: Path) -> None:
    settings = _settings(tmp_path, ui_session_secret=SECRET)

    options = session_options(settings)

    assert options["secret_key"] == SECRET
    assert options["same_site"] == "strict"
    assert options["https_only"] is False
    assert options["max_age"] == settings.ui_session_max_age == 8 * 3600
    assert session_options(_settings(tmp_path, ui_cookie_secure=True))["https_only"] is True


def test_the_session_secret_is_random_when_not_set(tmp_path: Path) -> None:
    first, second = _settings(tmp_path), _settings(tmp_path)
    empty = _settings(tmp_path, ui_session_secret="")

    secrets = {s.ui_session_secret.get_secret_value() for s in (first, second, empty)}
    assert len(secrets) == 3
    assert all(len(s) >= 32 for s in secrets)


def test_a_short_session_secret_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="at least 32 characters"):
        _settings(tmp_path, ui_session_secret="short-secret")
    with pytest.raises(ValidationError, match="at least 32 characters"):
        _settings(tmp_path, ui_session_secret=SecretStr("k" * 31))


def test_the_session_secret_does_not_leak_into_representations(tmp_path: Path) -> None:
    secret = "dashboard-secret-" + "q" * 20
    settings = _settings(tmp_path, ui_session_secret=secret)

    assert secret not in repr(settings) and secret not in settings.model_dump_json()


def test_dashboard_settings_from_the_environment() -> None:
    env = {
        "PUBSUBML_ADMIN_TOKEN": "a" * 24,
        "PUBSUBML_UI_SESSION_SECRET": SECRET,
        "PUBSUBML_UI_COOKIE_SECURE": "true",
        "PUBSUBML_UI_SESSION_MAX_AGE": "600",
    }

    settings = RegistrySettings.from_env(env)
    default = RegistrySettings.from_env({"PUBSUBML_ADMIN_TOKEN": "a" * 24})

    assert settings.ui_session_secret.get_secret_value() == SECRET
    assert settings.ui_cookie_secure is True and settings.ui_session_max_age == 600
    assert default.ui_cookie_secure is False
    assert default.ui_session_secret.get_secret_value() != SECRET
