"""What the registry commands share: one-line errors with exit statuses, settings, the client."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer

from pubsubml.cli.registry.options import _client, _errors, _settings
from pubsubml.errors import NotFoundError


def test_pubsubml_errors_become_exit_1_and_others_propagate(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(typer.Exit) as exited, _errors():
        raise NotFoundError("no model 'x'")
    assert exited.value.exit_code == 1
    assert "error: no model 'x'" in capsys.readouterr().err
    with pytest.raises(KeyError), _errors():
        raise KeyError("a bug stays a traceback")


def test_settings_default_to_sqlite_in_the_data_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PUBSUBML_ADMIN_TOKEN", "settings-admin-token-" + "y" * 20)
    settings = _settings(None, tmp_path / "data")
    assert settings.is_sqlite and str(tmp_path / "data") in settings.database_url


def test_weak_admin_token_is_refused_with_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PUBSUBML_ADMIN_TOKEN", "changeme")
    with pytest.raises(typer.Exit) as exited:
        _settings(None, tmp_path)
    assert exited.value.exit_code == 2 and "error" in capsys.readouterr().err


def test_a_client_needs_a_token(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(typer.Exit) as exited:
        _client("http://127.0.0.1:9", "")
    assert exited.value.exit_code == 2 and "no token" in capsys.readouterr().err
