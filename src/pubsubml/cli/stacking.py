"""Command line of personalization by stacking: the ``stacking-*`` benchmarks.

Mounted in the main CLI with :func:`register` as ``pubsubml bench stacking-*``; each writes
``<out-dir>/stacking-<name>.{csv,md,png}`` and ``<out-dir>/stacking-<name>-graph.{csv,md,png}``
(the contribution graph and centrality ranking).

References
----------
pfl-stacking.txt §4.1 (quantity skew), §4.2 (label skew), §4.3 and Appendix A (vertical
partitioning), §4.4 (natural partitioning).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from pubsubml.cli.bench import (
    DEFAULT_OUT_DIR,
    OutDirOption,
    SmokeOption,
    fail,
    register_commands,
    run_experiment_command,
)

__all__ = ["BENCHMARKS", "bench", "register"]

BENCHMARKS = ("stacking-label", "stacking-natural", "stacking-quantity", "stacking-vertical")


def bench(
    name: str,
    *,
    seeds: int = 10,
    repeats: int = 5,
    jobs: int = 1,
    smoke: bool = False,
    out_dir: Path,
    dataset: str = "hi",
    max_rows: int = 3000,
    trees: int = 100,
    dp: bool = True,
) -> None:
    """Run one ``stacking-*`` experiment and write its outputs to ``out_dir``.

    With ``smoke`` the grid, data and forests are tiny (seconds); ``seeds``/``repeats`` still apply
    if given explicitly lower.

    Raises
    ------
    typer.Exit
        With code 2 on an unknown benchmark name or bad options.
    """
    from pubsubml.experiments.stacking.experiments import NATURAL_COLUMNS, STAND_INS, StackingConfig
    from pubsubml.experiments.stacking.reporting import EXPERIMENTS

    if name not in EXPERIMENTS:
        fail(f"unknown benchmark {name!r}; choose one of {BENCHMARKS}")
    if seeds < 1 or repeats < 1 or jobs < 1 or max_rows < 1 or trees < 1:
        fail("--seeds, --repeats, --jobs, --max-rows and --trees must be >= 1")
    if dataset not in STAND_INS:
        fail(f"unknown --dataset {dataset!r}; choose one of {list(STAND_INS)}")
    if name == "stacking-natural" and dataset not in NATURAL_COLUMNS:
        fail(f"{dataset!r} has no natural partition column; use {list(NATURAL_COLUMNS)}")
    if smoke:
        cfg = StackingConfig.smoke_config(
            dataset=dataset, jobs=jobs, seeds=min(seeds, 1), repeats=min(repeats, 2), dp=dp
        )
    else:
        cfg = StackingConfig(
            dataset=dataset,
            seeds=seeds,
            repeats=repeats,
            jobs=jobs,
            max_rows=max_rows,
            trees=trees,
            dp=dp,
        )
    run_experiment_command(name, lambda: EXPERIMENTS[name](cfg, out_dir), out_dir)
    typer.echo(f"{name}: wrote its CSV, MD and PNG outputs to {out_dir}")


def _bench_command(name: str) -> Callable[..., None]:
    def command(
        seeds: Annotated[int, typer.Option(help="Random data assignments (paper: 10).")] = 10,
        repeats: Annotated[int, typer.Option(help="Splits per seed (paper: 5).")] = 5,
        jobs: Annotated[int, typer.Option(help="Worker processes.")] = 1,
        smoke: SmokeOption = False,
        out_dir: OutDirOption = DEFAULT_OUT_DIR,
        dataset: Annotated[
            str, typer.Option(help="hi (Census), shuttle (Cover Type), flchain (Vehicle Loan).")
        ] = "hi",
        max_rows: Annotated[int, typer.Option(help="Rows sampled per seed.")] = 3000,
        trees: Annotated[int, typer.Option(help="Trees of private and meta forests.")] = 100,
        dp: Annotated[bool, typer.Option(help="Also run DP public models (ε = 1, 4).")] = True,
    ) -> None:
        bench(
            name,
            seeds=seeds,
            repeats=repeats,
            jobs=jobs,
            smoke=smoke,
            out_dir=out_dir,
            dataset=dataset,
            max_rows=max_rows,
            trees=trees,
            dp=dp,
        )

    command.__doc__ = f"Run the {name} experiment (writes docs/results/{name}*)."
    return command


def register(bench_app: typer.Typer) -> None:
    """Add every ``stacking-*`` benchmark to the ``bench`` group.

    Examples
    --------
    >>> group = typer.Typer()
    >>> register(group)
    >>> sorted(c.name for c in group.registered_commands)
    ['stacking-label', 'stacking-natural', 'stacking-quantity', 'stacking-vertical']
    """
    register_commands(bench_app, BENCHMARKS, _bench_command)
