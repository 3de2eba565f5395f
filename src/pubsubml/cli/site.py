"""A site's workflow without writing Python: ``keygen``, ``schema infer|check`` and ``train``.

A publisher (pubsub-ml.txt §3.2, Algorithm 1 line 2) needs a signing key (``pubsubml keygen``),
the consortium's public schema for its columns (``pubsubml schema infer`` builds it from the
public bounds, never from the data; ``pubsubml schema check`` reports what does not fit) and a DP
model charged to its local privacy ledger before it leaves the site (``pubsubml train``).  Every
refusal is one line on standard error and a non-zero exit, with nothing written.
"""

from __future__ import annotations

import inspect
import json
import os
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from pubsubml.cli.progress import steps
from pubsubml.cli.registry.options import console, err_console

__all__ = ["check_command", "infer_command", "keygen_command", "schema_app", "train_command"]

schema_app = typer.Typer(help="The consortium's feature schema for a site's data.")

#: ``--learner`` names: the registry's DP learners, and short names per task.
LEARNER_ALIASES: dict[str, dict[str, str]] = {
    "dp_mlp": {"classification": "dp_mlp_classifier", "regression": "dp_mlp_regressor"},
    "dp_linear": {"classification": "dp_sgd_logistic", "regression": "dp_sgd_linear"},
    "dp_naive_bayes": {"classification": "dp_gaussian_nb"},
}


def _fail(message: str, code: int = 1) -> typer.Exit:
    err_console.print(f"[red]error:[/red] {escape(message)}", soft_wrap=True)
    return typer.Exit(code)


def read_table(path: Path) -> Any:
    """A CSV or Parquet file as a DataFrame (``.csv``, ``.parquet``, ``.pq``)."""
    import pandas as pd

    suffix = path.suffix.lower()
    try:
        if suffix == ".csv":
            return pd.read_csv(path)
        if suffix in (".parquet", ".pq"):
            return pd.read_parquet(path)
    except (OSError, ValueError) as exc:
        raise _fail(f"cannot read {path}: {exc}", 2) from None
    raise _fail(f"{path}: expected a .csv or .parquet file", 2)


def _read_features(path: Path) -> Any:
    """Public feature definitions: a FeatureSchema JSON, a list of features or ``name → spec``."""
    from pubsubml.schema import Feature, FeatureSchema

    try:
        raw = json.loads(path.read_text())
        if isinstance(raw, dict) and "features" in raw:
            raw = raw["features"]
        if isinstance(raw, dict):
            raw = [{"name": name, **spec} for name, spec in raw.items()]
        return FeatureSchema(features=tuple(Feature.model_validate(f) for f in raw))
    except (OSError, UnicodeDecodeError, ValueError, TypeError) as exc:
        detail = str(exc).splitlines()[0]
        raise _fail(f"{path} holds no valid public feature definitions: {detail}", 2) from None


def _columns(frame: Any, label: str | None) -> list[str]:
    if label is not None and label not in frame.columns:
        raise _fail(f"the label column {label!r} is not in the data")
    return [str(c) for c in frame.columns if c != label]


