"""``pubsubml bench NAME``: one command per experiment of the catalog, the same options everywhere.

:func:`register_experiments` adds a command for every
:class:`~pubsubml.experiments.base.Experiment` of :data:`pubsubml.experiments.catalog.EXPERIMENTS`.
Every command takes ``--seeds --folds --jobs --smoke --out-dir`` and the experiment's own
:class:`~pubsubml.experiments.base.Param` options, exits with code 2 and one line on bad options
(before anything runs or is written), and runs its small networks with one torch thread.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, Optional, TypeVar

import typer

if TYPE_CHECKING:
    from pubsubml.experiments.base import Experiment

__all__ = [
    "DEFAULT_OUT_DIR",
    "OutDirOption",
    "SmokeOption",
    "experiment_command",
    "fail",
    "register_commands",
    "register_experiments",
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
            from pubsubml.experiments.reports import check_out_dir

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


_COMMON = ("seeds", "folds", "jobs", "smoke", "out_dir")


def _option(name: str, annotation: Any, default: Any, *flags: str, help: str) -> inspect.Parameter:
    return inspect.Parameter(
        name,
        inspect.Parameter.KEYWORD_ONLY,
        default=typer.Option(default, *flags, help=help),
        annotation=annotation,
    )


def experiment_command(exp: Experiment) -> Callable[..., None]:
    """The ``pubsubml bench NAME`` command of ``exp``: common options, then the experiment's own.

    Examples
    --------
    >>> from pubsubml.experiments.catalog import EXPERIMENTS
    >>> import inspect
    >>> list(inspect.signature(experiment_command(EXPERIMENTS["pubsub-scenarios"])).parameters)
    ['seeds', 'folds', 'jobs', 'smoke', 'out_dir', 'turns', 'fl_dp']
    """
    fold_flags = ["--folds", *(f"--{a}" for a in exp.fold_aliases)]
    fold_default = f"default {exp.folds}" + (
        "" if exp.smoke_folds is None else f"; {exp.smoke_folds} with --smoke"
    )
    params = [
        _option(
            "seeds",
            Optional[int],  # noqa: UP045 (typer reads the annotation at run time)
            None,
            "--seeds",
            help=f"Seeds 0 … N-1 (default {exp.seeds}"
            + ("" if exp.smoke_seeds is None else f"; {exp.smoke_seeds} with --smoke")
            + ").",
        ),
        _option(
            "folds",
            Optional[int],  # noqa: UP045 (typer reads the annotation at run time)
            None,
            *fold_flags,
            help=f"{exp.folds_help} ({fold_default})",
        ),
        _option("jobs", int, 1, "--jobs", help="Worker processes (results do not depend on it)."),
        _option(
            "smoke",
            bool,
            False,
            "--smoke/--no-smoke",
            help="Tiny configuration that runs in seconds (CI); its numbers mean nothing.",
        ),
        _option("out_dir", Path, DEFAULT_OUT_DIR, "--out-dir", help="Folder for the outputs."),
    ]
    for p in exp.params:
        if p.name in _COMMON:
            raise ValueError(f"{exp.name}: option {p.name!r} clashes with a common option")
        flags = (f"--{p.flag}/--no-{p.flag}",) if p.type is bool else (f"--{p.flag}",)
        kind: Any = Optional[p.type] if p.default is None else p.type  # noqa: UP045 (typer)
        params.append(_option(p.name, kind, p.default, *flags, help=p.help))

    def command(**values: Any) -> None:
        out_dir = Path(values.pop("out_dir"))
        try:
            opts = exp.options(**values)
        except ValueError as exc:
            fail(f"{exp.name}: {exc}")
        written = run_experiment_command(exp.name, lambda: exp.run(out_dir, opts), out_dir)
        typer.echo(f"{exp.name}: wrote {', '.join(str(p) for p in written)}")

    command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    command.__annotations__ = {p.name: p.annotation for p in params}
    command.__doc__ = exp.summary
    command.__name__ = exp.name.replace("-", "_")
    return command


def register_experiments(bench_app: typer.Typer, experiments: Iterable[Experiment]) -> None:
    """Add :func:`experiment_command` of every experiment to ``bench_app`` under its name."""
    for exp in experiments:
        bench_app.command(exp.name)(experiment_command(exp))
