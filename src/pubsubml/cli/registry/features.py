"""``pubsubml features add|list``: the consortium's public feature dictionary.

The consortium agrees on feature names, kinds, bounds, categories and defaults before any data
moves (pubsub-ml.txt §3.2); the administrator adds them to the registry and every site reads them.
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
    fail,
)

__all__ = ["features_add_command", "features_app", "features_list_command"]

features_app = typer.Typer(help="The consortium's feature dictionary.", no_args_is_help=True)


@features_app.command("add")
def features_add_command(
    file: Annotated[
        Path,
        typer.Argument(
            help="JSON public feature definitions: a schema, a list of features, "
            '{"NAME": {definition}, ...} or one feature (README, "Feature definition files").',
            show_default=False,
        ),
    ],
    url: UrlOpt = DEFAULT_URL,
    token: AdminTokenOpt = "",
) -> None:
    """Add features to the consortium's dictionary (administrator).

    FILE is read as every command reads public feature definitions (the file that `pubsubml
    schema infer --public-bounds` takes is accepted as it is); a bad file is one error line and
    exit 2, with nothing sent.
    """
    from pubsubml.cli.feature_files import read_feature_file
    from pubsubml.errors import FeatureDefinitionError

    try:
        features = read_feature_file(file).features
    except FeatureDefinitionError as exc:
        raise fail(exc, 2) from None
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