@schema_app.command("infer")
def infer_command(
    data: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="CSV or Parquet.")],
    public_bounds: Annotated[
        Path,
        typer.Option(
            "--public-bounds",
            exists=True,
            dir_okay=False,
            help="The consortium's public feature definitions (JSON: a schema, a list of "
            'features, or {"age": {"lower": 0, "upper": 120, "default": 50}, ...}).',
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
) -> None:
    """Report the schema's features the data lacks, its extra columns and out-of-bounds values.

    Exit 0 when every column is a schema feature within its public bounds (missing features are
    reported: models fill them with the public defaults), 1 otherwise.
    """
    features = _read_features(schema)
    frame = read_table(data)
    columns = _columns(frame, label)
    problems = _frame_problems(features, frame, columns)
    missing = [n for n in features.names if n not in columns]
    if missing:
        console.print(f"missing (the public default will be used): {', '.join(missing)}")
    for line in problems:
        console.print(f"[red]{line}[/red]")
    if problems:
        raise typer.Exit(1)
    console.print(f"ok: {len(columns)} column(s) fit the schema ({len(frame)} rows)")


def _frame_problems(schema: Any, frame: Any, columns: list[str]) -> list[str]:
    """One line per extra column and per column with values outside its public domain."""
    import pandas as pd

    problems = []
    extra = [c for c in columns if c not in schema.names]
    if extra:
        problems.append(f"extra (not in the schema): {', '.join(extra)}")
    for name in (c for c in columns if c in schema.names):
        feature, values = schema[name], frame[name]
        if feature.kind == "numeric":
            numbers = pd.to_numeric(values, errors="coerce")
            bad = int((numbers.isna() & values.notna()).sum())
            out = int(((numbers < feature.lower) | (numbers > feature.upper)).sum())
            if bad:
                problems.append(f"{name}: {bad} value(s) are not numbers")
            if out:
                problems.append(
                    f"{name}: {out} value(s) outside [{feature.lower:g}, {feature.upper:g}] "
                    "(models clip them)"
                )
        else:
            allowed = {str(c) for c in feature.categories or ()}
            unknown = sorted({str(v) for v in values.dropna()} - allowed)
            if unknown:
                problems.append(f"{name}: unknown categories {unknown[:5]}")
    return problems


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


def _learner(
    name: str, task: str, params: dict[str, Any]
) -> Any:  # the registry's factory, with the parameters it takes
    from pubsubml.errors import UnknownLearnerError
    from pubsubml.learners.registry import get_learner_spec

    resolved = LEARNER_ALIASES.get(name, {}).get(task, name)
    try:
        spec = get_learner_spec(resolved)
    except UnknownLearnerError as exc:
        raise _fail(str(exc), 2) from None
    if not spec.private or spec.task != task:
        raise _fail(f"{name!r} is not a DP {task} learner", 2)
    accepted = inspect.signature(spec.factory).parameters
    renames = {"epsilon": "target_epsilon", "delta": "target_delta"}
    kwargs = {}
    for key, value in params.items():
        target = key if key in accepted else renames.get(key, key)
        if target in accepted and value is not None:
            kwargs[target] = value
    return spec.factory(**kwargs)


def _ledger(path: Path, site: str | None, budget: float | None, delta: float) -> Any:
    from pubsubml.privacy.ledger import PrivacyLedger

    if path.exists():
        ledger = PrivacyLedger.from_json(path.read_bytes())
        if site is not None and site != ledger.site:
            raise _fail(f"{path} is the ledger of site {ledger.site!r}, not {site!r}")
        return ledger
    if site is None or budget is None:
        raise _fail(f"{path} does not exist: pass --site and --budget to create it", 2)
    return PrivacyLedger(site=site, epsilon_budget=budget, delta=delta)


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def train_command(
    data: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="CSV or Parquet.")],
    schema: Annotated[Path, typer.Option(exists=True, dir_okay=False, help="Schema JSON.")],
    label: Annotated[str, typer.Option(help="The label column.")],
    key: Annotated[Path, typer.Option(exists=True, dir_okay=False, help="Private key (PEM).")],
    out: Annotated[Path, typer.Option(help="Folder for the signed artifact.")],
    learner: Annotated[
        str,
        typer.Option(
            help="dp_mlp, dp_linear, dp_logistic_regression, dp_naive_bayes, "
            "dp_random_forest, or a registered DP learner."
        ),
    ] = "dp_mlp",
    task: Annotated[str, typer.Option(help="classification or regression.")] = "classification",
    classes: Annotated[
        list[str] | None, typer.Option("--class", help="A public class label (repeat).")
    ] = None,
    target_bounds: Annotated[
        tuple[float, float] | None,
        typer.Option(help="Public bounds of a regression target: LOWER UPPER."),
    ] = None,
    epsilon: Annotated[float, typer.Option(help="ε of this model.")] = 1.0,
    delta: Annotated[float, typer.Option(help="δ (the consortium's).")] = 1e-5,
    ledger: Annotated[Path, typer.Option(help="The site's privacy ledger.")] = Path("ledger.json"),
    site: Annotated[str | None, typer.Option(help="Site name (to create the ledger).")] = None,
    budget: Annotated[float | None, typer.Option(help="ε budget (to create the ledger).")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the training run.")] = 0,
    quiet: Annotated[bool, typer.Option("--quiet", help="No progress bars.")] = False,
) -> None:
    """Train a DP model, charge it to the site's ledger, and write its signed artifact.

    The DP events the training ran are charged to the ledger file before the artifact is
    written (refused, with the spent and remaining ε, when they would exceed the budget); the
    card printed at the end holds σ, the steps and ε by the PLD and RDP accountants.
    """
    from pubsubml.errors import PrivacyBudgetExceededError, PubsubmlError
    from pubsubml.sites import Site

    if out.exists() and any(out.iterdir()):
        raise _fail(f"{out} is not empty; not overwritten")
    public = _read_features(schema)
    frame = read_table(data)
    columns = _columns(frame, label)
    problems = _frame_problems(public, frame, columns)
    if any(p.startswith("extra") or "not numbers" in p or "unknown" in p for p in problems):
        raise _fail(f"the data does not fit {schema}: {problems[0]}")
    book = _ledger(ledger, site, budget, delta)
    signing_key = load_key(key)
    params: dict[str, Any] = {
        "schema": public,
        "classes": _public_classes(classes, frame[label]) if task == "classification" else None,
        "epsilon": epsilon,
        "delta": delta,
        "target_bounds": target_bounds,
        "random_state": seed,
    }
    model = _learner(learner, task, params)
    try:
        with steps(enabled=not quiet) as run:
            with run.step(f"training {learner} on {len(frame)} rows"):
                model.fit(frame[columns], _labels(frame[label], params["classes"]))
            with run.step(f"charging the ledger and writing {out}"):
                the_site = Site(book.site, public, book, signing_key=signing_key)
                artifact = the_site.release_to(model, out)
    except PrivacyBudgetExceededError as exc:
        left = max(book.epsilon_budget - book.spent_epsilon(), 0.0)
        raise _fail(f"{exc} (remaining ε {left:.6g})") from None
    except PubsubmlError as exc:
        raise _fail(str(exc)) from None
    _write_atomic(ledger, book.to_json())
    _print_card(artifact.card, book)


