"""A subscriber's workflow without writing Python: ``customize``, ``predict`` and ``evaluate``.

``pubsubml customize`` runs CUSTOMIZE (pubsub-ml.txt §4, Algorithm 2) on the subscriber's private
rows and the models in an inbox folder (one artifact per sub-folder, as ``pubsubml pull`` or
``pubsubml train`` write them), every card verified against trusted keys, and stores the
customized model without pickle (:func:`~pubsubml.methods.pubsub.saved.save_customizer`).
``pubsubml predict`` and ``pubsubml evaluate`` load it back, verified, and use it, and
``pubsubml contributions --disclose`` prints its per-publisher contribution scores.  Nothing here
releases anything: the subscriber spends no privacy (§5, Theorem 3); contribution scores are only
printed, never sent, and being a non-DP function of the private rows (pfl-stacking.txt §3), they
are printed by ``contributions`` only with ``--disclose``.
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

from pubsubml.cli.progress import steps
from pubsubml.cli.registry.options import console, err_console
from pubsubml.cli.site import _fail, _read_features, given_classes, load_key, read_table

__all__ = [
    "contributions_command",
    "customize_command",
    "evaluate_command",
    "predict_command",
]

TRUSTED_KEYS_FILE = "trusted_keys.json"

#: Why ``pubsubml contributions`` needs ``--disclose``.
NOT_DP = (
    "contribution scores are not differentially private: they are computed without noise from "
    "the fusion fitted on your private rows, so whoever sees them learns something of those rows "
    "that no ε accounts for; pass --disclose to print them"
)


# ---- the inbox ---------------------------------------------------------------------------
def _read_keys(path: Path) -> dict[str, Any]:
    """Public keys from a ``.pub`` file (base64, as ``pubsubml keygen`` writes) or a JSON file
    mapping key ids to base64 keys (as ``pubsubml pull`` writes)."""
    from pubsubml.artifacts.signing import key_id, public_key_from_base64

    try:
        text = path.read_text().strip()
        if text.startswith("{"):
            raw = json.loads(text)
            keys = [public_key_from_base64(str(v)) for v in raw.values()]
        else:
            keys = [public_key_from_base64(text)]
    except (OSError, UnicodeDecodeError, ValueError, AttributeError) as exc:
        raise _fail(f"{path} holds no public key: {exc}", 2) from None
    return {key_id(k): k for k in keys}


def _trusted(trust: list[Path] | None, inbox: Path) -> dict[str, Any]:
    files = list(trust or [])
    if not files:
        default = inbox / TRUSTED_KEYS_FILE
        if not default.is_file():
            raise _fail(
                f"no trusted keys: pass --trust PUBLISHER.pub (repeat), or pull into {inbox} "
                f"with `pubsubml pull`, which writes {TRUSTED_KEYS_FILE}",
                2,
            )
        files = [default]
    keys: dict[str, Any] = {}
    for path in files:
        keys.update(_read_keys(path))
    return keys


def _inbox(inbox: Path, keys: dict[str, Any], task: str, run: Any) -> list[Any]:
    """The inbox's models of ``task``, each card verified against ``keys``."""
    from pubsubml.artifacts.artifact import CARD_FILE, load_artifact
    from pubsubml.errors import PubsubmlError

    if not inbox.is_dir():
        raise _fail(f"{inbox} is not a folder", 2)
    folders = sorted(p for p in inbox.iterdir() if p.is_dir() and (p / CARD_FILE).is_file())
    models, skipped = [], []
    with run.step(f"verifying {len(folders)} model(s) in {inbox}", total=len(folders)) as step:
        for folder in folders:
            try:
                model = load_artifact(folder).open(keys)
            except (PubsubmlError, OSError, ValueError) as exc:
                raise _fail(f"{folder}: {str(exc).splitlines()[0]}") from None
            if model.task == task:
                models.append(model)
            else:
                skipped.append(folder.name)
            step.advance()
    if skipped:
        err_console.print(f"skipped {len(skipped)} {_other(task)} model(s): {', '.join(skipped)}")
    # One order whatever the folders are called (an inbox by site, a pull by id): the same
    # artifacts give the same customized model.
    return sorted(models, key=lambda m: m.model_id)


def _other(task: str) -> str:
    return "regression" if task == "classification" else "classification"


def _schema(path: Path | None, models: list[Any], columns: list[str]) -> Any:
    """The public schema: ``--schema``, else the union of the received cards' schemas."""
    from pubsubml.schema import FeatureSchema

    if path is not None:
        schema = _read_features(path)
        where = str(path)
    else:
        features: dict[str, Any] = {}
        for model in models:
            for feature in model.card.input_schema.features:
                known = features.setdefault(feature.name, feature)
                if known != feature:
                    raise _fail(
                        f"the received cards define feature {feature.name!r} differently: pass "
                        "the consortium's --schema",
                        2,
                    )
        schema = FeatureSchema(features=tuple(features.values()))
        where = "the received models' cards"
    missing = [c for c in columns if c not in schema.names]
    if missing:
        raise _fail(f"no public definition of columns {missing} in {where}: pass --schema", 2)
    return schema


