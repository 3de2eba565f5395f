"""Command line of FL with private domain experts: the ``domain-experts-*`` benchmarks.

Mounted in the main CLI with :func:`register` as ``pubsubml bench domain-experts-*``; each writes
``<out-dir>/domain-experts-*.{csv,md,png}``.

References
----------
fl-domain-experts.txt §4.1 (synthetic regression), §4.2 (many-domain classification), §4.3
(100 users on MNIST, here mnist1d), §4.4.4 and §7 (incentives and stability).
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

BENCHMARKS = (
    "domain-experts-classification",
    "domain-experts-incentives",
    "domain-experts-mnist1d",
    "domain-experts-regression",
)


def bench(name: str, *, smoke: bool = False, out_dir: Path, seed: int = 0) -> None:
    """Run one ``domain-experts-*`` experiment and write its outputs to ``out_dir``.

    Raises
    ------
    typer.Exit
        With code 2 on an unknown benchmark name.
    """
    from pubsubml.experiments.domain_experts.experiments import (
        EXPERIMENTS,
        DomainExpertsExperimentConfig,
    )
    from pubsubml.experiments.domain_experts.incentives import run_incentives
    from pubsubml.experiments.domain_experts.mnist1d import run_mnist1d

    experiments = {
        **EXPERIMENTS,
        "domain-experts-incentives": run_incentives,
        "domain-experts-mnist1d": run_mnist1d,
    }
    if name not in experiments:
        fail(f"unknown benchmark {name!r}; choose one of {BENCHMARKS}")
    out_dir.mkdir(parents=True, exist_ok=True)
    config = DomainExpertsExperimentConfig("smoke" if smoke else "full", seed=seed)
    run_experiment_command(name, lambda: experiments[name](config, out_dir), out_dir)
    typer.echo(f"{name}: wrote its CSV, MD and PNG outputs to {out_dir}")


def _bench_command(name: str) -> Callable[..., None]:
    def command(
        smoke: SmokeOption = False,
        out_dir: OutDirOption = DEFAULT_OUT_DIR,
        seed: Annotated[int, typer.Option(help="Seed of data and runs.")] = 0,
    ) -> None:
        bench(name, smoke=smoke, out_dir=out_dir, seed=seed)

    command.__doc__ = f"Run the {name} experiment (writes docs/results/{name}*)."
    return command


def register(bench_app: typer.Typer) -> None:
    """Add every ``domain-experts-*`` benchmark to the ``bench`` group.

    Examples
    --------
    >>> group = typer.Typer()
    >>> register(group)
    >>> sorted(c.name for c in group.registered_commands)
    ['domain-experts-classification', 'domain-experts-incentives', 'domain-experts-mnist1d', 'domain-experts-regression']
    """
    register_commands(bench_app, BENCHMARKS, _bench_command)
