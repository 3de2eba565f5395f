"""What the registry's command groups share: consoles, options, errors, the client, progress bars.

Client commands read the registry URL from ``--url`` or ``PUBSUBML_REGISTRY_URL`` and the token
from ``--token`` or ``PUBSUBML_TOKEN`` (``PUBSUBML_ADMIN_TOKEN`` for administrator commands);
server commands take ``--db`` and ``--data-dir``.  A :class:`~pubsubml.errors.PubsubmlError`
becomes one red line and exit status 1, a registry that does not answer among them (with how to
start or wait for it); bad usage exits with status 2 (pubsub-ml.txt §3: the registry that
publishers and subscribers talk to).  The consoles leave long lines whole when they do not write
to a terminal, so that a script reading an error finds it on one line.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, DownloadColumn, Progress, TransferSpeedColumn

from pubsubml.errors import PubsubmlError, RegistryUnreachableError

__all__ = [
    "DEFAULT_URL",
    "AdminTokenOpt",
    "CommandConsole",
    "DataOpt",
    "DbOpt",
    "TokenOpt",
    "UrlOpt",
    "console",
    "err_console",
    "fail",
    "one_line",
]


class CommandConsole(Console):
    """A rich :class:`~rich.console.Console` that wraps long lines only on a terminal.

    Written to a pipe or a file, rich takes the width to be 80 columns (or ``COLUMNS``) and would
    break a long line, an error message or a path, into several.  Here ``print`` soft-wraps
    whenever the output is not a terminal: text lines stay whole, while tables are still laid out
    within the console's width.  The test is made at each ``print`` (the console follows
    ``sys.stdout`` and ``sys.stderr`` as they are replaced).

    Examples
    --------
    >>> import io
    >>> out = CommandConsole(file=io.StringIO())
    >>> out.soft_wrap
    True
    >>> out.print("x" * 120)
    >>> len(out.file.getvalue().splitlines())
    1
    """

    @property  # type: ignore[override]
    def soft_wrap(self) -> bool:
        """Soft-wrap (leave lines whole): asked for, or the output is not a terminal."""
        return self._soft_wrap or not self.is_terminal

    @soft_wrap.setter
    def soft_wrap(self, value: bool) -> None:
        self._soft_wrap = bool(value)


console = CommandConsole()
err_console = CommandConsole(stderr=True)


def one_line(text: object) -> str:
    r"""``text`` as one line of plain text for the consoles: whitespace runs (newlines included)
    become one space, and rich markup is escaped.

    Examples
    --------
    >>> one_line("HTTP 422: bad\n  [value]")
    'HTTP 422: bad \\[value]'
    """
    return escape(" ".join(str(text).split()))


def fail(message: object, code: int = 1) -> typer.Exit:
    """Print ``error: MESSAGE`` as one line on standard error; return the exit to raise.

    Parameters
    ----------
    message : object
        What went wrong (its ``str``; markup is escaped and line breaks become spaces).
    code : int, default=1
        1 for a refused operation, 2 for bad usage.

    Returns
    -------
    typer.Exit
        ``raise fail(...) from None``.
    """
    err_console.print(f"[red]error:[/red] {one_line(message)}")
    return typer.Exit(code)


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


def _unreachable_hint(exc: RegistryUnreachableError) -> str:
    """How to start, or wait for, a registry that no connection reached."""
    if exc.sent:
        return ""
    url = exc.url or DEFAULT_URL
    wait = "pubsubml registry wait" + ("" if url == DEFAULT_URL else f" --url {url}")
    return f'; start it with "pubsubml registry serve" or wait for it with "{wait}"'


@contextmanager
def _errors() -> Iterator[None]:
    """Print pubsubml errors as one red line and exit with status 1."""
    try:
        yield
    except RegistryUnreachableError as exc:
        raise fail(f"{exc}{_unreachable_hint(exc)}") from None
    except PubsubmlError as exc:
        raise fail(exc) from None


def _settings(db: str | None, data_dir: Path | None, **overrides: Any) -> Any:
    from pubsubml.registry.settings import RegistrySettings

    env = dict(os.environ)
    if data_dir is not None:
        env["PUBSUBML_REGISTRY_DATA"] = str(data_dir)
    try:
        return RegistrySettings.from_env(env, database_url=db, **overrides)
    except ValueError as exc:
        raise fail(_validation_message(exc), 2) from None


def _validation_message(exc: ValueError) -> str:
    """A settings error as one line (pydantic's "Value error, " prefix and its URL left out)."""
    errors = getattr(exc, "errors", None)
    if callable(errors):
        try:
            first = errors()[0]
        except (IndexError, TypeError):
            return str(exc)
        message = str(first.get("msg", exc)).removeprefix("Value error, ")
        where = ".".join(str(part) for part in first.get("loc", ()))
        return message if not where else f"{where}: {message}"
    return str(exc)


def _client(url: str, token: str) -> Any:
    """A :class:`~pubsubml.registry.client.RegistryClient`; exit 2 without a token or with a URL
    that is not ``http(s)://HOST[:PORT]``."""
    import httpx

    from pubsubml.registry.client import RegistryClient

    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError) as exc:
        raise fail(f"--url {url!r} is not a URL: {exc}", 2) from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise fail(f"--url {url!r}: the registry URL is http://HOST:PORT or https://HOST", 2)
    if not token:
        raise fail("no token: pass --token or set PUBSUBML_TOKEN", 2)
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