def _public_classes(classes: list[str] | None, labels: Any) -> list[Any]:
    if not classes:
        raise _fail("a classification model needs its public classes: pass --class per class", 2)
    if labels.dtype.kind in "iu":
        try:
            return [int(c) for c in classes]
        except ValueError:
            raise _fail(f"integer labels, but --class values {classes}", 2) from None
    return list(classes)


def _labels(labels: Any, classes: list[Any] | None) -> Any:
    if classes is None:
        return labels.to_numpy(dtype=float)
    return labels.to_numpy() if labels.dtype.kind in "iu" else labels.astype(str).to_numpy()


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


def _print_card(card: Any, book: Any) -> None:
    from pubsubml.privacy.accountant import compute_epsilon

    privacy = card.privacy
    events = list(privacy.events)
    sigma = ", ".join(f"{e.noise_multiplier:.3f}" for e in events if e.noise_multiplier)
    steps = sum(int(e.count or 1) for e in events)
    rdp = compute_epsilon(events, privacy.delta, backend="rdp") if privacy.delta else None
    console.print(f"model {card.model_id} by {card.publisher} ({card.format})")
    console.print(
        f"  σ {sigma or '-'}, steps {steps}, ε {privacy.epsilon:.4f} (PLD)"
        + (f", {rdp:.4f} (RDP)" if rdp is not None else "")
        + f" at δ {privacy.delta:g}"
    )
    console.print(
        f"  ledger of {book.site}: spent ε {book.spent_epsilon():.4f} of {book.epsilon_budget:g}"
    )
