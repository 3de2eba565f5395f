"""``pubsubml customize``: a subscriber's CUSTOMIZE without writing Python.

The command runs CUSTOMIZE (pubsub-ml.txt §4, Algorithm 2) on the subscriber's private rows and the
models in an inbox folder (one artifact per sub-folder, as ``pubsubml pull`` or ``pubsubml train``
write them), every card verified against trusted keys, and stores the customized model without
pickle (:func:`~pubsubml.methods.pubsub.storage.writer.save_customizer`).  What it fuses — the
trusted models of the task, the public schema, the classes — is settled by
:func:`~pubsubml.methods.pubsub.subscription.prepare_subscription`, as for a library user of
``Site.pull``; this module parses the options, reads the files and prints.  ``pubsubml predict``,
``evaluate`` and ``contributions`` use the stored model (:mod:`pubsubml.cli.customized_model`).
Nothing here releases anything: the subscriber spends no privacy (§5, Theorem 3).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from pubsubml.cli.progress import steps
from pubsubml.cli.registry.options import console, err_console
from pubsubml.cli.site import _fail, _read_features, given_classes, load_key, read_table

__all__ = ["REMEDIES", "TRUSTED_KEYS_FILE", "customize_command"]

TRUSTED_KEYS_FILE = "trusted_keys.json"
"""Where ``pubsubml pull`` writes the keys it trusted, the default of ``--trust``."""


# ---- the inbox ---------------------------------------------------------------------------
#: The command line's remedy for each kind of SubscriptionError (the library's names parameters).
REMEDIES = {
    "no_trusted_keys": (
        "pass --trust PUBLISHER.pub (repeat), or pull into {inbox} with `pubsubml pull`, which "
        f"writes {TRUSTED_KEYS_FILE}"
    ),
    "unreadable_key": "",
    "cards_disagree": "pass the consortium's --schema",
    "undefined_columns": "pass --schema",
    "mixed_labels": "pass --class",
}


def _refused(exc: Any, inbox: Path) -> typer.Exit:
    """A SubscriptionError as one error line (exit 2): its problem and this command's remedy."""
    remedy = REMEDIES[exc.kind].format(inbox=inbox)
    return _fail(f"{exc.problem}: {remedy}" if remedy else exc.problem, 2)


def _trusted(trust: list[Path] | None, inbox: Path) -> dict[str, Any]:
    """The keys of ``--trust`` files, else of INBOX/trusted_keys.json (`pubsubml pull`)."""
    from pubsubml.methods.pubsub.subscription import (
        SubscriptionError,
        check_trusted,
        read_trusted_keys,
    )

    files = list(trust or [])
    if not files and (inbox / TRUSTED_KEYS_FILE).is_file():
        files = [inbox / TRUSTED_KEYS_FILE]
    try:
        keys = read_trusted_keys(files)
        check_trusted(keys)
    except SubscriptionError as exc:
        raise _refused(exc, inbox) from None
    return keys


def _inbox(inbox: Path, keys: dict[str, Any], run: Any) -> dict[Any, str]:
    """Every model in the inbox, its card verified against ``keys``, with its folder's name."""
    from pubsubml.artifacts.artifact import CARD_FILE, load_artifact
    from pubsubml.errors import PubsubmlError

    if not inbox.is_dir():
        raise _fail(f"{inbox} is not a folder", 2)
    folders = sorted(p for p in inbox.iterdir() if p.is_dir() and (p / CARD_FILE).is_file())
    models = {}
    with run.step(f"verifying {len(folders)} model(s) in {inbox}", total=len(folders)) as step:
        for folder in folders:
            try:
                models[load_artifact(folder).open(keys)] = folder.name
            except (PubsubmlError, OSError, ValueError) as exc:
                raise _fail(f"{folder}: {str(exc).splitlines()[0]}") from None
            step.advance()
    return models


def _subscription(
    received: dict[Any, str],
    frame: Any,
    labels: Any,
    keys: dict[str, Any],
    options: dict[str, Any],
    inbox: Path,
) -> Any:
    """:func:`~pubsubml.methods.pubsub.subscription.prepare_subscription` of the inbox's models."""
    from pubsubml.methods.pubsub.subscription import SubscriptionError, prepare_subscription

    task, path, given = options["task"], options["schema"], options["classes"]
    classes = given_classes(given, labels) if given and task == "classification" else None
    try:
        sub = prepare_subscription(
            list(received),
            frame,
            labels,
            trusted_keys=keys,
            task=task,
            schema=None if path is None else _read_features(path),
            classes=classes,
            schema_name=str(path),
        )
    except SubscriptionError as exc:
        raise _refused(exc, inbox) from None
    if sub.skipped:
        names = ", ".join(received[m] for m in sub.skipped)
        err_console.print(f"skipped {len(sub.skipped)} {_other(task)} model(s): {names}")
    return sub


def _other(task: str) -> str:
    return "regression" if task == "classification" else "classification"


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
    if task not in ("classification", "regression"):
        raise _fail(f"--task must be classification or regression, got {task!r}", 2)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise _fail(f"{out} exists and is not empty; not overwritten")
    frame, labels = _frame(data, label)
    keys = _trusted(trust, inbox)
    signing_key = None if key is None else load_key(key)
    own_model = None if own == "none" else own
    params: dict[str, Any] = {"own_model": own_model, "fusion_model": fusion, "cv": cv}
    params |= {"top_m": top_m}
    params |= {"target_bounds": target_bounds, "random_state": seed}
    with steps(enabled=not quiet) as run:
        received = _inbox(inbox, keys, run)
        options = {"task": task, "schema": schema, "classes": classes}
        sub = _subscription(received, frame, labels, keys, options, inbox)
        store = {"out": out, "signing_key": signing_key, "label": label, "data": data.name}
        customizer, scores = _customize(sub, frame, params, store, contributions, run)
    _print_summary(customizer, sub.models, out, scores)


def _customize(
    sub: Any,
    frame: Any,
    params: dict[str, Any],
    store: dict[str, Any],
    contributions: bool,
    run: Any,
) -> tuple[Any, dict[str, float] | None]:
    """Fit the subscription's customizer on ``frame``, score it if asked, and store it."""
    from pubsubml.errors import PubsubmlError
    from pubsubml.methods.pubsub.storage import save_customizer

    customizer = sub.customizer(**params)
    try:
        with run.step(f"CUSTOMIZE on {len(frame)} rows and {len(sub.models)} model(s)"):
            customizer.fit(frame, sub.target)
        scores = _contributions(customizer) if contributions else None
        with run.step(f"storing the customized model in {store['out']}"):
            save_customizer(
                customizer,
                store["out"],
                trusted_keys=sub.trusted_keys,
                signing_key=store["signing_key"],
                metadata={"label": store["label"], "data": store["data"]},
            )
    except (PubsubmlError, ValueError, TypeError) as exc:
        raise _fail(str(exc).splitlines()[0]) from None
    return customizer, scores


def _contributions(customizer: Any) -> dict[str, float]:
    from pubsubml.methods.pubsub.contributions import contribution_scores

    return contribution_scores(customizer)


def _print_summary(
    customizer: Any, models: list[Any], out: Path, scores: dict[str, float] | None
) -> None:
    """What was selected, with weights, and the contribution scores when asked for."""
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
    if scores is not None:
        table = Table("model", "contribution")
        for mid, value in scores.items():
            table.add_row(mid, f"{value:.3f}")
        console.print(table)
