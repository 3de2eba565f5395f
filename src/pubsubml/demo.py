"""The main job on the embedded default: ``make demo`` / ``pubsubml demo``.

End to end, on one machine and with nothing downloaded (pubsub-ml.txt Algorithm 3):

1. start the registry on loopback (SQLite in WAL mode + a local artifact folder, in a temp folder)
   and register the consortium's feature dictionary and the sites with their Ed25519 keys and
   privacy budgets;
2. publishers, each holding its own slice of river's Hyperplane data and its own feature subset,
   train DP MLPs (the network of pubsub-ml.txt §7.2 Table 4, ε = 1, δ = 1e-5), charge their ledgers
   and publish over HTTP; the registry recomputes ε and charges its copy of the ledger;
3. subscribers subscribe to channels, pull and verify the models, run CUSTOMIZE (Algorithm 2) on
   their small private data and report contribution scores;
4. a table per subscriber compares Own, PubSub-ML and the non-private reference PubSub-ML*.
"""

from __future__ import annotations

import secrets
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table
from sklearn.model_selection import train_test_split

from pubsubml.artifacts.signing import generate_signing_key, public_key_to_base64
from pubsubml.learners import DPMLPClassifier
from pubsubml.methods import ContributionReport, Customizer
from pubsubml.privacy import PrivacyLedger, compute_epsilon
from pubsubml.registry.client import RegistryClient
from pubsubml.schema import FeatureSchema
from pubsubml.sim import Dataset, hyperplane
from pubsubml.sites import Site

__all__ = ["DemoConfig", "run_demo"]


@dataclass(frozen=True)
class DemoConfig:
    """Sizes of the demo (the defaults are what ``make demo`` runs)."""

    publisher_rows: int = 1500
    subscriber_rows: int = 400
    epochs: int = 30
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
    names = list(PUBLISHERS) + list(SUBSCRIBERS)
    sizes = [cfg.publisher_rows] * len(PUBLISHERS) + [cfg.subscriber_rows] * len(SUBSCRIBERS)
    # One concept (IID sites): publishers have more data, subscribers little (Scenario 1, §8.1.1).
    data = hyperplane(sum(sizes), seed=seed)
    parts = dict(zip(names, _split(data, sizes, seed), strict=True))
    schema = data.schema

    admin = RegistryClient(url, admin_token)
    admin.add_features(schema.features)
    sites: dict[str, Site] = {}
    clients: dict[str, RegistryClient] = {}
    for name in names:
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

    # ---- publishing phase (Algorithm 3, line 2) ----------------------------------------
    published = Table(title="Publishers (DP MLP 100-50 tanh, DP-SGD with Poisson sampling)")
    for col in ("site", "features", "rows", "σ", "steps", "ε PLD", "ε RDP", "δ", "ledger ε"):
        published.add_column(col, justify="right" if col not in ("site", "features") else "left")
    reference_models: list[DPMLPClassifier] = []
    for name, features in PUBLISHERS.items():
        site, part = sites[name], parts[name]
        X = part.X[features]
        model = DPMLPClassifier(
            schema=site.schema,
            classes=data.classes,
            epochs=cfg.epochs,
            target_epsilon=cfg.epsilon,
            target_delta=cfg.delta,
            random_state=seed,
        )
        with console.status(f"{name}: DP-SGD training"):
            model.fit(X, part.y)
        site.publish(model, clients[name])
        # PubSub-ML*: the same network without DP, kept in-process as the reference (§8.3.4).
        reference_models.append(
            DPMLPClassifier(
                schema=site.schema,
                classes=data.classes,
                epochs=cfg.epochs,
                dp=False,
                random_state=seed,
            ).fit(X, part.y)
        )
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

    # ---- customizing phase (Algorithm 3, line 5) ---------------------------------------
    scores: dict[str, dict[str, float]] = {}
    for name, (features, channel) in SUBSCRIBERS.items():
        site, part = sites[name], parts[name]
        sub_id = site.subscribe(clients[name], channel, task="classification", classes=data.classes)
        models = site.pull(clients[name], sub_id)
        X = part.X[features]
        X_tr, X_te, y_tr, y_te = train_test_split(
            X, part.y, test_size=0.2, stratify=part.y, random_state=seed
        )
        own = DPMLPClassifier(
            schema=site.schema, classes=data.classes, epochs=cfg.epochs, dp=False, random_state=seed
        ).fit(X_tr, y_tr)
        custom = Customizer(
            models=models, schema=site.schema, classes=data.classes, random_state=seed
        )
        custom.fit(X_tr, y_tr)
        ContributionReport.from_customizer(custom, name).report(clients[name])
        matching = [
            m
            for m, feats in zip(reference_models, PUBLISHERS.values(), strict=True)
            if _matches(channel, feats)
        ]
        star = Customizer(
            models=[_AsPublished(m) for m in matching],
            schema=site.schema,
            classes=data.classes,
            random_state=seed,
        ).fit(X_tr, y_tr)
        scores[name] = {
            "Own": float(own.score(X_te, y_te)),
            "PubSub-ML": float(custom.score(X_te, y_te)),
            "PubSub-ML*": float(star.score(X_te, y_te)),
        }
        table = Table(title=f"{name}: channel '{channel}', {len(models)} models received")
        table.add_column("method")
        table.add_column("test accuracy", justify="right")
        table.add_column("what it uses")
        table.add_row(
            "Own", f"{scores[name]['Own']:.3f}", f"own non-private MLP on {len(X_tr)} rows"
        )
        table.add_row(
            "PubSub-ML",
            f"{scores[name]['PubSub-ML']:.3f}",
            "CUSTOMIZE over own model + DP models (ε = 1 each)",
        )
        table.add_row(
            "PubSub-ML*",
            f"{scores[name]['PubSub-ML*']:.3f}",
            "same, publishers without DP (reference)",
        )
        console.print(table)
        contributions = admin.contributions(subscriber=name)
        console.print(
            f"  contribution scores reported to the registry: {len(contributions)} models"
        )
    return scores


def _features_text(features: list[str]) -> str:
    return f"{features[0]}…{features[-1]}" if len(features) > 3 else ",".join(features)


def _matches(channel: str, features: list[str]) -> bool:
    from pubsubml.schema import Channel

    return Channel.parse(channel).matches(features)


class _AsPublished:
    """A non-private local model seen through the same black-box interface as a published one."""

    def __init__(self, model: DPMLPClassifier) -> None:
        self._model = model
        schema: FeatureSchema | None = model.schema_
        if schema is None:
            raise ValueError("the reference model needs a FeatureSchema")
        self.schema = schema
        self.input_features = schema.names
        self.classes = list(model.classes_)
        self.task = "classification"

    def predict_proba(self, X: object) -> np.ndarray:
        return np.asarray(self._model.predict_proba(self.schema.extend(X)))

    def predict(self, X: object) -> np.ndarray:
        return np.asarray(self._model.predict(self.schema.extend(X)))