def _classes(given: list[str] | None, labels: Any, models: list[Any]) -> list[Any]:
    """``--class`` values, else the labels in the data and those the cards declare (public)."""
    if given:
        return given_classes(given, labels)
    found = {v.item() if hasattr(v, "item") else v for v in labels.unique()}
    for model in models:
        found.update(model.card.classes or [])
    try:
        return sorted(found)
    except TypeError:
        raise _fail(f"labels of mixed types {sorted(map(str, found))}: pass --class", 2) from None


def _frame(path: Path, label: str | None) -> tuple[Any, Any]:
    frame = read_table(path)
    if label is None:
        return frame, None
    if label not in frame.columns:
        raise _fail(f"the label column {label!r} is not in {path}")
    return frame.drop(columns=[label]), frame[label]


# ---- customize ---------------------------------------------------------------------------
def customize_command(
    data: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="CSV or Parquet.")],
    label: Annotated[str, typer.Option(help="The label column.")],
    inbox: Annotated[Path, typer.Option(help="Folder of received artifacts (one per folder).")],
    out: Annotated[Path, typer.Option(help="Folder for the customized model (new).")],
    trust: Annotated[
        list[Path] | None,
        typer.Option(
            "--trust",
            help="A publisher's public key (.pub) or a JSON map of keys (repeat); default: "
            f"INBOX/{TRUSTED_KEYS_FILE}, written by `pubsubml pull`.",
        ),
    ] = None,
    schema: Annotated[
        Path | None,
        typer.Option(help="The consortium's public schema (default: from the received cards)."),
    ] = None,
    task: Annotated[str, typer.Option(help="classification or regression.")] = "classification",
    classes: Annotated[
        list[str] | None,
        typer.Option(
            "--class",
            help="A public class label (repeat; default: the data's and the cards' labels).",
        ),
    ] = None,
    target_bounds: Annotated[
        tuple[float, float] | None,
        typer.Option(help="Public bounds of a regression target: LOWER UPPER."),
    ] = None,
    own: Annotated[
        str, typer.Option(help="The own model: auto, mlp, forest, logistic or none.")
    ] = "auto",
    fusion: Annotated[str, typer.Option(help="stacked, linear or forest.")] = "stacked",
    cv: Annotated[int, typer.Option(min=2, help="Cross-fitting folds.")] = 5,
    top_m: Annotated[
        int | None, typer.Option(min=1, help="Keep the best M candidates (default: all).")
    ] = None,
    key: Annotated[
        Path | None,
        typer.Option(exists=True, dir_okay=False, help="Sign the own model's card with this key."),
    ] = None,
    contributions: Annotated[
        bool,
        typer.Option(
            "--contributions",
            help="Print each model's contribution score (computed here, never sent).",
        ),
    ] = False,
    seed: Annotated[int, typer.Option(help="Seed of the folds and models.")] = 0,
    quiet: Annotated[bool, typer.Option("--quiet", help="No progress bars.")] = False,
) -> None:
    """Fuse the received models with your own data (CUSTOMIZE) and store the result in OUT.

    Every model in INBOX is verified against the trusted keys first (a model that does not
    verify stops the command); models of the other task are skipped.  The customized model is
    written as ONNX, safetensors and JSON (no pickle), read by `pubsubml predict` and
    `pubsubml evaluate`.  Nothing leaves the site.
    """
    from pubsubml.errors import PubsubmlError
    from pubsubml.methods.pubsub.customizer import Customizer
    from pubsubml.methods.pubsub.outputs import published_runner
    from pubsubml.methods.pubsub.saved import save_customizer

    if task not in ("classification", "regression"):
        raise _fail(f"--task must be classification or regression, got {task!r}", 2)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise _fail(f"{out} exists and is not empty; not overwritten")
    frame, labels = _frame(data, label)
    keys = _trusted(trust, inbox)
    signing_key = None if key is None else load_key(key)
    with steps(enabled=not quiet) as run:
        models = _inbox(inbox, keys, task, run)
        public = _schema(schema, models, [str(c) for c in frame.columns])
        labelset = _classes(classes, labels, models) if task == "classification" else None
        target = labels.to_numpy() if labelset is not None else labels.to_numpy(dtype=float)
        customizer = Customizer(
            models=models,
            task=task,  # type: ignore[arg-type]
            own_model=None if own == "none" else own,
            fusion_model=fusion,
            cv=cv,
            top_m=top_m,
            schema=public,
            classes=labelset,
            target_bounds=target_bounds,
            runner=published_runner,
            random_state=seed,
        )
        try:
            with run.step(f"CUSTOMIZE on {len(frame)} rows and {len(models)} model(s)"):
                customizer.fit(frame, target)
            scores = _contributions(customizer) if contributions else None
            with run.step(f"storing the customized model in {out}"):
                save_customizer(
                    customizer,
                    out,
                    trusted_keys=keys,
                    signing_key=signing_key,
                    metadata={"label": label, "data": data.name},
                )
        except (PubsubmlError, ValueError, TypeError) as exc:
            raise _fail(str(exc).splitlines()[0]) from None
    _print_summary(customizer, models, out)
    if scores is not None:
        table = Table("model", "contribution")
        for mid, value in scores.items():
            table.add_row(mid, f"{value:.3f}")
        console.print(table)


