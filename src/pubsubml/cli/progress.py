"""Progress bars for the site commands (``train``, ``customize``, ``predict``, ``evaluate``).

Every step of a command runs under one line of a rich progress display on standard error: a
bar that fills for steps with a known size (models loaded) and a pulsing bar for the others
(fitting), with the elapsed time.  Standard output stays free for results (predictions, JSON).
A step that fails leaves its line as it stood, and the error follows it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from rich.progress import (
    BarColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from pubsubml.cli.registry.options import err_console

__all__ = ["Steps", "steps"]


class Steps:
    """The steps of one command, each a line of the display (see :func:`steps`)."""

    def __init__(self, progress: Progress) -> None:
        self._progress = progress

    @contextmanager
    def step(self, description: str, total: int | None = None) -> Iterator[Step]:
        """Run a step: its line pulses (``total=None``) or fills as :meth:`Step.advance` is
        called, and shows as complete when the block ends without an error."""
        task = self._progress.add_task(description, total=total)
        yield Step(self._progress, task)
        self._progress.update(task, total=total or 1, completed=total or 1)


class Step:
    """One running step: :meth:`advance` moves its bar."""

    def __init__(self, progress: Progress, task: TaskID) -> None:
        self._progress = progress
        self._task = task

    def advance(self, amount: int = 1) -> None:
        """Count ``amount`` units of the step as done."""
        self._progress.advance(self._task, amount)


@contextmanager
def steps(*, enabled: bool = True) -> Iterator[Steps]:
    """A progress display for a command's steps on standard error.

    Parameters
    ----------
    enabled : bool, default=True
        ``False`` runs the steps without drawing anything (``--quiet``).

    Examples
    --------
    >>> with steps(enabled=False) as run:
    ...     with run.step("loading", total=2) as step:
    ...         step.advance(2)
    """
    progress = Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        TimeElapsedColumn(),
        console=err_console,
        disable=not enabled,
    )
    with progress:
        yield Steps(progress)
