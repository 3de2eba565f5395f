"""``pubsubml train``: a DP model charged to the site's ledger file, then written as a signed artifact.

A publisher's release (pubsub-ml.txt §3.2, Algorithm 1 line 2) in an order a crash cannot break:

1. everything that needs no training is checked first: the options, the data against the schema
   (the rule of :mod:`pubsubml.cli.site_data`), the output folder, the signing key (and, with
   ``--registry``, that it is the key the registry holds for the site);
2. the site's ledger file is locked (an exclusive lock held to the end, so concurrent runs take
   turns) and the planned run's ε, which follows from public inputs (rows, target ε, width), is
   checked against the budget before any training;
3. the model is trained, with DP noise from a secure source nobody can regenerate
   (:mod:`pubsubml.privacy.noise`; ``--seed`` seeds only the initial weights);
4. the release is charged and the ledger saved (atomic rename, fsync); only then is the artifact
   written (atomically too).  A crash anywhere leaves a ledger that shows at least what was
   written.

Every refusal is one line on standard error with exit status 1 (a refused operation) or 2 (bad
usage), and nothing written.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from pubsubml.cli import site_data
from pubsubml.cli.progress import steps
from pubsubml.cli.registry.options import console, err_console
from pubsubml.cli.site import (
    ExtendOpt,
    StrictOpt,
    _fail,
    _read_features,
    given_classes,
    load_key,
    read_table,
)

__all__ = ["LEARNER_ALIASES", "train_command"]

#: ``--learner`` short names per task, besides the catalog's DP learners.
LEARNER_ALIASES: dict[str, dict[str, str]] = {
    "dp_mlp": {"classification": "dp_mlp_classifier", "regression": "dp_mlp_regressor"},
    "dp_linear": {"classification": "dp_sgd_logistic", "regression": "dp_sgd_linear"},
    "dp_naive_bayes": {"classification": "dp_gaussian_nb"},
}


def accepted_learners(task: str) -> list[str]:
    """The ``--learner`` names ``train`` accepts for ``task``: short names, then DP learners."""
    from pubsubml.learners.catalog import available_learners

    short = [name for name, tasks in LEARNER_ALIASES.items() if task in tasks]
    return short + available_learners(task=task, private=True)  # type: ignore[arg-type]


def _learner(name: str, task: str, params: dict[str, Any]) -> Any:
    """The catalog's DP learner ``name`` for ``task``, built with the parameters it has.

    Every learner names its privacy target ``epsilon`` (and ``delta`` where it is (ε, δ)-DP);
    which of ``params`` apply is read from the estimator's own ``get_params()``.
    """
    from pubsubml.learners.catalog import get_learner_spec

    accepted = accepted_learners(task)
    if name not in accepted:
        raise _fail(f"unknown learner {name!r} for {task}: train accepts {', '.join(accepted)}", 2)
    spec = get_learner_spec(LEARNER_ALIASES.get(name, {}).get(task, name))
    try:
        has = spec.factory().get_params(deep=False)
        kwargs = {key: value for key, value in params.items() if key in has and value is not None}
        return spec.factory(**kwargs)
    except (TypeError, ValueError) as exc:
        raise _fail(f"{name}: {exc}", 2) from None


def _public_classes(classes: list[str] | None, labels: Any) -> list[Any]:
    if not classes:
        raise _fail("a classification model needs its public classes: pass --class per class", 2)
    return given_classes(classes, labels)


def _labels(labels: Any, classes: list[Any] | None) -> Any:
    if classes is None:
        return labels.to_numpy(dtype=float)
    return labels.to_numpy() if labels.dtype.kind in "iu" else labels.astype(str).to_numpy()


def _check_out(out: Path) -> None:
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise _fail(f"{out} is not an empty folder; not overwritten")
    parent = next((p for p in (out, *out.parents) if p.exists()), Path("."))
    if not os.access(parent, os.W_OK | os.X_OK):
        raise _fail(f"cannot write into {parent}")


def _check_registered_key(url: str, token: str | None, site: str, signing_key: Any) -> None:
    """Refuse a signing key that is not the one the registry holds for ``site``."""
    from pubsubml.artifacts.signing import key_id
    from pubsubml.errors import PubsubmlError
    from pubsubml.registry.client import RegistryClient

    if not token:
        raise _fail("--registry needs the site's token: pass --token or set PUBSUBML_TOKEN", 2)
    try:
        with RegistryClient(url, token) as client:
            sites = {s["name"]: s for s in client.list_sites()}
    except PubsubmlError as exc:
        raise _fail(str(exc)) from None
    registered = sites.get(site, {}).get("key_id")
    if site not in sites:
        raise _fail(f"site {site!r} is not registered at {url}")
    if registered != key_id(signing_key.public_key()):
        raise _fail(
            f"the signing key is not the one {url} holds for site {site!r} "
            f"(key {key_id(signing_key.public_key())[:16]}…, registered "
            f"{str(registered)[:16]}…): the registry would refuse the model; nothing was trained"
        )


# The options of `pubsubml train`, declared once.
_DataOpt = Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="CSV or Parquet.")]
_SchemaOpt = Annotated[
    Path, typer.Option(exists=True, dir_okay=False, help="Schema or bounds JSON.")
]
_LabelOpt = Annotated[str, typer.Option(help="The label column.")]
_KeyOpt = Annotated[Path, typer.Option(exists=True, dir_okay=False, help="Private key (PEM).")]
_OutOpt = Annotated[Path, typer.Option(help="Folder for the signed artifact (new or empty).")]
_LearnerOpt = Annotated[
    str,
    typer.Option(
        help="dp_mlp, dp_linear, dp_naive_bayes (short names) or a DP learner of the "
        "registry: dp_logistic_regression, dp_random_forest, dp_gaussian_nb, "
        "dp_mlp_classifier, dp_sgd_logistic, dp_mlp_regressor, dp_sgd_linear."
    ),
]
_TaskOpt = Annotated[str, typer.Option(help="classification or regression.")]
_ClassesOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--class",
        help="A public class label (repeat); required for classification.",
        show_default=False,
    ),
]
_TargetBoundsOpt = Annotated[
    tuple[float, float] | None,
    typer.Option(help="Public bounds of a regression target: LOWER UPPER."),
]
_EpsilonOpt = Annotated[float, typer.Option(help="ε of this model.")]
_DeltaOpt = Annotated[float, typer.Option(help="δ (the consortium's).")]
_LedgerOpt = Annotated[Path, typer.Option(help="The site's privacy ledger.")]
_SiteOpt = Annotated[str | None, typer.Option(help="Site name (to create the ledger).")]
_BudgetOpt = Annotated[float | None, typer.Option(help="ε budget (to create the ledger).")]
_SeedOpt = Annotated[
    int | None,
    typer.Option(
        help="Seed of the initial weights only; the DP noise always comes from a secure "
        "source nobody can regenerate.",
        show_default=False,
    ),
]
_RegistryOpt = Annotated[
    str | None,
    typer.Option(
        "--registry",
        help="Check before training that KEY is the key this registry holds for the site.",
        show_default=False,
    ),
]
_TokenOpt = Annotated[
    str | None,
    typer.Option(envvar="PUBSUBML_TOKEN", help="Site token (with --registry).", show_default=False),
]
_QuietOpt = Annotated[bool, typer.Option("--quiet", help="No progress bars.")]


def train_command(
    data: _DataOpt,
    schema: _SchemaOpt,
    label: _LabelOpt,
    key: _KeyOpt,
    out: _OutOpt,
    learner: _LearnerOpt = "dp_mlp",
    task: _TaskOpt = "classification",
    classes: _ClassesOpt = None,
    target_bounds: _TargetBoundsOpt = None,
    epsilon: _EpsilonOpt = 1.0,
    delta: _DeltaOpt = 1e-5,
    ledger: _LedgerOpt = Path("ledger.json"),
    site: _SiteOpt = None,
    budget: _BudgetOpt = None,
    seed: _SeedOpt = None,
    extend_schema: ExtendOpt = False,
    strict: StrictOpt = False,
    registry: _RegistryOpt = None,
    token: _TokenOpt = None,
    quiet: _QuietOpt = False,
) -> None:
    """Train a DP model, charge it to the site's ledger, and write its signed artifact.

    Checks come first (data against the schema, output folder, key, budget for the planned ε);
    then training (secure DP noise), the charge saved to the ledger file, and last the artifact.
    The card lists the features the model was trained on (``--extend-schema``: the schema's
    others too, at their public defaults, and says so); the card printed at the end holds σ, the
    steps and ε by the PLD and RDP accountants.
    """
    if task not in ("classification", "regression"):
        raise _fail(f"--task must be classification or regression, got {task!r}", 2)
    if learner not in accepted_learners(task):
        _learner(learner, task, {})  # the one-line refusal naming what train accepts
    public = _read_features(schema)
    frame = read_table(data)
    report = site_data.fit_report(public, frame, label, extend=extend_schema, strict=strict)
    if report.errors:
        more = len(report.errors) - 1
        tail = f" ({more} more: pubsubml schema check lists them)" if more else ""
        raise _fail(f"the data does not fit {schema}: {report.errors[0]}{tail}")
    labels = frame[label]
    params: dict[str, Any] = {
        "schema": public if extend_schema else public.subset(report.columns),
        "classes": _public_classes(classes, labels) if task == "classification" else None,
        "epsilon": epsilon,
        "delta": delta,
        "target_bounds": target_bounds,
        "random_state": seed,
    }
    model = _learner(learner, task, params)
    _check_out(out)
    if not ledger.exists() and (site is None or budget is None):
        raise _fail(f"{ledger} does not exist: pass --site and --budget to create it", 2)
    run = _TrainingRun(
        model=model,
        X=frame[report.columns],
        y=_labels(labels, params["classes"]),
        schema=params["schema"],
        signing_key=load_key(key),
        notes=list(report.notes),
        description=f"training {learner} on {len(frame)} rows",
    )
    card, book = _charge_and_release(
        run,
        ledger,
        out,
        site=site,
        budget=budget,
        delta=delta,
        registry=registry,
        token=token,
        quiet=quiet,
    )
    _print_card(card, book)


@dataclass(frozen=True)
class _TrainingRun:
    """A checked learner with its rows, ready to be planned, charged, trained and released."""

    model: Any
    X: Any
    y: Any
    schema: Any
    signing_key: Any
    notes: list[str]
    description: str


def _charge_and_release(
    run: _TrainingRun,
    ledger: Path,
    out: Path,
    *,
    site: str | None,
    budget: float | None,
    delta: float,
    registry: str | None,
    token: str | None,
    quiet: bool,
) -> tuple[Any, Any]:
    """Under the ledger file's lock: refuse a release over budget, train, charge, then write.

    Returns the artifact's card and the ledger as charged.  Nothing is trained, charged or
    written when a check fails (the ledger is saved by ``Site.release_to`` before the artifact).
    """
    from pubsubml.errors import PrivacyBudgetExceededError, PubsubmlError
    from pubsubml.privacy.ledger import PrivacyLedger
    from pubsubml.privacy.ledger_file import LedgerFile
    from pubsubml.sites import Site

    def new_ledger() -> PrivacyLedger:
        if site is None or budget is None:  # the file went away since the caller's check
            raise _fail(f"{ledger} does not exist: pass --site and --budget to create it", 2)
        return PrivacyLedger(site=site, epsilon_budget=budget, delta=delta)

    book_file = LedgerFile(ledger)
    try:
        with book_file.locked(create=new_ledger) as book:
            if site is not None and site != book.site:
                raise _fail(f"{ledger} is the ledger of site {book.site!r}, not {site!r}")
            if registry is not None:
                _check_registered_key(registry, token, book.site, run.signing_key)
            _check_budget(book, run)
            for line in run.notes:  # every check passed: what training will do to the data
                err_console.print(f"note: {line}", soft_wrap=True)
            with steps(enabled=not quiet) as progress:
                with progress.step(run.description):
                    run.model.fit(run.X, run.y)
                with progress.step(f"charging {ledger}, then writing {out}"):
                    the_site = Site(book.site, run.schema, book, signing_key=run.signing_key)
                    artifact = the_site.release_to(run.model, out, persist=book_file.save)
    except PrivacyBudgetExceededError as exc:
        raise _fail(str(exc)) from None
    except (PubsubmlError, ValueError) as exc:
        raise _fail(str(exc).splitlines()[0]) from None
    return artifact.card, book


def _check_budget(book: Any, run: _TrainingRun) -> None:
    """Refuse, before training, a release whose planned events would exceed the site's budget."""
    from pubsubml.privacy.ledger import Release

    planned = Release(
        release_id=f"planned-{uuid.uuid4().hex}",
        events=tuple(run.model.planned_privacy_events(len(run.X), run.X.shape[1])),
    )
    would = book.epsilon_if_charged(planned)
    if would > book.epsilon_budget:
        left = max(book.epsilon_budget - book.spent_epsilon(), 0.0)
        raise _fail(
            f"training would bring site {book.site!r} to ε={would:.6g} at δ={book.delta:g},"
            f" above its budget ε={book.epsilon_budget:g} (remaining ε {left:.6g}); "
            "nothing was trained, charged or written"
        )


