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
        typer.echo(f"error: unknown benchmark {name!r}; choose one of {BENCHMARKS}", err=True)
        raise typer.Exit(code=2)
    if seeds < 1 or jobs < 1 or (folds is not None and folds < 1):
        typer.echo("error: --seeds, --jobs and --folds must be >= 1", err=True)
        raise typer.Exit(code=2)
    import logging

    import torch

    from pubsubml.sim.pubsub_scale_experiments import EXPERIMENTS

    logging.getLogger("absl").setLevel(logging.ERROR)
    # The networks are small: one intra-op thread beats thread hand-offs on a few shared cores.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        written = EXPERIMENTS[name](
            seeds=seeds, jobs=jobs, smoke=smoke, out_dir=out_dir, folds=folds
        )
    except ValueError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=2) from exc
    finally:
        torch.set_num_threads(threads)
    typer.echo(f"{name}: wrote {', '.join(p.name for p in written)} to {out_dir}")


def _bench_command(name: str) -> Callable[..., None]:
    def command(
        seeds: Annotated[int, typer.Option(help="Number of seeds (0 … n-1).")] = 1,
        jobs: Annotated[int, typer.Option(help="Worker processes (the machine is shared).")] = 1,
        smoke: Annotated[
            bool, typer.Option(help="Tiny configuration that runs in seconds (CI).")
        ] = False,
        out_dir: Annotated[Path, typer.Option(help="Folder for the outputs.")] = Path(
            "docs/results"
        ),
        folds: Annotated[
            int | None,
            typer.Option(help="Run only the first N folds of the 5-fold split (default: all)."),
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
    for name in BENCHMARKS:
        bench_app.command(name)(_bench_command(name))
