"""Typer commands of the registry: serve, migrate, sites, features, publish, subscribe, pull, budget.

The top-level ``pubsubml`` command mounts these (see ``docs/registry.md``): ``registry_app`` as
``pubsubml registry``, ``site_app`` as ``pubsubml site``, ``features_app`` as ``pubsubml features``,
``models_app`` as ``pubsubml models``, and the plain functions as ``pubsubml publish``,
``subscribe``, ``pull`` and ``budget``.  Client commands read the registry URL from ``--url`` or
``PUBSUBML_REGISTRY_URL`` and the token from ``--token`` or ``PUBSUBML_TOKEN``
(``PUBSUBML_ADMIN_TOKEN`` for administrator commands).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TransferSpeedColumn
from rich.table import Table

from pubsubml.errors import PubsubmlError, SchemaVersionError

__all__ = [
    "budget_command",
    "features_app",
    "models_app",
    "models_list_command",
    "publish_command",
    "pull_command",
    "registry_app",
    "site_app",
    "subscribe_command",
]

console = Console()
err_console = Console(stderr=True)

registry_app = typer.Typer(help="Run and migrate the model registry service.", no_args_is_help=True)
site_app = typer.Typer(
    help="Register and list sites (administrator); a site's data chunks (the site).",
    no_args_is_help=True,
)
features_app = typer.Typer(help="The consortium's feature dictionary.", no_args_is_help=True)
models_app = typer.Typer(help="Published models.", no_args_is_help=True)

DEFAULT_URL = "http://127.0.0.1:8000"
UrlOpt = Annotated[str, typer.Option("--url", envvar="PUBSUBML_REGISTRY_URL", help="Registry URL.")]
TokenOpt = Annotated[
    str, typer.Option("--token", envvar="PUBSUBML_TOKEN", help="Site token.", show_default=False)
]
AdminTokenOpt = Annotated[
    str,
    typer.Option("--token", envvar="PUBSUBML_ADMIN_TOKEN", help="Admin token.", show_default=False),
]
DbOpt = Annotated[
    str | None,
    typer.Option(
        "--db", help="Database URL (default: SQLite in the data folder).", show_default=False
    ),
]
DataOpt = Annotated[
    Path | None,
    typer.Option("--data-dir", help="Folder of the default SQLite file and artifact store."),
]


@contextmanager
def _errors() -> Iterator[None]:
    """Print pubsubml errors as one red line and exit with status 1."""
    try:
        yield
    except PubsubmlError as exc:
        err_console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(1) from None


def _settings(db: str | None, data_dir: Path | None, **overrides: Any) -> Any:
    from pubsubml.registry.settings import RegistrySettings

    env = dict(os.environ)
    if data_dir is not None:
        env["PUBSUBML_REGISTRY_DATA"] = str(data_dir)
    try:
        return RegistrySettings.from_env(env, database_url=db, **overrides)
    except ValueError as exc:
        err_console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from None


def _client(url: str, token: str) -> Any:
    from pubsubml.registry.client import RegistryClient

    if not token:
        err_console.print("[red]error:[/red] no token: pass --token or set PUBSUBML_TOKEN")
        raise typer.Exit(2)
    return RegistryClient(url, token)


def _transfer(description: str, total: int) -> Progress:
    return Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        console=err_console,
        transient=True,
        disable=total < 1 << 20,
    )


# ---- registry serve / migrate -----------------------------------------------------------
@registry_app.command("migrate")
def migrate_command(db: DbOpt = None, data_dir: DataOpt = None) -> None:
    """Create or upgrade the registry database schema to this version's newest revision."""
    from pubsubml.registry.database import Database
    from pubsubml.registry.migrate import upgrade

    settings = _settings(db, data_dir, dev=True)
    if settings.is_sqlite:
        path = settings.database_url.removeprefix("sqlite:///")
        if path and path != settings.database_url:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
    database = Database(settings.database_url)
    try:
        with _errors():
            revision = upgrade(database)
    finally:
        database.dispose()
    console.print(f"database at schema revision {revision}")


