"""Command line of the Hyperplane experiments of PubSub-ML: the ``pubsub-*`` scale benchmarks.

Mounted in the main CLI with :func:`register` as ``pubsubml bench pubsub-selection``,
``pubsub-publishers``, ``pubsub-noisy`` and ``pubsub-streams``; each writes
``<out-dir>/NAME.{csv,md,png}``.

References
----------
pubsub-ml.txt §8.2.3 (model selection and runtime, Fig. 4, Table 6), §8.2.4 and appendix B
(number of publishers, Fig. 8), §8.2.5 and appendix C (noisy sites, Fig. 9), §6 and §8.3.3
(data streams, Fig. 6).
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

BENCHMARKS = ("pubsub-noisy", "pubsub-publishers", "pubsub-selection", "pubsub-streams")


def bench(
    name: str,
    *,
    seeds: int = 1,
    jobs: int = 1,
    smoke: bool = False,
    out_dir: Path,
    folds: int | None = None,
) -> None:
    """Run one ``pubsub-*`` experiment and write its outputs to ``out_dir``.

    Raises
    ------
    typer.Exit
        With code 2 on an unknown benchmark name or bad ``seeds`` / ``jobs`` / ``folds``.
    """
    if name not in BENCHMARKS:
        fail(f"unknown benchmark {name!r}; choose one of {BENCHMARKS}")
    if seeds < 1 or jobs < 1 or (folds is not None and folds < 1):
        fail("--seeds, --jobs and --folds must be >= 1")
    if name == "pubsub-streams" and folds is not None:
        fail("--folds does not apply to pubsub-streams: a stream is scored chunk by chunk")
    from pubsubml.experiments.pubsub.scale import EXPERIMENTS

    written = run_experiment_command(
        name,
        lambda: EXPERIMENTS[name](
            seeds=seeds, jobs=jobs, smoke=smoke, out_dir=out_dir, folds=folds
        ),
        out_dir,
    )
    typer.echo(f"{name}: wrote {', '.join(p.name for p in written)} to {out_dir}")


def _bench_command(name: str) -> Callable[..., None]:
    def command(
        seeds: Annotated[int, typer.Option(help="Number of seeds (0 … n-1).")] = 1,
        jobs: Annotated[int, typer.Option(help="Worker processes (the machine is shared).")] = 1,
        smoke: SmokeOption = False,
        out_dir: OutDirOption = DEFAULT_OUT_DIR,
        folds: Annotated[
            int | None,
            typer.Option(
                help="Run only the first N folds of the 5-fold split (default: all; "
                "not for pubsub-streams, scored chunk by chunk)."
            ),
        ] = None,
    ) -> None:
        bench(name, seeds=seeds, jobs=jobs, smoke=smoke, out_dir=out_dir, folds=folds)

    command.__doc__ = f"Run the {name} experiment (writes docs/results/{name}.*)."
    return command


def register(bench_app: typer.Typer) -> None:
    """Add every ``pubsub-*`` scale benchmark to the ``bench`` group.

    Examples
    --------
    >>> group = typer.Typer()
    >>> register(group)
    >>> sorted(c.name for c in group.registered_commands)
    ['pubsub-noisy', 'pubsub-publishers', 'pubsub-selection', 'pubsub-streams']
    """
    register_commands(bench_app, BENCHMARKS, _bench_command)
