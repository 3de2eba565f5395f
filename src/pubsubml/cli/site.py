"""A site's workflow without writing Python: ``keygen`` and ``schema infer|check``.

A publisher (pubsub-ml.txt §3.2, Algorithm 1 line 2) needs a signing key (``pubsubml keygen``),
the consortium's public schema for its columns (``pubsubml schema infer`` builds it from the
public bounds, never from the data; ``pubsubml schema check`` applies the rule ``train`` applies,
:mod:`pubsubml.cli.site_data`) and a DP model charged to its local privacy ledger before it
leaves the site (``pubsubml train``, :mod:`pubsubml.cli.train`).  Every refusal is one line on
standard error and a non-zero exit (1: refused, 2: bad usage), with nothing written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from pubsubml.cli import site_data
from pubsubml.cli.registry.options import console, err_console

__all__ = ["check_command", "infer_command", "keygen_command", "load_key", "schema_app"]

schema_app = typer.Typer(help="The consortium's feature schema for a site's data.")


def _fail(message: str, code: int = 1) -> typer.Exit:
    err_console.print(f"[red]error:[/red] {escape(message)}", soft_wrap=True)
    return typer.Exit(code)


def read_table(path: Path) -> Any:
    """A CSV or Parquet file as a DataFrame (``.csv``, ``.parquet``, ``.pq``); else exit 2."""
    try:
        return site_data.read_table(path)
    except ValueError as exc:
        raise _fail(str(exc), 2) from None


def _read_features(path: Path) -> Any:
    """Public feature definitions in any shape :func:`read_feature_file` accepts; else exit 2."""
    from pubsubml.cli.feature_files import read_feature_file
    from pubsubml.errors import FeatureDefinitionError

    try:
        return read_feature_file(path)
    except FeatureDefinitionError as exc:
        raise _fail(str(exc), 2) from None


def _columns(frame: Any, label: str | None) -> list[str]:
    if label is not None and label not in frame.columns:
        raise _fail(f"the label column {label!r} is not in the data")
    return [str(c) for c in frame.columns if c != label]


ExtendOpt = Annotated[
    bool,
    typer.Option(
        "--extend-schema",
        help="Fill the schema features the data lacks with their public defaults (the card "
        "records them); by default a missing feature is an error.",
    ),
]
StrictOpt = Annotated[
    bool,
    typer.Option("--strict", help="Refuse values outside the public bounds instead of clipping."),
]


@schema_app.command("infer")
def infer_command(
    data: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="CSV or Parquet.")],
    public_bounds: Annotated[
        Path,
        typer.Option(
            "--public-bounds",
            exists=True,
            dir_okay=False,
            help="The consortium's public feature definitions (JSON; the formats are in the "
            'README, "Feature definition files").',
        ),
    ],
    label: Annotated[str | None, typer.Option(help="The label column (not a feature).")] = None,
    out: Annotated[Path | None, typer.Option(help="Write the schema here (else print).")] = None,
) -> None:
    """The schema of this site's columns, taken from the public bounds (never from the data).

    Only the column names are read from the data: bounds, categories and defaults come from the
    public definitions, and a column without one is refused.
    """
    public = _read_features(public_bounds)
    columns = _columns(read_table(data), label)
    unknown = [c for c in columns if c not in public.names]
    if unknown:
        raise _fail(f"no public definition for columns {unknown} in {public_bounds}")
    text = public.subset(columns).to_json()
    if out is None:
        console.print_json(text)
        return
    if out.exists():
        raise _fail(f"{out} exists; not overwritten")
    out.write_text(text)
    console.print(f"schema of {len(columns)} feature(s) written to {out}")


@schema_app.command("check")
def check_command(
    data: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="CSV or Parquet.")],
    schema: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="Schema JSON.")],
    label: Annotated[str | None, typer.Option(help="The label column (not a feature).")] = None,
    extend_schema: ExtendOpt = False,
    strict: StrictOpt = False,
) -> None:
    """Check the data against the schema by the rule ``train`` applies (same messages).

    Exit 0 when ``train`` would accept the data: every column a schema feature with numbers or
    known categories, and every schema feature present (or ``--extend-schema``).  Values outside
    the public bounds are reported and clipped in training (refused with ``--strict``).  Exit 1
    otherwise, with one line per problem.
    """
    report = site_data.fit_report(
        _read_features(schema), read_table(data), label, extend=extend_schema, strict=strict
    )
    for line in report.notes:
        console.print(f"note: {line}", soft_wrap=True)
    for line in report.errors:
        err_console.print(f"[red]error:[/red] {escape(line)}", soft_wrap=True)
    if report.errors:
        raise typer.Exit(1)
    console.print(f"ok: {len(report.columns)} column(s) fit the schema (train accepts this data)")


def keygen_command(
    out: Annotated[Path, typer.Option(help="The private key file (PEM, mode 0600).")] = Path(
        "site.key"
    ),
) -> None:
    """Create an Ed25519 key pair: the private key at OUT, the public key at OUT.pub.

    The public key (base64) is what the registry's administrator registers with the site
    (``pubsubml site add NAME --public-key OUT.pub``); the private key signs the site's cards and
    never leaves it.  Existing files are never overwritten.
    """
    from pubsubml.artifacts.signing import (
        generate_signing_key,
        public_key_to_base64,
        save_private_key,
    )

    public = out.with_name(out.name + ".pub")
    for path in (out, public):
        if path.exists():
            raise _fail(f"{path} exists; not overwritten")
    key = generate_signing_key()
    save_private_key(key, out)
    public.write_text(public_key_to_base64(key.public_key()) + "\n")
    console.print(f"private key: {out}\npublic key:  {public}")


def given_classes(given: list[str], labels: Any) -> list[Any]:
    """``--class`` values as labels of the data's type: ints for integer labels, else strings."""
    if labels.dtype.kind in "iu":
        try:
            return [int(c) for c in given]
        except ValueError:
            raise _fail(f"integer labels, but --class values {given}", 2) from None
    return list(given)


def load_key(path: Path) -> Any:
    """The site's Ed25519 private key at ``path``; a public key or a bad file is one error line."""
    from pubsubml.artifacts.signing import load_private_key
    from pubsubml.errors import SignatureError

    try:
        if b"PRIVATE KEY" not in path.read_bytes():
            raise _fail(f"{path} is not a private key (PEM): pass the site's KEY, not KEY.pub", 2)
        return load_private_key(path)
    except (OSError, SignatureError, ValueError) as exc:
        raise _fail(str(exc)) from None
