"""The main job on the embedded default: ``make demo`` / ``pubsubml demo``.

End to end, on one machine and with nothing downloaded (pubsub-ml.txt Algorithm 3):

1. start the registry on loopback (SQLite in WAL mode + a local artifact folder, in a temp folder)
   and register the consortium's feature dictionary and the sites with their Ed25519 keys and
   privacy budgets;
2. publishers, each holding its own slice of river's Hyperplane data and its own feature subset,
   train DP-SGD logistic regressions (:class:`~pubsubml.learners.DPSGDLogisticRegression` with its
   public-input defaults, ε = 1, δ = 1e-5), charge their ledgers and publish over HTTP; the
   registry recomputes ε and charges its copy of the ledger;
3. subscribers, small sites as in the paper's setting (§8.1), subscribe to channels, pull and
   verify the models, run CUSTOMIZE (Algorithm 2, cross-fitted, stacked fusion) on their private
   rows and report contribution scores;
4. a table per subscriber compares, on fresh rows of the subscriber's distribution that nobody
   trained on, Own (the same own learner as inside CUSTOMIZE), PubSub-ML and the non-private
   reference PubSub-ML*;
5. a table of the same comparison over seeds 0–9 as a reproducible simulation, mean ± SE.

The verbose run is the product as deployed: the publishers draw their DP noise from a secure
source (no ``noise_seed``; :mod:`pubsubml.privacy.noise`) and the registry refuses seeded noise,
so the scores' last digits change from run to run.  The runs over seeds
(:func:`run_demo_seeds`) are a simulation: every DP learner gets ``noise_seed = seed`` and the
registry runs in research mode (``RegistrySettings(allow_seeded_noise=True)``), so a seed gives
the same scores on every run.

The consortium is :mod:`pubsubml.cli.demo_consortium`, the embedded registry
:mod:`pubsubml.cli.demo_registry` and what the sites do over HTTP :mod:`pubsubml.cli.demo_sites`.
"""

from __future__ import annotations

import io
import math
import secrets
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
from rich.console import Console
from rich.table import Table

from pubsubml.cli.demo_consortium import SUBSCRIBERS, DemoConfig, demo_data
from pubsubml.cli.demo_registry import embedded_registry
from pubsubml.cli.demo_sites import customize_subscriber, publish_models, register_sites
from pubsubml.experiments.reports import mean_se, mean_se_label
from pubsubml.registry.client import RegistryClient

__all__ = ["DemoConfig", "run_demo", "run_demo_seeds"]


def run_demo(
    *,
    workdir: Path | None = None,
    seed: int = 0,
    config: DemoConfig | None = None,
    console: Console | None = None,
    seeded_noise: bool = False,
    summary_seeds: Sequence[int] = range(10),
) -> dict[str, dict[str, float]]:
    """Run the demo verbosely, then the simulation over ``summary_seeds``; return the scores.

    Parameters
    ----------
    workdir : Path, optional
        Folder of the registry's database and artifact store (a temporary folder when ``None``,
        removed afterwards).
    seed : int, default=0
        Seed of the generated sites, their splits and every learner's ``random_state``.
    config : DemoConfig, optional
        Sizes (default: ``DemoConfig()``).
    console : Console, optional
        Where the tables go (default: standard output).
    seeded_noise : bool, default=False
        ``False``: the product as deployed; the publishers draw their DP noise from a secure
        source nobody can regenerate and the registry refuses seeded noise, so the scores' last
        digits change from run to run.  ``True``: a reproducible simulation; every DP learner
        gets ``noise_seed = seed``, the registry runs in research mode
        (``allow_seeded_noise=True``) and :class:`~pubsubml.errors.SeededNoiseWarning`, expected
        here, is silenced.
    summary_seeds : sequence of int, default=range(10)
        After the verbose run, :func:`run_demo_seeds` runs the simulation once per seed (in
        their own registries, quietly) and prints each subscriber's mean ± SE over them; empty:
        no summary.

    Returns
    -------
    dict
        The verbose run's test accuracy per subscriber and method (``Own``, ``PubSub-ML``,
        ``PubSub-ML*``).
    """
    console = console or _default_console()
    cfg = config or DemoConfig()
    with tempfile.TemporaryDirectory(prefix="pubsubml-demo-") as tmp:
        root = Path(workdir) if workdir is not None else Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        admin_token = secrets.token_urlsafe(32)
        with embedded_registry(root, admin_token, allow_seeded_noise=seeded_noise) as url:
            console.print(f"[bold]Registry[/bold] on {url} (SQLite + artifact folder in {root})")
            console.print(_noise_line(seed, seeded_noise))
            scores = _run(url, admin_token, seed, cfg, console, seeded_noise)
    if len(summary_seeds):
        run_demo_seeds(summary_seeds, config=cfg, console=console, per_seed=False)
    return scores


