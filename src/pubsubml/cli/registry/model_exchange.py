"""``pubsubml publish|subscribe|pull|budget`` and ``pubsubml models list``: models and budgets.

A publisher releases a signed DP model (pubsub-ml.txt Algorithm 3 line 2), a subscriber
subscribes to a channel F1 ∨ … ∨ Fk (§3.2) and pulls the models published on it, verifying each
card's signature; ``budget`` shows a site's privacy ledger (§3.1: the ε it has spent).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from pubsubml.cli.registry.options import (
    DEFAULT_URL,
    TokenOpt,
    UrlOpt,
    _client,
    _errors,
    _transfer,
    console,
    fail,
)

__all__ = [
    "budget_command",
    "models_app",
    "models_list_command",
    "publish_command",
    "pull_command",
    "subscribe_command",
]

models_app = typer.Typer(help="Published models.", no_args_is_help=True)


def publish_command(
    card_dir: Annotated[
        Path, typer.Argument(help="Folder written by Artifact.save (card + weights).")
    ],
    visible_to: Annotated[
        list[str] | None, typer.Option("--visible-to", help="Limit the model to these sites.")
    ] = None,
    url: UrlOpt = DEFAULT_URL,
    token: TokenOpt = "",
) -> None:
    """Publish a signed model artifact (idempotent: republishing returns the same model)."""
    from pubsubml.artifacts.export import load_artifact

    with _errors():
        try:
            artifact = load_artifact(card_dir)
        except OSError as exc:
            where = exc.filename or card_dir
            raise fail(f"{card_dir} holds no model artifact: {where}: {exc.strerror}", 2) from None
        with _client(url, token) as client, _transfer("upload", len(artifact.weights)) as bar:
            task = bar.add_task("upload", total=len(artifact.weights))
            result = client.publish_model(
                artifact.card,
                artifact.weights,
                visible_to=visible_to,
                progress=lambda n: bar.advance(task, n),
            )
    state = "published" if result.get("created") else "already published"
    console.print(
        f"{state}: {result['model_id']} (ε = {result['epsilon']:.4g}, δ = {result['delta']:g})"
    )


def subscribe_command(
    channel: Annotated[
        str,
        typer.Argument(
            help="Channel: feature names joined by '&' (all of them) within a term and terms "
            "joined by '|' (any of them), e.g. 'age & icu_los | wbc'; or '*' for every model of "
            "the task. Quote it for the shell."
        ),
    ],
    task: Annotated[str, typer.Option(help="classification or regression.")] = "classification",
    classes: Annotated[
        list[str] | None, typer.Option("--class", help="Label set (repeat); JSON values allowed.")
    ] = None,
    site: Annotated[
        str | None, typer.Option(help="Subscribing site (default: the token's).")
    ] = None,
    url: UrlOpt = DEFAULT_URL,
    token: TokenOpt = "",
) -> None:
    """Subscribe to a channel F1 ∨ … ∨ Fk; prints the subscription id.

    A channel is one or more terms joined by '|' (or '∨'), each term one or more feature names
    of the dictionary joined by '&' (or '∧'); '&' binds tighter than '|' and there are no
    parentheses. A model is delivered when its input features contain every feature of at least
    one term: 'age & sex | wbc' receives the models using both age and sex, and those using wbc.
    '*' alone is the channel of every model of the task. Models published before the
    subscription are delivered too; a site never receives its own models.
    """
    from pubsubml.errors import ChannelSyntaxError
    from pubsubml.schema import Channel

    try:
        Channel.parse(channel)
    except ChannelSyntaxError as exc:
        raise fail(exc, 2) from None
    labels = None if classes is None else [_label(c) for c in classes]
    with _errors(), _client(url, token) as client:
        name = site or client.whoami()["name"]
        sub_id = client.subscribe(name, channel, task=task, classes=labels)
    console.print(sub_id)


def _label(text: str) -> Any:
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return value if isinstance(value, int | float | str) else text


def models_list_command(
    publisher: Annotated[str | None, typer.Option(help="Only this publisher.")] = None,
    task: Annotated[str | None, typer.Option(help="classification or regression.")] = None,
    feature: Annotated[
        list[str] | None, typer.Option("--feature", help="Must use this feature.")
    ] = None,
    min_epsilon: Annotated[float | None, typer.Option(help="Lowest ε.")] = None,
    max_epsilon: Annotated[float | None, typer.Option(help="Highest ε.")] = None,
    max_delta: Annotated[
        float | None, typer.Option(help="Highest δ (the ε of a model is at its card's δ).")
    ] = None,
    url: UrlOpt = DEFAULT_URL,
    token: TokenOpt = "",
) -> None:
    """List the published models you may see."""
    with _errors(), _client(url, token) as client:
        models = client.list_models(
            publisher=publisher,
            task=task,
            features=feature,
            min_epsilon=min_epsilon,
            max_epsilon=max_epsilon,
            max_delta=max_delta,
        )
    table = Table("model id", "publisher", "task", "ε", "δ", "format", "features")
    for m in models:
        table.add_row(
            m["model_id"],
            m["publisher"],
            m["task"],
            f"{m['epsilon']:.4g}",
            f"{m['delta']:g}",
            m["format"],
            ", ".join(m["features"])[:60],
        )
    console.print(table)


def pull_command(
    subscription: Annotated[
        str, typer.Argument(help="Subscription id (from `pubsubml subscribe`).")
    ],
    into: Annotated[
        Path, typer.Option("--into", help="Folder receiving one sub-folder per model.")
    ],
    wait: Annotated[
        float, typer.Option(help="Seconds to wait for a new model when none is new.")
    ] = 0.0,
    url: UrlOpt = DEFAULT_URL,
    token: TokenOpt = "",
) -> None:
    """Download the subscription's new models; resumes from the cursor kept in DIR/.cursor.

    Every card is verified against the registry's publisher keys before it is written; the keys
    go to DIR/trusted_keys.json, where `pubsubml customize` finds them.
    """
    from pubsubml.artifacts.export import Artifact
    from pubsubml.artifacts.signing import public_key_to_base64, verify_card

    cursor_file = into / ".cursor"
    try:
        after = int(cursor_file.read_text().strip() or 0) if cursor_file.exists() else 0
    except (OSError, UnicodeDecodeError, ValueError):
        raise fail(
            f"{cursor_file} holds no cursor (a number): remove it to pull everything", 2
        ) from None
    n = 0
    with _errors(), _client(url, token) as client:
        keys = client.trusted_keys()  # before anything is written: the registry answers
        into.mkdir(parents=True, exist_ok=True)
        known = into / "trusted_keys.json"
        tmp_keys = known.with_suffix(".tmp")
        tmp_keys.write_text(
            json.dumps({k: public_key_to_base64(v) for k, v in sorted(keys.items())}, indent=2)
        )
        os.replace(tmp_keys, known)
        items = client.poll(subscription, after=after, timeout=wait, limit=1000)
        for item in items:
            size = int(client.get_model(item.model_id)["size_bytes"])
            with _transfer(item.model_id[:12], size) as bar:
                task = bar.add_task(item.model_id[:12], total=size)
                card, weights = client.fetch(
                    item.model_id, progress=lambda k, b=bar, t=task: b.advance(t, k)
                )
            verify_card(card, keys)
            Artifact(card=card, weights=weights).save(into / item.model_id)
            tmp = cursor_file.with_suffix(".tmp")
            tmp.write_text(str(item.cursor))
            os.replace(tmp, cursor_file)
            n += 1
    console.print(f"{n} model(s) pulled into {into}")


def budget_command(
    site: Annotated[str | None, typer.Argument(help="Site (default: the token's site).")] = None,
    url: UrlOpt = DEFAULT_URL,
    token: TokenOpt = "",
) -> None:
    """Show a site's privacy budget, spent ε and releases."""
    with _errors(), _client(url, token) as client:
        name = site or client.whoami()["name"]
        ledger = client.ledger(name)
    console.print(
        f"site {ledger['site']}: spent ε = {ledger['spent_epsilon']:.4g} of {ledger['epsilon_budget']:g} "
        f"at δ = {ledger['delta_budget']:g} ({len(ledger['releases'])} release(s))"
    )
    table = Table("release", "ε (alone)", "δ", "scope", "created")
    for r in ledger["releases"]:
        table.add_row(
            r["release_id"],
            f"{r['epsilon']:.4g}",
            f"{r['delta']:g}",
            ",".join(r["scope"] or ["all"]),
            r["created_at"],
        )
    console.print(table)


models_app.command("list")(models_list_command)
