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
"""

from __future__ import annotations

import io
import math
import secrets
import socket
import tempfile
import threading
import time
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from rich.console import Console
from rich.table import Table

from pubsubml.artifacts.signing import generate_signing_key, public_key_to_base64
from pubsubml.data import Dataset, hyperplane
from pubsubml.errors import SeededNoiseWarning
from pubsubml.experiments.reports import mean_se, mean_se_label
from pubsubml.learners import DPSGDLogisticRegression
from pubsubml.methods import ContributionReport, Customizer, OwnLearner
from pubsubml.methods.pubsub.own import own_estimator
from pubsubml.privacy import PrivacyLedger, compute_epsilon
from pubsubml.registry.client import RegistryClient
from pubsubml.schema import FeatureSchema
from pubsubml.sites import Site

__all__ = ["DemoConfig", "run_demo", "run_demo_seeds"]


@dataclass(frozen=True)
class DemoConfig:
    """Sizes and privacy parameters of the demo (the defaults are what ``make demo`` runs).

    Parameters
    ----------
    publisher_rows : int, default=1500
        Rows of each of the four publishers.
    subscriber_rows : int, default=200
        Rows of each of the two subscribers.
    test_rows : int, default=4000
        Fresh rows per subscriber on which the methods are scored (no site trains on them).
    epsilon, delta : float, default=1.0, 1e-5
        Every site's privacy budget, and the ε, δ of every published model.

    Notes
    -----
    The subscribers are small sites, as in the paper's setting (pubsub-ml.txt §8.1: a subscriber
    with little data of its own draws on the publishers' models).  200 rows is one of the sizes
    at which the small-subscriber experiment (``pubsub-small``, same generator) runs that
    setting; it measured PubSub-ML 3.5 points above Own there (DP networks as publishers).  With
    400 rows a subscriber's own model is already near this linear concept's ceiling and there is
    little to gain (``docs/results/demo-seeds.md`` keeps that case).
    """

    publisher_rows: int = 1500
    subscriber_rows: int = 200
    test_rows: int = 4000
    epsilon: float = 1.0
    delta: float = 1e-5


# Each publisher holds its own subset of the ten Hyperplane features; subscribers subscribe to a
# channel F1 ∨ … ∨ Fk (pubsub-ml.txt §3.2) and receive the models that match it.
PUBLISHERS: dict[str, list[str]] = {
    "hospital-a": [f"x{i}" for i in range(10)],
    "hospital-b": [f"x{i}" for i in range(7)],
    "clinic-c": [f"x{i}" for i in range(3, 10)],
    "insurer-d": [f"x{i}" for i in range(10)],
}
SUBSCRIBERS: dict[str, tuple[list[str], str]] = {
    "clinic-e": ([f"x{i}" for i in range(10)], "x0 & x1 | x8 & x9"),
    "clinic-f": ([f"x{i}" for i in range(8)], "x4 & x5"),
}


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
        with _registry(root, admin_token, allow_seeded_noise=seeded_noise) as url:
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


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def _registry(root: Path, admin_token: str, *, allow_seeded_noise: bool) -> Iterator[str]:
    """An embedded registry served by uvicorn on 127.0.0.1 in a background thread.

    ``allow_seeded_noise`` starts it in research mode (simulations only).
    """
    import uvicorn

    from pubsubml.registry.app import create_app
    from pubsubml.registry.database import Database
    from pubsubml.registry.migrate import check_schema, upgrade
    from pubsubml.registry.settings import RegistrySettings

    settings = RegistrySettings(
        database_url=f"sqlite:///{root / 'registry.db'}",
        store_dir=root / "store",
        admin_token=admin_token,  # type: ignore[arg-type]
        long_poll_max_seconds=5.0,
        allow_seeded_noise=allow_seeded_noise,
    )
    database = Database(settings.database_url)
    upgrade(database)
    check_schema(database)
    port = _free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(settings, database=database),
            host="127.0.0.1",
            port=port,
            log_level="warning",
        )
    )
    thread = threading.Thread(target=server.run, name="pubsubml-registry", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the embedded registry did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        database.dispose()


def _split(data: Dataset, sizes: list[int], seed: int) -> list[Dataset]:
    order = np.random.default_rng(seed).permutation(len(data))
    out, start = [], 0
    for size in sizes:
        out.append(data.take(order[start : start + size]))
        start += size
    return out


def _run(
    url: str, admin_token: str, seed: int, cfg: DemoConfig, console: Console, seeded_noise: bool
) -> dict[str, dict[str, float]]:
    """Register the sites, publish (Algorithm 3, line 2), then customize at each subscriber."""
    data, parts, fresh = _demo_data(seed, cfg)
    admin = RegistryClient(url, admin_token)
    sites, clients = _register_sites(admin, url, data.schema, cfg)
    references = _publish(sites, clients, parts, data, seed, cfg, console, seeded_noise)
    scores: dict[str, dict[str, float]] = {}
    for name in SUBSCRIBERS:
        scores[name] = _customize(
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


def _demo_data(
    seed: int, cfg: DemoConfig
) -> tuple[Dataset, dict[str, Dataset], dict[str, Dataset]]:
    """The sites' rows and each subscriber's fresh test rows, from one generated concept."""
    names = list(PUBLISHERS) + list(SUBSCRIBERS)
    sizes = [cfg.publisher_rows] * len(PUBLISHERS) + [cfg.subscriber_rows] * len(SUBSCRIBERS)
    # One concept (IID sites): publishers have more data, subscribers little (Scenario 1, §8.1.1;
    # the subscribers' 200 rows are the paper's small-site setting, see DemoConfig).
    # Each subscriber is scored on its own fresh rows of the concept that no site trained on.
    tests = [cfg.test_rows] * len(SUBSCRIBERS)
    data = hyperplane(sum(sizes) + sum(tests), seed=seed)
    if data.classes is None:
        raise ValueError("the demo's data set must declare its classes")
    *site_parts, tail = _split(data, [*sizes, sum(tests)], seed)
    parts = dict(zip(names, site_parts, strict=True))
    fresh = dict(zip(SUBSCRIBERS, _split(tail, tests, seed), strict=True))
    return data, parts, fresh


def _register_sites(
    admin: RegistryClient, url: str, schema: FeatureSchema, cfg: DemoConfig
) -> tuple[dict[str, Site], dict[str, RegistryClient]]:
    """The consortium's dictionary, then every site with its key, budget, ledger and token."""
    admin.add_features(schema.features)
    sites: dict[str, Site] = {}
    clients: dict[str, RegistryClient] = {}
    for name in list(PUBLISHERS) + list(SUBSCRIBERS):
        key = generate_signing_key()
        answer = admin.add_site(
            name,
            roles="publisher" if name in PUBLISHERS else "subscriber",
            public_key=public_key_to_base64(key.public_key()),
            epsilon_budget=cfg.epsilon,
            delta_budget=cfg.delta,
        )
        clients[name] = RegistryClient(url, answer["token"])
        own = PUBLISHERS.get(name) or SUBSCRIBERS[name][0]
        ledger = PrivacyLedger(site=name, epsilon_budget=cfg.epsilon, delta=cfg.delta)
        sites[name] = Site(name, schema.subset(own), ledger, signing_key=key)
    trusted = admin.trusted_keys()
    for site in sites.values():
        site.trust(*trusted.values())
    return sites, clients


