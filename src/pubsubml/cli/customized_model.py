"""Using a stored customized model without writing Python: ``predict``, ``evaluate``, ``contributions``.

Each command loads the folder ``pubsubml customize`` wrote, verified
(:func:`~pubsubml.methods.pubsub.storage.reader.load_customizer`).  ``pubsubml predict`` applies
it, ``pubsubml evaluate`` scores it next to its parts alone
(:func:`~pubsubml.methods.pubsub.evaluation.score_parts`), and ``pubsubml contributions
--disclose`` prints its per-publisher contribution scores.  Nothing here releases anything:
contribution scores are only printed, never sent, and being a non-DP function of the private rows
(pfl-stacking.txt §3), they are printed only with ``--disclose``.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from pubsubml.cli.customize import _frame
from pubsubml.cli.progress import steps
from pubsubml.cli.registry.options import console, err_console
from pubsubml.cli.site import _fail, read_table

__all__ = ["NOT_DP", "contributions_command", "evaluate_command", "predict_command"]

#: Why ``pubsubml contributions`` needs ``--disclose``.
NOT_DP = (
    "contribution scores are not differentially private: they are computed without noise from "
    "the fusion fitted on your private rows, so whoever sees them learns something of those rows "
    "that no ε accounts for; pass --disclose to print them"
)


# ---- predict / evaluate ------------------------------------------------------------------
def _load(path: Path, run: Any) -> Any:
    from pubsubml.errors import PubsubmlError
    from pubsubml.methods.pubsub.storage import load_customizer

    with run.step(f"loading and verifying {path}"):
        try:
            return load_customizer(path)
        except (PubsubmlError, OSError, ValueError) as exc:
            raise _fail(f"{path}: {str(exc).splitlines()[0]}") from None


def _features(customizer: Any, frame: Any, path: Path) -> Any:
    names = [str(c) for c in customizer.feature_names_in_]
    missing = [c for c in names if c not in frame.columns]
    if missing:
        raise _fail(f"{path} lacks the columns {missing} the customized model was fitted on")
    return frame[names]


def predict_command(
    customized: Annotated[Path, typer.Argument(help="Folder written by `pubsubml customize`.")],
    data: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="CSV or Parquet.")],
    out: Annotated[
        Path | None, typer.Option(help="Write the predictions here as CSV (else print them).")
    ] = None,
    proba: Annotated[
        bool, typer.Option("--proba", help="Add a probability column per class.")
    ] = False,
    keep: Annotated[
        list[str] | None,
        typer.Option("--keep", help="Copy this input column (e.g. an id) to the output (repeat)."),
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", help="No progress bars.")] = False,
) -> None:
    """Predict with a customized model: one row per input row, in the input's order.

    Columns the model was not fitted on are ignored (copy them with --keep); a missing one is
    an error.
    """
    import pandas as pd

    from pubsubml.errors import PubsubmlError

    if out is not None and out.exists():
        raise _fail(f"{out} exists; not overwritten")
    frame = read_table(data)
    absent = [c for c in keep or [] if c not in frame.columns]
    if absent:
        raise _fail(f"--keep columns {absent} are not in {data}", 2)
    with steps(enabled=not quiet) as run:
        customizer = _load(customized, run)
        features = _features(customizer, frame, data)
        result = pd.DataFrame({c: frame[c] for c in keep or []})
        try:
            with run.step(f"predicting {len(frame)} row(s)"):
                result["prediction"] = customizer.predict(features)
                if proba and customizer.task == "classification":
                    p = customizer.predict_proba(features)
                    for j, c in enumerate(customizer.classes_):
                        result[f"proba[{c}]"] = p[:, j]
        except (PubsubmlError, ValueError) as exc:
            raise _fail(str(exc).splitlines()[0]) from None
    if out is None:
        sys.stdout.write(result.to_csv(index=False))  # verbatim: no markup, no emoji codes
        return
    tmp = out.with_name(f".{out.name}.tmp")
    result.to_csv(tmp, index=False)
    tmp.replace(out)
    err_console.print(f"{len(result)} prediction(s) written to {escape(str(out))}")


def evaluate_command(
    customized: Annotated[Path, typer.Argument(help="Folder written by `pubsubml customize`.")],
    data: Annotated[
        Path, typer.Argument(exists=True, dir_okay=False, help="Labelled CSV or Parquet.")
    ],
    label: Annotated[
        str | None,
        typer.Option(help="The label column (default: the one the model was customized on)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the scores as JSON.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", help="No progress bars.")] = False,
) -> None:
    """Score a customized model on labelled rows, next to its parts alone.

    The own model alone and each received model alone are scored on the same rows: the
    comparison of pubsub-ml.txt §7.3 (PubSub-ML against Own).
    """
    with steps(enabled=not quiet) as run:
        customizer = _load(customized, run)
        name = label or customizer.metadata_.get("label")
        if not name:
            raise _fail("pass --label: the customized model does not record its label column", 2)
        frame, labels = _frame(data, str(name))
        features = _features(customizer, frame, data)
        with run.step(f"scoring on {len(frame)} row(s)"):
            rows = _scores(customizer, features, labels)
    if as_json:
        console.print_json(json.dumps({"rows": len(frame), "scores": rows}))
        return
    metrics = list(next(iter(rows.values())))
    table = Table("model", *metrics, title=f"{data.name}: {len(frame)} rows")
    for who, values in rows.items():
        table.add_row(who, *(_fmt(values[m]) for m in metrics))
    console.print(table)


def _fmt(value: float | None) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:.4f}"


def _scores(customizer: Any, X: Any, y: Any) -> dict[str, dict[str, float | None]]:
    """:func:`~pubsubml.methods.pubsub.evaluation.score_parts`, a failure as one error line."""
    from pubsubml.errors import PubsubmlError
    from pubsubml.methods.pubsub.evaluation import score_parts

    try:
        return score_parts(customizer, X, y)
    except (PubsubmlError, ValueError) as exc:
        raise _fail(str(exc).splitlines()[0]) from None


# ---- contributions -----------------------------------------------------------------------
def contributions_command(
    customized: Annotated[Path, typer.Argument(help="Folder written by `pubsubml customize`.")],
    disclose: Annotated[
        bool,
        typer.Option(
            "--disclose",
            help="Consent to showing the scores: a non-DP function of your private rows.",
        ),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the scores as JSON.")] = False,
) -> None:
    """Print each publisher's contribution to a customized model (a non-DP disclosure).

    The score of a model is its share of the stacked fusion: the absolute weight of its block of
    meta-features times their spread on the subscriber's rows, normalized over the candidates to
    sum to 1, the own model's share included (pfl-stacking.txt §3); the same scores as
    `pubsubml customize --contributions`.  They are computed without DP noise from a fusion
    fitted on the private rows, so the command refuses (exit 1) without --disclose.  A fusion
    stored as ONNX (--fusion linear or forest) keeps no weights to score, and is refused too.
    """
    from pubsubml.errors import PubsubmlError
    from pubsubml.methods.pubsub.contributions import contribution_rows, contribution_scores
    from pubsubml.methods.pubsub.customizer import OWN_ID

    if not disclose:
        raise _fail(NOT_DP)
    with steps(enabled=False) as run:
        customizer = _load(customized, run)
    if not hasattr(customizer.fusion_model_, "coef_"):
        raise _fail(
            f"{customized}: its {customizer.fusion_model} fusion is stored as ONNX, which keeps no "
            "weights to score the models by; only the stacked fusion (customize --fusion "
            "stacked, the default) keeps them"
        )
    try:
        scores = contribution_scores(customizer, method="coefficients")
    except (PubsubmlError, ValueError) as exc:
        raise _fail(f"{customized}: {str(exc).splitlines()[0]}") from None
    rows, publishers = contribution_rows(customizer, scores)
    if as_json:
        document = {
            "method": "coefficients",
            "differentially_private": False,
            "self_importance": scores.get(OWN_ID, 0.0),
            "publishers": publishers,
            "models": rows,
        }
        console.print_json(json.dumps(document))
        return
    _print_contributions(customized, rows, publishers, own=OWN_ID in scores)


def _print_contributions(
    customized: Path, rows: list[dict[str, Any]], publishers: dict[str, float], *, own: bool
) -> None:
    """The contribution table by model, and by publisher when one published several."""
    from pubsubml.methods.pubsub.customizer import OWN_ID

    table = Table(
        title=f"contribution scores of {escape(customized.name)} (not DP)",
        caption="own: your own model's share (self-importance)" if own else None,
    )
    table.add_column("model", no_wrap=True, min_width=32)
    table.add_column("publisher", overflow="fold")
    table.add_column("ε", justify="right")
    table.add_column("contribution", justify="right")
    for row in rows:
        if row["model_id"] == OWN_ID:
            who, eps = "(own model)", "-"
        elif row["publisher"] is None:
            who, eps = "- (not selected)", "-"
        else:
            who, eps = row["publisher"], f"{row['epsilon']:.3g}"
        table.add_row(row["model_id"], escape(who), eps, f"{row['score']:.3f}")
    console.print(table)
    if len(publishers) < sum(r["publisher"] is not None for r in rows):
        totals = Table("publisher", "contribution", title="per publisher")
        for name, value in sorted(publishers.items(), key=lambda kv: (-kv[1], kv[0])):
            totals.add_row(escape(name), f"{value:.3f}")
        console.print(totals)
