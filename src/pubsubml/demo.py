"""The main job on the embedded default: ``make demo`` / ``pubsubml demo``.

Generates sites from river's Hyperplane generator, trains a DP MLP publisher (ε = 1, δ = 1e-5,
the PubSub-ML network of pubsub-ml.txt §7.2 Table 4), exports it as a signed artifact, reloads it
through the safe loader as an untrusted subscriber would, and prints ε (PLD and RDP), accuracy and
the artifact's digest.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from pubsubml.artifacts import PublishedModel, export_model, load_artifact
from pubsubml.artifacts.signing import generate_signing_key, key_id
from pubsubml.learners import DPMLPClassifier
from pubsubml.privacy import compute_epsilon
from pubsubml.sim import hyperplane

__all__ = ["run_demo"]

EPSILON = 1.0
DELTA = 1e-5


def run_demo(*, workdir: Path | None = None, seed: int = 0, console: Console | None = None) -> None:
    """Run the demo; artifacts go to ``workdir`` (a temporary folder when ``None``)."""
    console = console or Console()
    with tempfile.TemporaryDirectory(prefix="pubsubml-demo-") as tmp:
        root = Path(workdir) if workdir is not None else Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        _run(root, seed, console)


def _run(root: Path, seed: int, console: Console) -> None:
    data = hyperplane(3 * 2000, seed=seed)
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(data))
    publisher_rows, subscriber_rows = order[:4000], order[4000:]
    publisher, subscriber = data.take(publisher_rows), data.take(subscriber_rows)
    console.print(
        f"[bold]Sites[/bold]: publisher with {len(publisher)} rows, subscriber with "
        f"{len(subscriber)} rows, {len(data.schema)} Hyperplane features"
    )

    model = DPMLPClassifier(
        schema=data.schema,
        classes=data.classes,
        target_epsilon=EPSILON,
        target_delta=DELTA,
        random_state=seed,
    )
    with console.status("training the DP MLP publisher (DP-SGD, Poisson sampling)"):
        model.fit(publisher.X, publisher.y)

    key = generate_signing_key()
    artifact = export_model(model, publisher="publisher-1", signing_key=key)
    folder = root / "publisher-1" / artifact.card.model_id
    artifact.save(folder)

    # The subscriber side: read bytes from disk, verify digest and signature, run black-box.
    received = load_artifact(folder)
    trusted = {key_id(key.public_key()): key.public_key()}
    published = PublishedModel.load(received.card, received.weights, trusted_keys=trusted)
    accuracy = float(np.mean(published.predict(subscriber.X) == subscriber.y))

    eps_rdp = compute_epsilon(model.privacy_events_, DELTA, backend="rdp")
    table = Table(title="DP publisher")
    table.add_column("quantity")
    table.add_column("value", justify="right")
    table.add_row("noise multiplier σ (calibrated)", f"{model.noise_multiplier_:.4f}")
    table.add_row("sample rate q", f"{model.sample_rate_:.4f}")
    table.add_row("DP-SGD steps", str(model.steps_))
    table.add_row("ε (PLD accountant)", f"{model.epsilon_:.4f}")
    table.add_row("ε (RDP accountant)", f"{eps_rdp:.4f}")
    table.add_row("δ", f"{model.delta_:g}")
    table.add_row("accuracy on the subscriber's data", f"{accuracy:.4f}")
    table.add_row("artifact format", received.card.format)
    table.add_row("weights SHA-256", received.card.weights_sha256)
    table.add_row("artifact folder", str(folder))
    console.print(table)
