"""The progress display of the site commands: steps drawn on standard error, or nothing."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

import pubsubml.cli.progress as progress
from pubsubml.cli.progress import steps


@pytest.fixture
def screen(monkeypatch: pytest.MonkeyPatch) -> io.StringIO:
    """What the display draws, recorded by a plain (non-terminal) console."""
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=False, width=100)
    monkeypatch.setattr(progress, "err_console", console)
    return buffer


def test_a_disabled_display_draws_nothing(screen: io.StringIO) -> None:
    with steps(enabled=False) as run:
        with run.step("loading the models", total=2) as step:
            step.advance(2)
        with run.step("fitting"):
            pass
    assert screen.getvalue() == ""


def test_every_step_is_drawn_in_order(screen: io.StringIO) -> None:
    with steps() as run:
        with run.step("loading the models", total=3) as step:
            for _ in range(3):
                step.advance()
        with run.step("fitting the fusion"):
            pass
    drawn = screen.getvalue()
    assert "loading the models" in drawn and "fitting the fusion" in drawn
    assert drawn.index("loading the models") < drawn.index("fitting the fusion")


def test_an_error_inside_a_step_propagates_and_its_line_stays(screen: io.StringIO) -> None:
    with pytest.raises(RuntimeError, match="no rows"):
        with steps() as run:
            with run.step("reading"):
                pass
            with run.step("fitting"):
                raise RuntimeError("no rows")
    drawn = screen.getvalue()
    assert "reading" in drawn and "fitting" in drawn


def test_the_display_goes_to_stderr_not_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    with steps() as run:
        with run.step("verifying 2 model(s)", total=2) as step:
            step.advance(2)
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "verifying 2 model(s)" in captured.err
