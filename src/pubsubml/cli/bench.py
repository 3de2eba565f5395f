"""What every ``pubsubml bench`` experiment command shares: options, errors, threads, registration.

The command modules of :mod:`pubsubml.cli` (``pubsub``, ``pubsub_scale``, ``stacking``,
``domain_experts``, ``proxyfl``, ``async_dp``) build their commands from these pieces, so that every experiment takes ``--smoke`` and
``--out-dir`` the same way, exits with code 2 and one line on bad options, and runs its small
networks with one torch thread.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, NoReturn, TypeVar

import typer

__all__ = [
    "DEFAULT_OUT_DIR",
    "OutDirOption",
    "SmokeOption",
    "fail",
    "register_commands",
    "run_experiment_command",
]

T = TypeVar("T")

DEFAULT_OUT_DIR = Path("docs/results")
SmokeOption = Annotated[bool, typer.Option(help="Tiny configuration that runs in seconds (CI).")]
OutDirOption = Annotated[Path, typer.Option(help="Folder for the outputs.")]


def fail(message: str) -> NoReturn:
    """Print ``error: message`` to stderr and exit with code 2 (bad usage); nothing is written."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code=2)


@contextmanager
def _one_torch_thread() -> Iterator[None]:
    import torch

    # The networks are small: one intra-op thread beats thread hand-offs on a few shared cores.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def run_experiment_command(name: str, run: Callable[[], T], out_dir: Path | None = None) -> T:
    """Run ``run()`` with one torch thread; a ``ValueError`` (bad option) exits with code 2.

    Parameters
    ----------
    name : str
        The benchmark, for messages.
    run : callable
        Runs the experiment and writes its files.
    out_dir : Path, optional
        Checked before ``run`` starts (see :func:`~pubsubml.experiments.runner.check_out_dir`), so a bad
        folder fails at once, not after the run.

    Returns
    -------
    object
        What ``run`` returned.
    """
    import logging

    logging.getLogger("absl").setLevel(logging.ERROR)
    try:
        if out_dir is not None:
            from pubsubml.experiments.runner import check_out_dir

            check_out_dir(out_dir)
        with _one_torch_thread():
            return run()
    except ValueError as exc:
        fail(f"{name}: {exc}")


def register_commands(
    bench_app: typer.Typer, names: Iterable[str], command: Callable[[str], Callable[..., None]]
) -> None:
    """Add ``command(name)`` to ``bench_app`` under each of ``names``.

    Examples
    --------
    >>> app = typer.Typer()
    >>> register_commands(app, ["a", "b"], lambda name: lambda: None)
    >>> [c.name for c in app.registered_commands]
    ['a', 'b']
    """
    for name in names:
        bench_app.command(name)(command(name))