@registry_app.command("serve")
def serve_command(
    db: DbOpt = None,
    data_dir: DataOpt = None,
    store: Annotated[Path | None, typer.Option(help="Artifact store folder.")] = None,
    host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = 8000,
    dev: Annotated[
        bool, typer.Option("--dev", help="Development mode (random admin token).")
    ] = False,
    max_upload_mb: Annotated[float | None, typer.Option(help="Upload limit in MiB.")] = None,
    migrate: Annotated[
        bool, typer.Option("--migrate", help="Upgrade the schema before serving.")
    ] = False,
    log_level: Annotated[str, typer.Option(help="uvicorn log level.")] = "info",
) -> None:
    """Serve the registry API with uvicorn (admin token from PUBSUBML_ADMIN_TOKEN)."""
    import uvicorn

    from pubsubml.registry.app import create_app
    from pubsubml.registry.database import Database
    from pubsubml.registry.migrate import check_schema, upgrade

    limit = None if max_upload_mb is None else int(max_upload_mb * 1024 * 1024)
    settings = _settings(db, data_dir, store_dir=store, dev=dev or None, max_upload_bytes=limit)
    if dev and not os.environ.get("PUBSUBML_ADMIN_TOKEN"):
        err_console.print(f"development admin token: {settings.admin_token.get_secret_value()}")
    if settings.is_sqlite and migrate:
        Path(settings.database_url.removeprefix("sqlite:///")).parent.mkdir(
            parents=True, exist_ok=True
        )
    database = Database(settings.database_url)
    try:
        if migrate:
            upgrade(database)
        check_schema(database)
    except SchemaVersionError as exc:
        database.dispose()
        err_console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(1) from None
    app = create_app(settings, database=database)
    try:
        uvicorn.run(app, host=host, port=port, log_level=log_level, timeout_graceful_shutdown=5)
    finally:
        database.dispose()


# ---- sites ------------------------------------------------------------------------------
def _read_public_key(value: str | None) -> str | None:
    if value is None:
        return None
    path = Path(value)
    if path.is_file():
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

        from pubsubml.artifacts.signing import public_key_to_base64

        data = path.read_bytes()
        if b"PRIVATE KEY" in data:
            err_console.print("[red]error:[/red] pass the PUBLIC key, never the private key")
            raise typer.Exit(2)
        if data.lstrip().startswith(b"-----BEGIN"):
            key = serialization.load_pem_public_key(data)
            if not isinstance(key, Ed25519PublicKey):
                err_console.print("[red]error:[/red] the public key is not an Ed25519 key")
                raise typer.Exit(2)
            return public_key_to_base64(key)
        return data.decode("ascii").strip()
    return value.strip()


@site_app.command("add")
def site_add_command(
    name: Annotated[str, typer.Argument(help="Site name.")],
    epsilon: Annotated[float, typer.Option("--epsilon", help="Declared ε budget.")],
    delta: Annotated[float, typer.Option("--delta", help="Declared δ budget.")] = 1e-5,
    roles: Annotated[str, typer.Option(help="publisher, subscriber or both.")] = "both",
    public_key: Annotated[
        str | None,
        typer.Option(help="Ed25519 public key: base64 of the raw 32 bytes, or a PEM/base64 file."),
    ] = None,
    url: UrlOpt = DEFAULT_URL,
    token: AdminTokenOpt = "",
) -> None:
    """Register a site and print its token (shown only this once)."""
    with _errors(), _client(url, token) as client:
        site = client.add_site(
            name,
            roles=roles,
            public_key=_read_public_key(public_key),
            epsilon_budget=epsilon,
            delta_budget=delta,
        )
    err_console.print(f"site {site['name']!r} registered ({site['roles']}); its token, shown once:")
    console.print(site["token"])


@site_app.command("list")
def site_list_command(url: UrlOpt = DEFAULT_URL, token: TokenOpt = "") -> None:
    """List the registered sites."""
    with _errors(), _client(url, token) as client:
        sites = client.list_sites()
    table = Table("name", "roles", "ε budget", "δ budget", "key id")
    for s in sites:
        table.add_row(
            s["name"],
            s["roles"],
            f"{s['epsilon_budget']:g}",
            f"{s['delta_budget']:g}",
            (s["key_id"] or "")[:16],
        )
    console.print(table)


