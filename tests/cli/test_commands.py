"""The ``pubsubml`` Typer app: every command group is mounted, and the package face loads it lazily."""

from __future__ import annotations

import subprocess
import sys

import pytest
import typer
from typer.main import get_command

import pubsubml.cli
from pubsubml.cli.commands import app, main
from pubsubml.experiments.catalog import EXPERIMENTS


def test_the_app_mounts_every_group_and_every_experiment() -> None:
    root = get_command(app)
    names = set(root.commands)  # type: ignore[attr-defined]
    expected = {"demo", "registry", "site", "features", "models", "publish", "subscribe", "pull"}
    expected |= {"budget", "bench", "forecast", "audit", "proxyfl"}
    assert expected <= names
    bench = root.commands["bench"]  # type: ignore[attr-defined]
    with typer.Context(bench) as ctx:
        assert sorted(bench.list_commands(ctx)) == sorted(EXPERIMENTS)
        assert bench.get_command(ctx, next(iter(EXPERIMENTS))) is not None
        assert bench.get_command(ctx, "no-such-experiment") is None


def test_the_app_starts_without_the_experiments_or_torch() -> None:
    code = (
        "import sys, pubsubml.cli.commands\n"
        "print('pubsubml.experiments.catalog' in sys.modules, 'torch' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["False", "False"], done.stderr


def test_the_package_face_hands_out_the_same_app() -> None:
    assert pubsubml.cli.app is app and pubsubml.cli.main is main
    with pytest.raises(AttributeError, match="no attribute"):
        _ = pubsubml.cli.nothing  # type: ignore[attr-defined]


def test_importing_a_command_group_does_not_load_the_app() -> None:
    code = (
        "import sys, pubsubml.cli.registry.server\n"
        "print('pubsubml.cli.commands' in sys.modules, 'torch' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["False", "False"], done.stderr


def test_version_prints_the_installed_version_and_exits_0() -> None:
    from importlib.metadata import version

    done = subprocess.run(
        [sys.executable, "-m", "pubsubml", "--version"], capture_output=True, text=True, timeout=60
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout == f"pubsubml {version('pubsubml')}\n" and done.stderr == ""
