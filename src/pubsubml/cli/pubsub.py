"""Command line of the PubSub-ML evaluation: the ``pubsub-*`` benchmarks on tabular stand-ins.

Mounted in the main CLI with :func:`register` as ``pubsubml bench pubsub-*``; each writes
``<out-dir>/pubsub-*.{csv,md,png}`` (see :mod:`pubsubml.experiments.pubsub.tabular`).
``pubsub-small`` scores a small subscriber on an external test set, so it takes ``--repeats``
instead of ``--folds`` and has no ``--turns``.

References
----------
pubsub-ml.txt §8.1 (Fig. 3), §8.2.1–8.2.2 (Table 5, Fig. 7), §8.3.2 (Fig. 10), §8.3.4 (Fig. 11);
§1 and §8.1.1 (a small subscriber: ``pubsub-small``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Literal

import typer

from pubsubml.cli.bench import (
    DEFAULT_OUT_DIR,
    OutDirOption,
    SmokeOption,
    fail,
    register_commands,
    run_experiment_command,
)

__all__ = ["BENCHMARKS", "CEILING_BENCHMARK", "SMALL_BENCHMARK", "register"]

BENCHMARKS = (
    "pubsub-models",
    "pubsub-nonprivate",
    "pubsub-privacy",
    "pubsub-regression",
    "pubsub-scenarios",
)
SMALL_BENCHMARK = "pubsub-small"
CEILING_BENCHMARK = "pubsub-small-ceiling"
_FL_DP_HELP = (
    "Where the FL baselines add noise: 'local' (DP-SGD at every client, the paper) or 'central' "
    "(at the server, per client)."
)


def _run(
    name: str,
    *,
    out_dir: Path,
    seeds: int,
    folds: int,
    jobs: int,
    smoke: bool,
    turns: int | None,
    fl_dp: str = "local",
) -> None:
    from pubsubml.experiments.pubsub.tabular import RunOptions, run_experiment

    if seeds < 1 or folds < 2 or jobs < 1 or (turns is not None and not 1 <= turns <= 10):
        fail("need --seeds >= 1, --folds >= 2, --jobs >= 1, 1 <= --turns <= 10")
    if fl_dp not in ("local", "central"):
        fail(f"--fl-dp must be 'local' or 'central', got {fl_dp!r}")
    if turns is not None and name in ("pubsub-privacy", "pubsub-models"):
        fail(f"--turns does not apply to {name}: it runs Scenario S2 only (one subscriber)")
    if turns is not None and smoke:
        fail("--turns does not apply with --smoke (one subscriber turn)")
    if fl_dp == "central" and name in ("pubsub-models", "pubsub-nonprivate"):
        fail(f"--fl-dp does not apply to {name}: it runs no DP FL baseline")
    mode: Literal["local", "central"] = "central" if fl_dp == "central" else "local"
    opts = RunOptions(seeds=seeds, folds=folds, jobs=jobs, smoke=smoke, turns=turns, fl_dp=mode)
    written = run_experiment_command(name, lambda: run_experiment(name, out_dir, opts), out_dir)
    typer.echo(f"{name}: wrote {', '.join(str(p) for p in written)}")


def _command(name: str) -> Callable[..., None]:
    def command(
        seeds: Annotated[int, typer.Option(help="Seeds (each a full cross-validation).")] = 1,
        folds: Annotated[int, typer.Option(help="Cross-validation folds (the paper: 5).")] = 5,
        jobs: Annotated[int, typer.Option(help="Worker processes for independent folds.")] = 1,
        turns: Annotated[
            int | None, typer.Option(help="Subscriber turns in the IID scenarios (default 10).")
        ] = None,
        fl_dp: Annotated[str, typer.Option(help=_FL_DP_HELP)] = "local",
        smoke: SmokeOption = False,
        out_dir: OutDirOption = DEFAULT_OUT_DIR,
    ) -> None:
        _run(
            name,
            out_dir=out_dir,
            seeds=seeds,
            folds=folds,
            jobs=jobs,
            smoke=smoke,
            turns=turns,
            fl_dp=fl_dp,
        )

    command.__doc__ = f"Run the {name} experiment (writes docs/results/{name}.*)."
    return command


def _run_small(
    *, out_dir: Path, seeds: int, repeats: int, jobs: int, smoke: bool, fl_dp: str
) -> None:
    from pubsubml.experiments.pubsub.tabular import RunOptions, run_experiment

    if seeds < 1 or repeats < 1 or jobs < 1:
        fail("need --seeds >= 1, --repeats >= 1, --jobs >= 1")
    if fl_dp not in ("local", "central"):
        fail(f"--fl-dp must be 'local' or 'central', got {fl_dp!r}")
    mode: Literal["local", "central"] = "central" if fl_dp == "central" else "local"
    opts = RunOptions(seeds=seeds, jobs=jobs, smoke=smoke, fl_dp=mode, repeats=repeats)
    name = SMALL_BENCHMARK
    written = run_experiment_command(name, lambda: run_experiment(name, out_dir, opts), out_dir)
    typer.echo(f"{name}: wrote {', '.join(str(p) for p in written)}")


def _small_command(
    seeds: Annotated[int, typer.Option(help="Seeds; each draws new sites and test set.")] = 5,
    repeats: Annotated[int, typer.Option(help="Model seeds per data seed.")] = 1,
    jobs: Annotated[int, typer.Option(help="Worker processes for independent tasks.")] = 1,
    fl_dp: Annotated[str, typer.Option(help=_FL_DP_HELP)] = "local",
    smoke: SmokeOption = False,
    out_dir: OutDirOption = DEFAULT_OUT_DIR,
) -> None:
    """Run the pubsub-small experiment: a small subscriber on an external test set
    (writes docs/results/pubsub-small.*)."""
    _run_small(out_dir=out_dir, seeds=seeds, repeats=repeats, jobs=jobs, smoke=smoke, fl_dp=fl_dp)


def _ceiling_command(
    seeds: Annotated[int, typer.Option(help="Seeds; the sites of pubsub-small's seeds.")] = 5,
    jobs: Annotated[int, typer.Option(help="Worker processes for independent tasks.")] = 1,
    smoke: SmokeOption = False,
    out_dir: OutDirOption = DEFAULT_OUT_DIR,
) -> None:
    """Run the pubsub-small-ceiling experiment: PubSub-ML against what its DP publishers carry
    (writes docs/results/pubsub-small-ceiling.*)."""
    from pubsubml.experiments.pubsub.tabular import RunOptions, run_experiment

    if seeds < 1 or jobs < 1:
        fail("need --seeds >= 1, --jobs >= 1")
    opts = RunOptions(seeds=seeds, jobs=jobs, smoke=smoke)
    name = CEILING_BENCHMARK
    written = run_experiment_command(name, lambda: run_experiment(name, out_dir, opts), out_dir)
    typer.echo(f"{name}: wrote {', '.join(str(p) for p in written)}")


def register(bench_app: typer.Typer) -> None:
    """Add every ``pubsub-*`` benchmark of this module to the ``bench`` group.

    Examples
    --------
    >>> group = typer.Typer()
    >>> register(group)
    >>> sorted(c.name for c in group.registered_commands)[:2]
    ['pubsub-models', 'pubsub-nonprivate']
    """
    register_commands(bench_app, BENCHMARKS, _command)
    bench_app.command(SMALL_BENCHMARK)(_small_command)
    bench_app.command(CEILING_BENCHMARK)(_ceiling_command)