def run_demo_seeds(
    seeds: Sequence[int],
    *,
    config: DemoConfig | None = None,
    console: Console | None = None,
    per_seed: bool = True,
) -> pd.DataFrame:
    """Run the demo as a reproducible simulation once per seed (quietly) and print the scores.

    Each seed runs in its own registry started in research mode, with every DP learner's
    ``noise_seed`` equal to the seed (``run_demo(seeded_noise=True)``): the same seed gives the
    same scores on every run.

    Parameters
    ----------
    seeds : sequence of int
    config : DemoConfig, optional
        Sizes (default: ``DemoConfig()``).
    console : Console, optional
        Where the table goes (default: standard output).
    per_seed : bool, default=True
        Print every seed's scores above each subscriber's mean ± SE (``False``: the mean ± SE
        rows alone).

    Returns
    -------
    DataFrame
        One row per (seed, subscriber) with the ``Own``, ``PubSub-ML`` and ``PubSub-ML*`` scores.
    """
    console = console or _default_console()
    rows: list[dict[str, Any]] = []
    for seed in seeds:
        with console.status(f"simulation with seeded noise: seed {seed}"):
            scores = _simulate(seed, config)
        rows.extend({"seed": seed, "subscriber": sub} | s for sub, s in scores.items())
    table = pd.DataFrame(rows)
    methods = ["Own", "PubSub-ML", "PubSub-ML*"]
    out = Table(
        title=f"Simulation over seeds {_seeds_text(seeds)} (DP noise seeded by each seed, "
        "registry in research mode: reproducible): test accuracy on fresh rows"
        + ("" if per_seed else ", mean ± SE")
    )
    for col in ("subscriber", *(["seed"] if per_seed else []), *methods, "PubSub-ML − Own"):
        out.add_column(col, justify="left" if col == "subscriber" else "right")
    for sub, part in table.groupby("subscriber", sort=False):
        gain = part["PubSub-ML"] - part["Own"]
        if per_seed:
            for (_, row), g in zip(part.iterrows(), gain, strict=True):
                out.add_row(
                    str(sub), str(row["seed"]), *(f"{row[m]:.4f}" for m in methods), f"{g:+.4f}"
                )
        out.add_row(
            str(sub),
            *(["mean ± SE"] if per_seed else []),
            *(_mean_se(part[m]) for m in methods),
            _mean_se(gain, sign=True),
            end_section=per_seed,
        )
    console.print(out)
    return table


def _default_console() -> Console:
    """Standard output; 120 columns when it is a pipe or a file (not wrapped at 80)."""
    console = Console()
    return console if console.is_terminal else Console(width=120)


def _simulate(seed: int, config: DemoConfig | None) -> dict[str, dict[str, float]]:
    """One quiet run of the reproducible simulation (seeded noise, research-mode registry)."""
    quiet = Console(file=io.StringIO(), width=160)
    return run_demo(seed=seed, config=config, console=quiet, seeded_noise=True, summary_seeds=())


def _noise_line(seed: int, seeded_noise: bool) -> str:
    """One line saying where the publishers' DP noise comes from."""
    if seeded_noise:
        return (
            f"[bold]Simulation[/bold]: DP noise seeded by noise_seed = {seed}, registry in "
            "research mode: reproducible, not private"
        )
    return (
        "[bold]Secure DP noise[/bold], as deployed (nobody can regenerate it): the scores' last "
        "digits change from run to run"
    )


def _seeds_text(seeds: Sequence[int]) -> str:
    values = list(seeds)
    if len(values) > 2 and values == list(range(values[0], values[-1] + 1)):
        return f"{values[0]}–{values[-1]}"
    return ", ".join(str(v) for v in values)


def _mean_se(values: pd.Series, *, sign: bool = False) -> str:
    """``"0.8100 ± 0.0058"`` over the seeds (:func:`~pubsubml.experiments.reports.mean_se`); the SE
    of a single seed is not estimated and prints as ``nan``."""
    mean, se, _ = mean_se(values, single_se=math.nan)
    return mean_se_label(mean, se, 4, sign=sign)


def _run(
    url: str, admin_token: str, seed: int, cfg: DemoConfig, console: Console, seeded_noise: bool
) -> dict[str, dict[str, float]]:
    """Register the sites, publish (Algorithm 3, line 2), then customize at each subscriber."""
    data, parts, fresh = demo_data(seed, cfg)
    admin = RegistryClient(url, admin_token)
    sites, clients = register_sites(admin, url, data.schema, cfg)
    references = publish_models(sites, clients, parts, data, seed, cfg, console, seeded_noise)
    scores: dict[str, dict[str, float]] = {}
    for name in SUBSCRIBERS:
        scores[name] = customize_subscriber(
            name,
            sites[name],
            clients[name],
            parts[name],
            fresh[name],
            data,
            references,
            seed,
            console,
        )
        contributions = admin.contributions(subscriber=name)
        console.print(
            f"  contribution scores reported to the registry (opt-in, not DP): {len(contributions)} models"
        )
    return scores