def _contributions(customizer: Any) -> dict[str, float]:
    from pubsubml.methods.pubsub.contributions import contribution_scores

    return contribution_scores(customizer)


def _print_summary(customizer: Any, models: list[Any], out: Path) -> None:
    by_id = {m.model_id: m for m in models}
    own = customizer.own_model_
    console.print(
        f"customized model written to {escape(str(out))}: {len(customizer.selected_ids_)} of "
        f"{len(customizer.candidate_ids_)} candidate(s) selected"
        + ("" if own is None else f", own model {own.choice_}")
    )
    weights = customizer.fusion_weights_
    if customizer.fallback_:
        console.print("the fusion fell back to the own model alone (no received model helped)")
    for mid in customizer.selected_ids_:
        model = by_id.get(mid)
        who = "own model" if model is None else f"{model.publisher} (ε = {model.epsilon:.3g})"
        weight = f", weight {weights[mid]:.3f}" if mid in weights else ""
        console.print(f"  {mid}: {escape(who)}{weight}")


# ---- predict / evaluate ------------------------------------------------------------------
def _load(path: Path, run: Any) -> Any:
    from pubsubml.errors import PubsubmlError
    from pubsubml.methods.pubsub.saved import load_customizer

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
    """Metrics of the customized model, the own model and each received model on (X, y)."""
    from pubsubml.errors import PubsubmlError
    from pubsubml.methods.pubsub.outputs import align_outputs

    clf = customizer.task == "classification"
    outputs: dict[str, Any] = {}
    try:
        outputs["customized"] = customizer.predict_proba(X) if clf else customizer.predict(X)
        if customizer.own_model_ is not None:
            own = customizer.own_model_
            outputs["own model alone"] = own.predict_proba(X) if clf else own.predict(X)
        classes = getattr(customizer, "classes_", None)
        for i, model in enumerate(customizer.models):
            raw = model.predict_proba(X) if clf else model.predict(X)
            aligned = align_outputs(raw, model, classes, i)
            outputs[f"{model.publisher} {model.model_id[:8]}"] = aligned if clf else aligned[:, 0]
    except (PubsubmlError, ValueError) as exc:
        raise _fail(str(exc).splitlines()[0]) from None
    if clf:
        return {who: _classification(out, y, customizer.classes_) for who, out in outputs.items()}
    target = y.to_numpy(dtype=float)
    return {who: _regression(out, target) for who, out in outputs.items()}


def _classification(proba: Any, y: Any, classes: Any) -> dict[str, float | None]:
    import numpy as np
    from sklearn.metrics import accuracy_score, balanced_accuracy_score, log_loss

    where = {c: j for j, c in enumerate(np.asarray(classes).tolist())}
    codes = [where.get(v.item() if hasattr(v, "item") else v) for v in y]
    unknown = sorted({str(v) for v, c in zip(y, codes, strict=True) if c is None})
    if unknown:
        raise _fail(f"labels {unknown[:5]} are not among the model's classes {list(where)}")
    truth = np.asarray(codes, dtype=np.int64)
    pred = np.argmax(proba, axis=1)
    clipped = np.clip(proba, 1e-15, 1.0)
    clipped = clipped / clipped.sum(axis=1, keepdims=True)
    return {
        "accuracy": float(accuracy_score(truth, pred)),
        "balanced accuracy": float(balanced_accuracy_score(truth, pred)),
        "log-loss": float(log_loss(truth, clipped, labels=list(range(len(where))))),
    }


def _regression(pred: Any, y: Any) -> dict[str, float | None]:
    import numpy as np
    from sklearn.metrics import mean_absolute_error, r2_score

    return {
        "R²": float(r2_score(y, pred)) if len(y) > 1 else None,
        "RMSE": float(np.sqrt(np.mean((np.asarray(pred) - y) ** 2))),
        "MAE": float(mean_absolute_error(y, pred)),
    }


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
    from pubsubml.methods.pubsub.contributions import contribution_scores
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
    by_id = {m.model_id: m for m in customizer.models or []}
    rows: list[dict[str, Any]] = []
    for mid, score in sorted(scores.items(), key=lambda kv: (-kv[1], kv[0])):
        model = by_id.get(mid)
        rows.append(
            {
                "model_id": mid,
                "publisher": None if model is None else str(model.publisher),
                "epsilon": None if model is None else float(model.epsilon),
                "selected": mid in customizer.selected_ids_,
                "score": score,
            }
        )
    publishers: dict[str, float] = {}
    for row in rows:
        if row["publisher"] is not None:
            publishers[row["publisher"]] = publishers.get(row["publisher"], 0.0) + row["score"]
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
    table = Table(
        title=f"contribution scores of {escape(customized.name)} (not DP)",
        caption="own: your own model's share (self-importance)" if OWN_ID in scores else None,
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