def _publish(
    sites: dict[str, Site],
    clients: dict[str, RegistryClient],
    parts: dict[str, Dataset],
    data: Dataset,
    seed: int,
    cfg: DemoConfig,
    console: Console,
    seeded_noise: bool,
) -> list[_AsPublished]:
    """Every publisher trains and publishes its DP model; returns the non-DP references.

    With ``seeded_noise`` each learner gets ``noise_seed = seed`` (a simulation) and
    :class:`~pubsubml.errors.SeededNoiseWarning`, expected then, is silenced; the ``noise``
    column is what the card stored by the registry records.
    """
    published = Table(
        title="Publishers (DP-SGD logistic regression on public-bound inputs, Poisson sampling)"
    )
    columns = ("site", "features", "rows", "σ", "steps", "ε PLD", "ε RDP", "δ", "ledger ε", "noise")
    for col in columns:
        published.add_column(
            col, justify="left" if col in ("site", "features", "noise") else "right"
        )
    classes = list(data.classes or ())
    reference_models: list[_AsPublished] = []
    for name, features in PUBLISHERS.items():
        site, part = sites[name], parts[name]
        X = part.X[features]
        model = DPSGDLogisticRegression(
            schema=site.schema,
            classes=data.classes,
            epsilon=cfg.epsilon,
            delta=cfg.delta,
            random_state=seed,
            noise_seed=seed if seeded_noise else None,
        )
        with console.status(f"{name}: DP-SGD training"):
            model.fit(X, part.y)
        with warnings.catch_warnings():
            if seeded_noise:
                warnings.simplefilter("ignore", SeededNoiseWarning)
            model_id = site.publish(model, clients[name])
        card = clients[name].get_model(model_id)["card"] or {}
        # PubSub-ML*: a logistic regression of the same inputs without DP, kept in-process as
        # the reference (§8.3.4).
        reference = own_estimator("logistic", "classification", site.schema, features, seed)
        reference_models.append(_AsPublished(reference.fit(X, part.y), site.schema, classes))
        eps_rdp = compute_epsilon(model.privacy_events_, cfg.delta, backend="rdp")
        ledger_eps = clients[name].ledger(name)["spent_epsilon"]
        published.add_row(
            name,
            _features_text(features),
            str(len(part)),
            f"{model.noise_multiplier_:.3f}",
            str(model.steps_),
            f"{model.epsilon_:.4f}",
            f"{eps_rdp:.4f}",
            f"{model.delta_:g}",
            f"{float(ledger_eps):.4f}",
            str(card.get("privacy", {}).get("noise", "not recorded")),
        )
    console.print(published)
    return reference_models


