"""``pubsubml bench NAME``: one command per experiment of the catalog, the same options everywhere.

:func:`register_experiments` adds a command for every
:class:`~pubsubml.experiments.base.Experiment` of :data:`pubsubml.experiments.catalog.EXPERIMENTS`.
Every command takes ``--seeds --folds --jobs --executor --address --smoke --out-dir`` and the
experiment's own :class:`~pubsubml.experiments.base.Param` options, exits with code 2 and one line
on bad options (before anything runs or is written), and runs its small networks with one torch
thread.  ``--executor ray`` runs the tasks on Ray (:mod:`pubsubml.experiments.executors`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, Optional

import typer

from pubsubml.errors import ExecutorConnectionError

if TYPE_CHECKING:
    from pubsubml.experiments.base import Experiment

__all__ = ["DEFAULT_OUT_DIR", "experiment_command", "fail", "register_experiments"]

DEFAULT_OUT_DIR = Path("docs/results")


def fail(message: str) -> NoReturn:
    """Print ``error: message`` to stderr and exit with code 2 (bad usage); nothing is written."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code=2)


@contextmanager
def _one_torch_thread() -> Iterator[None]:
    import logging

    import torch

    logging.getLogger("absl").setLevel(logging.ERROR)
    # The networks are small: one intra-op thread beats thread hand-offs on a few shared cores.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


_COMMON = ("seeds", "folds", "jobs", "executor", "address", "smoke", "out_dir")


def _option(
    name: str, annotation: Any, default: Any, *flags: str, help: str, metavar: str | None = None
) -> inspect.Parameter:
    return inspect.Parameter(
        name,
        inspect.Parameter.KEYWORD_ONLY,
        default=typer.Option(default, *flags, help=help, metavar=metavar),
        annotation=annotation,
    )


def _common_options(exp: Experiment) -> list[inspect.Parameter]:
    """The options every experiment has: seeds, folds, workers, executor, smoke, output folder."""
    fold_flags = ["--folds", *(f"--{a}" for a in exp.fold_aliases)]
    fold_default = f"default {exp.folds}" + (
        "" if exp.smoke_folds is None else f"; {exp.smoke_folds} with --smoke"
    )
    return [
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
            "executor",
            str,
            "process",
            "--executor",
            metavar="[process|ray]",
            help="Where the tasks run: a local process pool or Ray (results do not depend on it).",
        ),
        _option(
            "address",
            Optional[str],  # noqa: UP045 (typer reads the annotation at run time)
            None,
            "--address",
            help="Ray cluster to join ('auto', 'HOST:6379', 'ray://HOST:10001'); default: start "
            "Ray here. Only with --executor ray.",
        ),
        _option(
            "smoke",
            bool,
            False,
            "--smoke/--no-smoke",
            help="Tiny configuration that runs in seconds (CI); its numbers mean nothing.",
        ),
        _option("out_dir", Path, DEFAULT_OUT_DIR, "--out-dir", help="Folder for the outputs."),
    ]


def _experiment_options(exp: Experiment) -> list[inspect.Parameter]:
    """The experiment's own options (its :class:`~pubsubml.experiments.base.Param`)."""
    params: list[inspect.Parameter] = []
    for p in exp.params:
        if p.name in _COMMON:
            raise ValueError(f"{exp.name}: option {p.name!r} clashes with a common option")
        flags = (f"--{p.flag}/--no-{p.flag}",) if p.type is bool else (f"--{p.flag}",)
        kind: Any = Optional[p.type] if p.default is None else p.type  # noqa: UP045 (typer)
        params.append(_option(p.name, kind, p.default, *flags, help=p.help))
    return params


def experiment_command(exp: Experiment) -> Callable[..., None]:
    """The ``pubsubml bench NAME`` command of ``exp``: common options, then the experiment's own.

    Examples
    --------
    >>> from pubsubml.experiments.catalog import EXPERIMENTS
    >>> import inspect
    >>> list(inspect.signature(experiment_command(EXPERIMENTS["pubsub-scenarios"])).parameters)
    ['seeds', 'folds', 'jobs', 'executor', 'address', 'smoke', 'out_dir', 'turns', 'fl_dp']
    """
    params = [*_common_options(exp), *_experiment_options(exp)]

    def command(**values: Any) -> None:
        from pubsubml.experiments.reports import check_out_dir

        out_dir = Path(values.pop("out_dir"))
        try:  # every bad option is refused here, before anything runs or is written
            opts = exp.options(**values)
            check_out_dir(out_dir)
        except (ValueError, ImportError) as exc:
            fail(f"{exp.name}: {exc}")
        with _one_torch_thread():
            try:
                written = exp.run(out_dir, opts)
            except ExecutorConnectionError as exc:  # raised before any task ran
                fail(f"{exp.name}: {exc}")
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