@site_app.command("rotate-token")
def site_rotate_token_command(
    name: Annotated[str, typer.Argument(help="Site name.")],
    expires_in_days: Annotated[
        int | None, typer.Option(help="Lifetime of the new token in days (default: none).")
    ] = None,
    url: UrlOpt = DEFAULT_URL,
    token: TokenOpt = "",
) -> None:
    """Give a site a new token (your site's token or the admin token); prints it once."""
    with _errors(), _client(url, token) as client:
        new = client.rotate_token(name, expires_in_days=expires_in_days)
    err_console.print(f"site {name!r}: new token (the old one no longer works), shown once:")
    console.print(new)


@site_app.command("revoke-token")
def site_revoke_token_command(
    name: Annotated[str, typer.Argument(help="Site name.")],
    url: UrlOpt = DEFAULT_URL,
    token: TokenOpt = "",
) -> None:
    """Revoke a site's token until the administrator rotates it."""
    with _errors(), _client(url, token) as client:
        site = client.revoke_token(name)
    console.print(f"site {name!r}: token revoked at {site['token_revoked_at']}")


@site_app.command("scopes")
def site_scopes_command(
    name: Annotated[str, typer.Argument(help="Your site's name.")],
    labels: Annotated[
        list[str] | None, typer.Argument(help="Chunk labels to register (none: list them).")
    ] = None,
    url: UrlOpt = DEFAULT_URL,
    token: TokenOpt = "",
) -> None:
    """Declare disjoint data chunks a release may name as its scope (with your site's token), or
    list the registered ones.  Registering states that no record is in two chunks."""
    with _errors(), _client(url, token) as client:
        new = client.register_scopes(name, labels) if labels else []
        registered = client.scopes(name)
    if labels:
        err_console.print(f"{len(new)} new of {len(dict.fromkeys(labels))} label(s) registered")
    for label in registered:
        console.print(label)


# ---- features ---------------------------------------------------------------------------
@features_app.command("add")
def features_add_command(
    file: Annotated[Path, typer.Argument(help="JSON: a FeatureSchema, a list of features or one.")],
    url: UrlOpt = DEFAULT_URL,
    token: AdminTokenOpt = "",
) -> None:
    """Add features to the consortium's dictionary (administrator)."""
    from pubsubml.schema import Feature

    raw = json.loads(file.read_text())
    items = raw["features"] if isinstance(raw, dict) and "features" in raw else raw
    items = items if isinstance(items, list) else [items]
    try:
        features = [Feature.model_validate(f) for f in items]
    except ValueError as exc:
        err_console.print(f"[red]error:[/red] invalid feature in {file}: {exc}")
        raise typer.Exit(2) from None
    with _errors(), _client(url, token) as client:
        added = client.add_features(features)
    console.print(f"{len(added)} feature(s) added, {len(features) - len(added)} already present")


@features_app.command("list")
def features_list_command(url: UrlOpt = DEFAULT_URL, token: TokenOpt = "") -> None:
    """Show the feature dictionary."""
    with _errors(), _client(url, token) as client:
        features = client.list_features()
    table = Table("name", "kind", "bounds / categories", "default")
    for f in features:
        span = (
            f"[{f.lower:g}, {f.upper:g}]"
            if f.kind == "numeric"
            else ", ".join(map(str, f.categories or ()))
        )
        table.add_row(f.name, f.kind, span, str(f.default))
    console.print(table)


# ---- publish / subscribe / models / pull / budget ---------------------------------------
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
        artifact = load_artifact(card_dir)
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
    channel: Annotated[str, typer.Argument(help="Channel, e.g. 'age & icu_los | wbc'.")],
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
    """Subscribe to a channel F1 ∨ … ∨ Fk; prints the subscription id."""
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
    """Download the subscription's new models; resumes from the cursor kept in DIR/.cursor."""
    from pubsubml.artifacts.export import Artifact
    from pubsubml.artifacts.signing import verify_card

    into.mkdir(parents=True, exist_ok=True)
    cursor_file = into / ".cursor"
    after = int(cursor_file.read_text().strip() or 0) if cursor_file.exists() else 0
    n = 0
    with _errors(), _client(url, token) as client:
        keys = client.trusted_keys()
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
