"""``pubsubml site ...``: registering sites, their tokens and their data chunks.

A site is a publisher, a subscriber or both, with a declared (ε, δ) budget and an Ed25519 public
key that verifies the cards it signs (pubsub-ml.txt §3.2); the administrator registers it, and a
site declares the disjoint data chunks its releases may name as their scope.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from pubsubml.cli.registry.options import (
    DEFAULT_URL,
    AdminTokenOpt,
    TokenOpt,
    UrlOpt,
    _client,
    _errors,
    console,
    err_console,
)

__all__ = [
    "site_add_command",
    "site_app",
    "site_list_command",
    "site_revoke_token_command",
    "site_rotate_token_command",
    "site_scopes_command",
]

site_app = typer.Typer(
    help="Register and list sites (administrator); a site's data chunks (the site).",
    no_args_is_help=True,
)


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
