"""The main job on the embedded default: ``make demo`` / ``pubsubml demo``.

End to end, on one machine and with nothing downloaded (pubsub-ml.txt Algorithm 3):

1. start the registry on loopback (SQLite in WAL mode + a local artifact folder, in a temp folder)
   and register the consortium's feature dictionary and the sites with their Ed25519 keys and
   privacy budgets;
2. publishers, each holding its own slice of river's Hyperplane data and its own feature subset,
   train DP-SGD logistic regressions (:class:`~pubsubml.learners.DPSGDLogisticRegression` with its
   public-input defaults, ε = 1, δ = 1e-5), charge their ledgers and publish over HTTP; the
   registry recomputes ε and charges its copy of the ledger;
3. subscribers subscribe to channels, pull and verify the models, run CUSTOMIZE (Algorithm 2,
   cross-fitted, stacked fusion) on their small private data and report contribution scores;
4. a table per subscriber compares, on fresh rows of the subscriber's distribution that nobody
   trained on, Own (the same own learner as inside CUSTOMIZE), PubSub-ML and the non-private
   reference PubSub-ML*.
"""

from __future__ import annotations

import io
import math
import secrets
import socket
import tempfile
import threading
import time
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
    """Sizes of the demo (the defaults are what ``make demo`` runs)."""

    publisher_rows: int = 1500
    subscriber_rows: int = 400
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
) -> dict[str, dict[str, float]]:
    """Run the demo; returns the test scores per subscriber (``Own``, ``PubSub-ML``, ``PubSub-ML*``).

    The registry's database and artifact store live in ``workdir`` (a temporary folder when
    ``None``, removed afterwards).
    """
    if console is None:
        console = Console()
        if not console.is_terminal:
            console = Console(width=120)
    cfg = config or DemoConfig()
    with tempfile.TemporaryDirectory(prefix="pubsubml-demo-") as tmp:
        root = Path(workdir) if workdir is not None else Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        admin_token = secrets.token_urlsafe(32)
        with _registry(root, admin_token) as url:
            console.print(f"[bold]Registry[/bold] on {url} (SQLite + artifact folder in {root})")
            return _run(url, admin_token, seed, cfg, console)


def run_demo_seeds(
    seeds: Sequence[int],
    *,
    config: DemoConfig | None = None,
    console: Console | None = None,
) -> pd.DataFrame:
    """Run the demo once per seed (quietly) and print the scores per seed with mean ± SE.

    Returns
    -------
    DataFrame
        One row per (seed, subscriber) with the ``Own``, ``PubSub-ML`` and ``PubSub-ML*`` scores.
    """
    console = console or Console()
    rows: list[dict[str, Any]] = []
    for seed in seeds:
        quiet = Console(file=io.StringIO(), width=160)
        with console.status(f"seed {seed}"):
            scores = run_demo(seed=seed, config=config, console=quiet)
        rows.extend({"seed": seed, "subscriber": sub} | s for sub, s in scores.items())
    table = pd.DataFrame(rows)
    methods = ["Own", "PubSub-ML", "PubSub-ML*"]
    out = Table(title=f"Demo over seeds {list(seeds)}: test accuracy on fresh rows")
    for col in ("subscriber", "seed", *methods, "PubSub-ML − Own"):
        out.add_column(col, justify="left" if col == "subscriber" else "right")
    for sub, part in table.groupby("subscriber", sort=False):
        gain = part["PubSub-ML"] - part["Own"]
        for (_, row), g in zip(part.iterrows(), gain, strict=True):
            out.add_row(
                str(sub), str(row["seed"]), *(f"{row[m]:.4f}" for m in methods), f"{g:+.4f}"
            )
        out.add_row(
            str(sub),
            "mean ± SE",
            *(_mean_se(part[m].to_numpy()) for m in methods),
            _mean_se(gain.to_numpy(), sign=True),
            end_section=True,
        )
    console.print(out)
    return table


def _mean_se(values: np.ndarray, *, sign: bool = False) -> str:
    se = float(np.std(values, ddof=1) / np.sqrt(len(values))) if len(values) > 1 else math.nan
    return f"{float(np.mean(values)):{'+' if sign else ''}.4f} ± {se:.4f}"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def _registry(root: Path, admin_token: str) -> Iterator[str]:
    """An embedded registry served by uvicorn on 127.0.0.1 in a background thread."""
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
    url: str, admin_token: str, seed: int, cfg: DemoConfig, console: Console
) -> dict[str, dict[str, float]]:
    """Register the sites, publish (Algorithm 3, line 2), then customize at each subscriber."""
    data, parts, fresh = _demo_data(seed, cfg)
    admin = RegistryClient(url, admin_token)
    sites, clients = _register_sites(admin, url, data.schema, cfg)
    references = _publish(sites, clients, parts, data, seed, cfg, console)
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
    # One concept (IID sites): publishers have more data, subscribers little (Scenario 1, §8.1.1).
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
) -> list[_AsPublished]:
    """Every publisher trains and publishes its DP model; returns the non-DP references."""
    published = Table(
        title="Publishers (DP-SGD logistic regression on public-bound inputs, Poisson sampling)"
    )
    for col in ("site", "features", "rows", "σ", "steps", "ε PLD", "ε RDP", "δ", "ledger ε"):
        published.add_column(col, justify="right" if col not in ("site", "features") else "left")
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
        )
        with console.status(f"{name}: DP-SGD training"):
            model.fit(X, part.y)
        site.publish(model, clients[name])
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