def _customize(
    name: str,
    site: Site,
    client: RegistryClient,
    part: Dataset,
    fresh: Dataset,
    data: Dataset,
    references: list[_AsPublished],
    seed: int,
    console: Console,
) -> dict[str, float]:
    """One subscriber: subscribe, pull, CUSTOMIZE (Algorithm 3, line 5), score on fresh rows."""
    features, channel = SUBSCRIBERS[name]
    sub_id = site.subscribe(client, channel, task="classification", classes=data.classes)
    models = site.pull(client, sub_id)
    X_tr, y_tr = part.X[features], part.y
    X_te, y_te = fresh.X[features], fresh.y
    own = OwnLearner(schema=site.schema, classes=data.classes, random_state=seed)
    own.fit(X_tr, y_tr)
    custom = Customizer(models=models, schema=site.schema, classes=data.classes, random_state=seed)
    custom.fit(X_tr, y_tr)
    # Opt-in, and not DP: the scores come from the subscriber's private rows (see the docs).
    ContributionReport.from_customizer(custom, name).report(client, disclose=True)
    matching = [
        m
        for m, feats in zip(references, PUBLISHERS.values(), strict=True)
        if _matches(channel, feats)
    ]
    star = Customizer(
        models=matching, schema=site.schema, classes=data.classes, random_state=seed
    ).fit(X_tr, y_tr)
    scores = {
        "Own": float(own.score(X_te, y_te)),
        "PubSub-ML": float(custom.score(X_te, y_te)),
        "PubSub-ML*": float(star.score(X_te, y_te)),
    }
    table = Table(
        title=f"{name}: channel '{channel}', {len(models)} models received; "
        f"accuracy on {len(y_te)} fresh rows"
    )
    table.add_column("method")
    table.add_column("test accuracy", justify="right")
    table.add_column("what it uses")
    table.add_row(
        "Own",
        f"{scores['Own']:.3f}",
        f"own model ({own.choice_}, chosen by 5-fold CV) on {len(X_tr)} rows",
    )
    publisher = {str(m.model_id): m.card.publisher for m in models}
    weights = ", ".join(f"{publisher.get(k, k)} {w:.2f}" for k, w in custom.fusion_weights_.items())
    table.add_row(
        "PubSub-ML",
        f"{scores['PubSub-ML']:.3f}",
        "CUSTOMIZE over own model + DP models (ε = 1 each); "
        + ("fell back to Own" if custom.fallback_ else f"weights: {weights}"),
    )
    table.add_row(
        "PubSub-ML*", f"{scores['PubSub-ML*']:.3f}", "same, publishers without DP (reference)"
    )
    console.print(table)
    return scores


def _features_text(features: list[str]) -> str:
    return f"{features[0]}…{features[-1]}" if len(features) > 3 else ",".join(features)


def _matches(channel: str, features: list[str]) -> bool:
    from pubsubml.schema import Channel

    return Channel.parse(channel).matches(features)


class _AsPublished:
    """A non-private local model seen through the same black-box interface as a published one."""

    def __init__(self, model: Any, schema: FeatureSchema, classes: Sequence[Any]) -> None:
        self._model = model
        self.schema = schema
        self.input_features = schema.names
        self.classes = list(classes)
        self.task = "classification"

    def predict_proba(self, X: pd.DataFrame) -> np.ndarray:
        # Features the subscriber lacks take the public defaults, as a published model does.
        proba = np.asarray(self._model.predict_proba(self.schema.extend(X)))
        out = np.zeros((len(X), len(self.classes)))
        out[:, [self.classes.index(c) for c in self._model.classes_]] = proba
        return out

    def predict(self, X: pd.DataFrame) -> np.ndarray:
        return np.asarray(self._model.predict(self.schema.extend(X)))
