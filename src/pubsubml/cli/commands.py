"""The ``pubsubml`` command line: one Typer app with every command group mounted.

``pubsubml demo`` runs the main job on the embedded default; the registry, site, feature, publish,
subscribe, pull and budget commands talk to a registry service; ``keygen``, ``schema``, ``train``,
``customize``, ``predict``, ``evaluate`` and ``contributions`` are a site's own steps on its files.
``pubsubml --version`` prints the installed version.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

__all__ = ["app", "main", "package_version"]

app = typer.Typer(
    name="pubsubml",
    help="Publish/subscribe machine learning with differential privacy.",
    no_args_is_help=True,
    add_completion=False,
)


def package_version() -> str:
    """The installed version of pubsubml (its distribution's metadata, else ``__version__``).

    Examples
    --------
    >>> import pubsubml
    >>> package_version() == pubsubml.__version__
    True
    """
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pubsubml")
    except PackageNotFoundError:  # run from a source tree that was never installed
        import pubsubml

        return pubsubml.__version__


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"pubsubml {package_version()}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_print_version,
            is_eager=True,
            help="Print the version (pubsubml X.Y.Z) and exit.",
        ),
    ] = False,
) -> None:
    """Publish/subscribe machine learning with differential privacy."""


@app.command()
def demo(
    workdir: Annotated[
        Path | None,
        typer.Option(
            help="Folder for the demo's registry, keys and artifacts (default: a temp dir)."
        ),
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of the generated sites.")] = 0,
    seeds: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Run seeds 0..N-1 quietly and print each subscriber's scores per seed with "
            "the mean ± standard error (instead of one verbose run).",
        ),
    ] = None,
) -> None:
    """Run the end-to-end demo on the embedded default (nothing is downloaded)."""
    from pubsubml.cli.demo import run_demo, run_demo_seeds

    if seeds is None:
        run_demo(workdir=workdir, seed=seed)
    else:
        run_demo_seeds(range(seeds))


def _mount_registry() -> None:
    import pubsubml.cli.registry as registry_cli

    app.add_typer(registry_cli.registry_app, name="registry")
    app.add_typer(registry_cli.site_app, name="site")
    app.add_typer(registry_cli.features_app, name="features")
    app.add_typer(registry_cli.models_app, name="models")
    app.command("publish")(registry_cli.publish_command)
    app.command("subscribe")(registry_cli.subscribe_command)
    app.command("pull")(registry_cli.pull_command)
    app.command("budget")(registry_cli.budget_command)


def _mount_site() -> None:
    import pubsubml.cli.customize as customize_cli
    import pubsubml.cli.customized_model as customized_cli
    import pubsubml.cli.example as example_cli
    import pubsubml.cli.site as site_cli
    import pubsubml.cli.train as train_cli

    app.command("example-data")(example_cli.example_data_command)
    app.command("keygen")(site_cli.keygen_command)
    app.add_typer(site_cli.schema_app, name="schema")
    app.command("train")(train_cli.train_command)
    app.command("customize")(customize_cli.customize_command)
    app.command("predict")(customized_cli.predict_command)
    app.command("evaluate")(customized_cli.evaluate_command)
    app.command("contributions")(customized_cli.contributions_command)


_mount_registry()
_mount_site()


class _ExperimentGroup(TyperGroup):
    """``pubsubml bench``: its experiment commands are built on first use, so that the other
    commands start without importing every experiment (and torch)."""

    def _experiments(self) -> None:
        if getattr(self, "_loaded", False):
            return
        from pubsubml.cli.bench import register_experiments
        from pubsubml.experiments.catalog import EXPERIMENTS

        catalog = typer.Typer()
        register_experiments(catalog, EXPERIMENTS.values())
        group = typer.main.get_group(catalog)
        for name, command in group.commands.items():
            self.add_command(command, name)
        self._loaded = True

    def list_commands(self, ctx: Any) -> list[str]:
        self._experiments()
        return super().list_commands(ctx)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        self._experiments()
        return super().get_command(ctx, cmd_name)


bench_app = typer.Typer(
    cls=_ExperimentGroup,
    help="Run an experiment; results go to docs/results/.",
    no_args_is_help=True,
)
app.add_typer(bench_app, name="bench")


def _mount_methods() -> None:
    import pubsubml.cli.async_dp as async_dp_cli
    import pubsubml.cli.audit as audit_cli
    import pubsubml.cli.proxyfl as proxyfl_cli

    app.command("forecast")(async_dp_cli.forecast)
    app.command("audit")(audit_cli.audit)
    app.add_typer(proxyfl_cli.app, name="proxyfl")


_mount_methods()


def main() -> None:
    """Entry point for ``python -m pubsubml``."""
    app()
