"""What the registry's command groups share: consoles, options, errors, the client, progress bars.

Client commands read the registry URL from ``--url`` or ``PUBSUBML_REGISTRY_URL`` and the token
from ``--token`` or ``PUBSUBML_TOKEN`` (``PUBSUBML_ADMIN_TOKEN`` for administrator commands);
server commands take ``--db`` and ``--data-dir``.  A :class:`~pubsubml.errors.PubsubmlError`
becomes one red line and exit status 1 (pubsub-ml.txt §3: the registry that publishers and
subscribers talk to).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TransferSpeedColumn

from pubsubml.errors import PubsubmlError

__all__ = [
    "DEFAULT_URL",
    "AdminTokenOpt",
    "DataOpt",
    "DbOpt",
    "TokenOpt",
    "UrlOpt",
    "console",
    "err_console",
]

console = Console()
err_console = Console(stderr=True)

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
