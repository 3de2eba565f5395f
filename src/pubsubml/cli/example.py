"""``pubsubml example-data``: the CSV files of a three-site example, generated from a seed.

One concept of river's Hyperplane generator (pubsub-ml.txt §7.1, "Hyperplane") is split into two
publishers with more data, each holding its own feature subset, and a small subscriber whose own
data are few (the setting of pubsub-ml.txt §8.1.1), plus fresh rows of the subscriber's
distribution that nobody trains on and a few unlabelled rows to predict.  The consortium's public
feature definitions come with them: Hyperplane draws every feature uniformly from [0, 1], so the
bounds are public by construction, never computed from the data.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from pubsubml.cli.registry.options import console, err_console

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "BOUNDS_FILE",
    "LABEL",
    "PUBLISHER_ROWS",
    "SUBSCRIBER_ROWS",
    "TABLES",
    "TEST_ROWS",
    "UNLABELLED_ROWS",
    "example_data_command",
]

# The demo's sizes (``DemoConfig`` in :mod:`pubsubml.cli.demo`, which is slow to import).  The
# subscriber is a small site, as the paper's subscribers are (pubsub-ml.txt §8.1): 200 rows, the
# smaller-site setting of the ``pubsub-small`` experiment (docs/results/pubsub-small.md).  With
# 400 rows its own model is already near the concept's ceiling and there is little to gain
# (docs/results/demo-seeds.md keeps that case).
PUBLISHER_ROWS = 1500
SUBSCRIBER_ROWS = 200
TEST_ROWS = 4000
#: Unlabelled rows the subscriber asks predictions for.
UNLABELLED_ROWS = 20

LABEL = "y"
BOUNDS_FILE = "bounds.json"


def _features(first: int, last: int) -> tuple[str, ...]:
    return tuple(f"x{i}" for i in range(first, last + 1))


#: File name → (number of rows, feature columns, whether the label column is written).
TABLES: dict[str, tuple[int, tuple[str, ...], bool]] = {
    "hospital-a.csv": (PUBLISHER_ROWS, _features(0, 6), True),
    "hospital-b.csv": (PUBLISHER_ROWS, _features(3, 9), True),
    "clinic-c.csv": (SUBSCRIBER_ROWS, _features(0, 7), True),
    "clinic-c-test.csv": (TEST_ROWS, _features(0, 7), True),
    "clinic-c-new.csv": (UNLABELLED_ROWS, _features(0, 7), False),
}

_N_FEATURES = 10


def _fail(message: str) -> typer.Exit:
    err_console.print(f"[red]error:[/red] {escape(message)}", soft_wrap=True)
    return typer.Exit(1)


def _write_atomically(path: Path, text: str) -> None:
    """Write ``path`` through a temporary file in the same folder, then rename it into place."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _split(seed: int) -> dict[str, pd.DataFrame]:
    """The example's tables: disjoint rows of one Hyperplane concept, in a seeded random order."""
    import numpy as np

    from pubsubml.data import hyperplane

    sizes = [n for n, _, _ in TABLES.values()]
    data = hyperplane(sum(sizes), seed=seed, n_features=_N_FEATURES)
    frame = data.X.assign(**{LABEL: data.y.astype(np.int64)})
    order = np.random.default_rng(seed).permutation(len(frame))
    tables: dict[str, pd.DataFrame] = {}
    start = 0
    for name, (n_rows, features, labelled) in TABLES.items():
        columns = [*features, LABEL] if labelled else list(features)
        rows = order[start : start + n_rows]
        tables[name] = frame.iloc[rows][columns].reset_index(drop=True)
        start += n_rows
    return tables


def example_data_command(
    out: Annotated[
        Path,
        typer.Argument(file_okay=False, help="Folder for the files (created if missing)."),
    ],
    seed: Annotated[int, typer.Option(min=0, help="Seed of the generated data.")] = 0,
) -> None:
    """Write the CSV files of a three-site example: two publishers and one small subscriber.

    The data are generated from the seed (river's Hyperplane, one concept); nothing is
    downloaded.  Writes hospital-a.csv (1,500 rows, x0..x6 and y) and hospital-b.csv (1,500
    rows, x3..x9 and y) for the publishers; clinic-c.csv (200 rows, x0..x7 and y) for the
    subscriber, clinic-c-test.csv (4,000 fresh rows to evaluate on, never trained on) and
    clinic-c-new.csv (20 fresh rows without labels, to predict); and bounds.json, the public
    feature definitions (every feature in [0, 1]) for ``pubsubml schema infer --public-bounds``.
    No file is overwritten: if any of them exists, nothing is written.
    """
    from pubsubml.data import hyperplane_schema

    names = [*TABLES, BOUNDS_FILE]
    existing = [name for name in names if (out / name).exists()]
    if existing:
        raise _fail(f"{out / existing[0]} exists; nothing written")
    tables = _split(seed)
    # pandas writes each float's shortest repr, which reads back to the same value.
    texts = {name: t.to_csv(index=False, lineterminator="\n") for name, t in tables.items()}
    texts[BOUNDS_FILE] = hyperplane_schema(_N_FEATURES).to_json() + "\n"
    written: list[Path] = []
    try:
        out.mkdir(parents=True, exist_ok=True)
        for name, text in texts.items():
            _write_atomically(out / name, text)
            written.append(out / name)
            count = (
                f"{_N_FEATURES} public feature definitions"
                if name == BOUNDS_FILE
                else f"{len(tables[name]):,} rows"
            )
            console.print(f"{escape(str(out / name))}: {count}", soft_wrap=True)
    except OSError as exc:
        for path in written:  # all files or none
            path.unlink(missing_ok=True)
        raise _fail(f"cannot write to {out}: {exc}") from None
    console.print(f"example data of seed {seed} written to {escape(str(out))}", soft_wrap=True)