def _print_card(card: Any, book: Any) -> None:
    from pubsubml.privacy.accountants import compute_epsilon

    privacy = card.privacy
    events = list(privacy.events)
    sigma = ", ".join(f"{e.noise_multiplier:.3f}" for e in events if e.noise_multiplier)
    n_steps = sum(int(e.count or 1) for e in events)
    rdp = compute_epsilon(events, privacy.delta, backend="rdp") if privacy.delta else None
    label = {"pld": "PLD", "rdp": "RDP", "pure": "pure ε-DP"}.get(str(privacy.accountant), "")
    console.print(f"model {card.model_id} by {card.publisher} ({card.format})")
    console.print(f"  features: {', '.join(card.trained_features)}", soft_wrap=True)
    if card.defaulted_features:
        console.print(
            f"  at their public defaults: {', '.join(card.defaulted_features)}", soft_wrap=True
        )
    console.print(
        f"  σ {sigma or '-'}, steps {n_steps}, ε {privacy.epsilon:.4f} ({label})"
        + (f", {rdp:.4f} (RDP)" if rdp is not None else "")
        + f" at δ {privacy.delta:g}, noise {privacy.noise}"
    )
    console.print(
        f"  ledger of {book.site}: spent ε {book.spent_epsilon():.4f} of {book.epsilon_budget:g}"
    )
