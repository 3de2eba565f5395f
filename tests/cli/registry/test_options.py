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


def test_an_unreachable_registry_is_one_line_with_how_to_start_or_wait_for_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from pubsubml.cli.registry.options import DEFAULT_URL
    from pubsubml.errors import RegistryUnreachableError

    refused = RegistryUnreachableError(
        f"cannot reach the registry at {DEFAULT_URL} (connection refused)", url=DEFAULT_URL
    )
    with pytest.raises(typer.Exit) as exited, _errors():
        raise refused
    assert exited.value.exit_code == 1
    assert capsys.readouterr().err == (
        f"error: cannot reach the registry at {DEFAULT_URL} (connection refused); start it with "
        '"pubsubml registry serve" or wait for it with "pubsubml registry wait"\n'
    )
    lost = RegistryUnreachableError("the registry at X did not answer", url="http://h:1", sent=True)
    with pytest.raises(typer.Exit), _errors():
        raise lost
    assert capsys.readouterr().err == "error: the registry at X did not answer\n"  # no hint


def test_error_lines_escape_markup_and_join_lines(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(typer.Exit), _errors():
        raise NotFoundError("HTTP 404: [bold]no[/bold]\n  model")
    assert capsys.readouterr().err == "error: HTTP 404: [bold]no[/bold] model\n"


def test_consoles_keep_long_lines_whole_off_a_terminal_and_wrap_on_one() -> None:
    import io

    from pubsubml.cli.registry.options import CommandConsole

    line = "error: " + " ".join(["word"] * 40)  # 206 characters
    piped = CommandConsole(file=io.StringIO(), width=80)
    piped.print(line)
    terminal = CommandConsole(file=io.StringIO(), width=80, force_terminal=True)
    terminal.print(line)
    asked = CommandConsole(file=io.StringIO(), width=80, force_terminal=True, soft_wrap=True)
    asked.print(line)

    assert piped.file.getvalue() == line + "\n"  # type: ignore[attr-defined]
    assert len(terminal.file.getvalue().splitlines()) == 3  # type: ignore[attr-defined]
    assert asked.soft_wrap and asked.file.getvalue() == line + "\n"  # type: ignore[attr-defined]


def test_tables_still_fit_the_width_off_a_terminal() -> None:
    import io

    from rich.table import Table

    from pubsubml.cli.registry.options import CommandConsole

    piped = CommandConsole(file=io.StringIO(), width=60)
    table = Table("name", "features")
    table.add_row("m" * 10, ", ".join(f"feature_{i}" for i in range(12)))
    piped.print(table)

    lines = piped.file.getvalue().splitlines()  # type: ignore[attr-defined]
    assert lines and max(len(x) for x in lines) <= 60 and len(lines) > 5
