"""Command line of the asynchronous DP learner: ``forecast`` and the ``async-dp-*`` benchmarks.

Standalone: ``python -m pubsubml.cli.async_dp forecast --owners 10 --records 10000
--epsilon 1`` and ``python -m pubsubml.cli.async_dp bench async-dp-map``.  Mounted in the
main CLI with :func:`register` as ``pubsubml forecast ...`` and ``pubsubml bench async-dp-*``.

References
----------
async-dp-cost-of-privacy.txt §5–§6 (forecasting the value of collaboration in a data market).
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Annotated

import typer

__all__ = ["BENCHMARKS", "app", "bench", "default_model_path", "forecast", "main", "register"]

BENCHMARKS = (
    "async-dp-bands",
    "async-dp-calibrate",
    "async-dp-map",
    "async-dp-owners",
    "async-dp-scaling",
)

app = typer.Typer(
    name="async-dp",
    help="Asynchronous DP learning (Algorithm 1): forecasts and benchmarks.",
    no_args_is_help=True,
    add_completion=False,
)


def default_model_path() -> Path:
    """Where the shipped forecast model lives (``pubsubml/methods/async_dp/forecast.json``)."""
    from pubsubml.methods.async_dp.cost import DEFAULT_MODEL_RESOURCE

    return Path(str(resources.files("pubsubml.methods.async_dp").joinpath(DEFAULT_MODEL_RESOURCE)))


def forecast(
    owners: Annotated[
        int, typer.Option("--owners", min=1, help="Number N of collaborating data owners.")
    ],
    records: Annotated[
        int, typer.Option("--records", min=1, help="Records n_i held by each owner.")
    ],
    epsilon: Annotated[
        float, typer.Option("--epsilon", min=0.0, help="Privacy budget ε_i of each owner.")
    ],
    model: Annotated[
        Path | None,
        typer.Option(help="Fitted model JSON (default: the one shipped with pubsubml)."),
    ] = None,
) -> None:
    """Forecast ψ of a private collaboration vs one owner's non-private model, and say if it pays."""
    from pubsubml.errors import PubsubmlError
    from pubsubml.methods.async_dp.cost import CostOfPrivacyModel

    try:
        fitted = (
            CostOfPrivacyModel.from_json(model.read_text())
            if model
            else CostOfPrivacyModel.load_default()
        )
        result = fitted.forecast(n_owners=owners, n_records=records, epsilon=epsilon)
    except (PubsubmlError, OSError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=2) from exc
    typer.echo(
        f"Collaboration of N={owners} owners with n_i={records} records each at ε_i={epsilon:g} "
        f"(T={fitted.horizon}, bound of Eq. 11 with c̄1={fitted.c1:.4g}, c̄2={fitted.c2:.4g}):"
    )
    typer.echo(f"  predicted ψ, private collaboration:        {result.psi_collaboration:.4g}")
    typer.echo(f"  predicted ψ, one owner alone (non-private): {result.psi_alone:.4g}")
    verdict = (
        "collaborating is expected to pay"
        if result.pays
        else "collaborating is NOT expected to pay"
    )
    typer.echo(f"Verdict: {verdict}.")
    if result.extrapolated:
        typer.echo(
            "Note: outside the calibration ranges "
            + str({k: fitted.calibration.get(k) for k in ("n_owners", "n_records", "epsilon")})
            + "; the forecast is an extrapolation."
        )


def bench(
    name: Annotated[str, typer.Argument(help=f"One of: {', '.join(BENCHMARKS)}.")],
    smoke: Annotated[
        bool, typer.Option(help="Tiny configuration that runs in seconds (CI).")
    ] = False,
    out_dir: Annotated[Path, typer.Option(help="Folder for the CSV, MD and PNG outputs.")] = Path(
        "docs/results"
    ),
    seed: Annotated[int, typer.Option(help="Seed of data and runs.")] = 0,
    model_path: Annotated[
        Path | None,
        typer.Option(
            help="async-dp-calibrate: where to write the model (default: the packaged file, "
            "full size only)."
        ),
    ] = None,
) -> None:
    """Run one ``async-dp-*`` experiment and write ``<out-dir>/async-dp-*.{csv,md,png}``."""
    from pubsubml.experiments.async_dp.experiments import (
        EXPERIMENTS,
        AsyncDPExperimentConfig,
        run_calibration,
    )

    if name not in EXPERIMENTS:
        typer.echo(
            f"error: unknown benchmark {name!r}; choose one of {', '.join(BENCHMARKS)}", err=True
        )
        raise typer.Exit(code=2)
    cfg = AsyncDPExperimentConfig.create("smoke" if smoke else "full", seed=seed)
    out_dir.mkdir(parents=True, exist_ok=True)
    if name == "async-dp-calibrate":
        target = model_path or (None if smoke else default_model_path())
        fitted = run_calibration(cfg, out_dir, target)
        typer.echo(
            f"c̄1={fitted.c1:.4g} c̄2={fitted.c2:.4g} a={fitted.alone_a:.4g} b={fitted.alone_b:.4g}"
            + (f" -> {target}" if target else "")
        )
    else:
        EXPERIMENTS[name](cfg, out_dir)
    typer.echo(f"{name}: wrote its CSV, MD and PNG outputs to {out_dir}")


def _bench_command(name: str) -> Callable[..., None]:
    def command(
        smoke: Annotated[
            bool, typer.Option(help="Tiny configuration that runs in seconds (CI).")
        ] = False,
        out_dir: Annotated[Path, typer.Option(help="Folder for the outputs.")] = Path(
            "docs/results"
        ),
        seed: Annotated[int, typer.Option(help="Seed of data and runs.")] = 0,
        model_path: Annotated[
            Path | None, typer.Option(help="async-dp-calibrate: model JSON path.")
        ] = None,
    ) -> None:
        bench(name, smoke=smoke, out_dir=out_dir, seed=seed, model_path=model_path)

    command.__doc__ = f"Run the {name} experiment (writes docs/results/{name}*)."
    return command


def register(root: typer.Typer, bench_app: typer.Typer) -> None:
    """Mount ``forecast`` on the main app and every ``async-dp-*`` benchmark on its bench group.

    Examples
    --------
    >>> root, bench_group = typer.Typer(), typer.Typer()
    >>> register(root, bench_group)
    >>> sorted(c.name for c in bench_group.registered_commands)[:2]
    ['async-dp-bands', 'async-dp-calibrate']
    """
    root.command("forecast")(forecast)
    for name in BENCHMARKS:
        bench_app.command(name)(_bench_command(name))


app.command("forecast")(forecast)
app.command("bench")(bench)


def main() -> None:
    """Entry point of ``python -m pubsubml.cli.async_dp``."""
    app()


if __name__ == "__main__":
    main()
