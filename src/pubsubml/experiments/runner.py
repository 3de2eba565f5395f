"""The experiment runner: seeds × folds × parameter grid, mean ± standard error, files on disk.

An experiment is a top-level function ``fn(seed, fold, **params) -> list[Record]`` that measures one
fold of one seed under one parameter setting; :func:`run_grid` runs every combination (in a process
pool with ``jobs > 1``), :func:`summarize` reduces the records to mean ± standard error over seeds and
folds, and :func:`write_results` writes the raw table (CSV), the summary (Markdown) and a figure (PNG).
The paper reports "average results with standard errors using the 5-fold cross-validation"
(pubsub-ml.txt §7.4); :func:`kfold_indices` gives the folds.

Examples
--------
>>> def fake(seed: int, fold: int, shift: float = 0.0) -> list[Record]:
...     return [{"method": "m", "score": fold + shift}]
>>> table = run_grid(fake, seeds=1, folds=3, grid=[{"shift": 0.0}, {"shift": 1.0}], progress=False)
>>> summarize(table, by=["shift"])[["shift", "mean", "n"]].to_dict("records")
[{'shift': 0.0, 'mean': 1.0, 'n': 3}, {'shift': 1.0, 'mean': 2.0, 'n': 3}]
"""

from __future__ import annotations

import math
import multiprocessing
import os
import tempfile
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from sklearn.model_selection import KFold, StratifiedKFold

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "Record",
    "check_out_dir",
    "kfold_indices",
    "mean_se_label",
    "run_grid",
    "summarize",
    "write_results",
]

Record = dict[str, Any]
_RESERVED = ("seed", "fold")


def _init_worker() -> None:
    """One BLAS/torch thread per worker process: the pool provides the parallelism."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch

    torch.set_num_threads(1)


def _call(
    fn: Callable[..., list[Record]], seed: int, fold: int, params: dict[str, Any]
) -> list[Record]:
    records = fn(seed, fold, **params)
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        raise TypeError(f"{getattr(fn, '__name__', fn)!r} must return a list of dicts")
    clash = [k for r in records for k in r if k in _RESERVED or k in params]
    if clash:
        raise ValueError(f"records may not redefine the columns {sorted(set(clash))}")
    return [{"seed": seed, "fold": fold, **params, **r} for r in records]


def _seeds(seeds: int | Sequence[int]) -> list[int]:
    if isinstance(seeds, int | np.integer):
        if seeds < 1:
            raise ValueError(f"seeds must be >= 1, got {seeds}")
        return list(range(int(seeds)))
    out = [int(s) for s in seeds]
    if not out:
        raise ValueError("no seeds")
    return out


def run_grid(
    fn: Callable[..., list[Record]],
    *,
    seeds: int | Sequence[int] = 1,
    folds: int = 5,
    grid: Sequence[dict[str, Any]] = ({},),
    jobs: int = 1,
    description: str = "",
    progress: bool = True,
) -> pd.DataFrame:
    """Run ``fn(seed, fold, **params)`` for every seed, fold and parameter setting.

    Parameters
    ----------
    fn : callable
        A top-level function (picklable, for ``jobs > 1``) returning a list of records (dicts).
    seeds : int or sequence of int, default=1
        ``n`` means seeds ``0 … n-1``.
    folds : int, default=5
        Fold indices ``0 … folds-1`` are passed to ``fn``, which makes its own split (e.g. with
        :func:`kfold_indices`).
    grid : sequence of dict, default=({},)
        Extra keyword arguments; one task per (setting, seed, fold).
    jobs : int, default=1
        Worker processes; tasks are independent, so results do not depend on ``jobs``.
    description : str
        Label of the progress bar.
    progress : bool, default=True
        Show a rich progress bar.

    Returns
    -------
    DataFrame
        One row per record with columns ``seed``, ``fold``, the setting's keys and the record's keys,
        ordered by (setting, seed, fold) whatever order the tasks finished in.

    Raises
    ------
    ValueError
        ``seeds``, ``folds`` or ``jobs`` below 1, or a record that redefines ``seed``, ``fold`` or a
        parameter.
    """
    if folds < 1 or jobs < 1:
        raise ValueError(f"folds and jobs must be >= 1, got {folds} and {jobs}")
    tasks = [
        (int(s), f, dict(p)) for p in (grid or ({},)) for s in _seeds(seeds) for f in range(folds)
    ]
    results: list[list[Record]] = [[] for _ in tasks]
    with _progress(progress) as bar:
        task_id = bar.add_task(description or getattr(fn, "__name__", "run"), total=len(tasks))
        if jobs == 1:
            for i, (s, f, p) in enumerate(tasks):
                results[i] = _call(fn, s, f, p)
                bar.advance(task_id)
        else:
            ctx = multiprocessing.get_context("spawn")
            with ProcessPoolExecutor(jobs, mp_context=ctx, initializer=_init_worker) as pool:
                futures: dict[Future[list[Record]], int] = {
                    pool.submit(_call, fn, s, f, p): i for i, (s, f, p) in enumerate(tasks)
                }
                for fut in as_completed(futures):
                    results[futures[fut]] = fut.result()
                    bar.advance(task_id)
    return pd.DataFrame([r for rs in results for r in rs])


class _NullProgress:
    def __enter__(self) -> _NullProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def add_task(self, description: str, total: int) -> int:
        return 0

    def advance(self, task_id: int) -> None:
        return None


def _progress(show: bool) -> Any:
    if not show:
        return _NullProgress()
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    return Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        transient=False,
    )


def summarize(df: pd.DataFrame, by: Sequence[str], value: str = "score") -> pd.DataFrame:
    """Mean and standard error of ``value`` per group of ``by``, over all seeds and folds.

    The standard error is ``std(ddof=1) / sqrt(n)`` with ``n`` the number of measurements in the
    group (0 when ``n == 1``).  Groups keep the order in which they first appear.

    Returns
    -------
    DataFrame with columns ``*by, mean, se, n``

    Raises
    ------
    KeyError
        A column of ``by`` or ``value`` is missing.

    Examples
    --------
    >>> df = pd.DataFrame({"method": ["a", "a", "b"], "score": [1.0, 3.0, 2.0]})
    >>> summarize(df, ["method"]).round(3).to_dict("records")
    [{'method': 'a', 'mean': 2.0, 'se': 1.0, 'n': 2}, {'method': 'b', 'mean': 2.0, 'se': 0.0, 'n': 1}]
    """
    missing = [c for c in [*by, value] if c not in df.columns]
    if missing:
        raise KeyError(f"columns not in the table: {missing}")
    rows = []
    for key, group in df.groupby(list(by), sort=False, dropna=False):
        vals = group[value].to_numpy(dtype=float)
        n = len(vals)
        se = float(np.std(vals, ddof=1) / math.sqrt(n)) if n > 1 else 0.0
        keys = key if isinstance(key, tuple) else (key,)
        rows.append(
            {**dict(zip(by, keys, strict=True)), "mean": float(vals.mean()), "se": se, "n": n}
        )
    return pd.DataFrame(rows, columns=[*by, "mean", "se", "n"])


def kfold_indices(
    y_or_n: np.ndarray | int, folds: int, fold: int, seed: int, *, stratify: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """Row positions ``(train, test)`` of fold ``fold`` of a seeded, shuffled K-fold split.

    Parameters
    ----------
    y_or_n : ndarray or int
        Labels (stratified when ``stratify``) or the number of rows.
    folds : int
        K (>= 2).
    fold : int
        Which fold is the test part, ``0 <= fold < folds``.
    seed : int

    Examples
    --------
    >>> train, test = kfold_indices(10, 5, 0, seed=0)
    >>> len(train), len(test), sorted([*train, *test]) == list(range(10))
    (8, 2, True)
    """
    if folds < 2 or not 0 <= fold < folds:
        raise ValueError(f"need folds >= 2 and 0 <= fold < folds, got folds={folds}, fold={fold}")
    if isinstance(y_or_n, int | np.integer):
        n, y = int(y_or_n), None
    else:
        y = np.asarray(y_or_n)
        n = len(y)
    splitter: KFold | StratifiedKFold
    if stratify and y is not None:
        splitter = StratifiedKFold(folds, shuffle=True, random_state=seed)
    else:
        splitter = KFold(folds, shuffle=True, random_state=seed)
    Xdummy = np.zeros((n, 1))
    for i, (train, test) in enumerate(splitter.split(Xdummy, y)):
        if i == fold:
            return train.astype(np.int64), test.astype(np.int64)
    raise AssertionError("unreachable")


def mean_se_label(mean: float, se: float, digits: int = 3) -> str:
    """``"0.812 ± 0.004"``.

    Examples
    --------
    >>> mean_se_label(0.81234, 0.0041)
    '0.812 ± 0.004'
    """
    return f"{mean:.{digits}f} ± {se:.{digits}f}"


def _markdown(summary: pd.DataFrame, digits: int) -> str:
    frame = summary.copy()
    if {"mean", "se"} <= set(frame.columns):
        frame.insert(
            list(frame.columns).index("mean"),
            "mean ± SE",
            [mean_se_label(m, s, digits) for m, s in zip(frame["mean"], frame["se"], strict=True)],
        )
        frame = frame.drop(columns=["mean", "se"])
    cols = [str(c) for c in frame.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in frame.itertuples(index=False):
        cells = [f"{v:.{digits}f}" if isinstance(v, float) else str(v) for v in row]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _write_temp(path: Path, write: Callable[[Path], None]) -> Path:
    """Write ``path``'s content to a temporary file beside it (readable by all) and return it."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=path.suffix)
    os.close(fd)
    try:
        write(Path(tmp))
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600; results are for everyone to read
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return Path(tmp)


def _write_text(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")


def _atomic_write_all(files: list[tuple[Path, Callable[[Path], None]]]) -> None:
    """Write every file to a temporary name, then rename them all: a failure writes none."""
    temps: list[tuple[Path, Path]] = []
    try:
        for path, write in files:
            temps.append((_write_temp(path, write), path))
    except BaseException:
        for tmp, _ in temps:
            tmp.unlink(missing_ok=True)
        raise
    for tmp, path in temps:
        os.replace(tmp, path)


def check_out_dir(out_dir: Path | str) -> Path:
    """Raise ``ValueError`` unless ``out_dir`` is, or can be created as, a writable folder.

    Called before an experiment runs, so a bad ``--out-dir`` fails at once instead of after the
    run; nothing is created.

    Examples
    --------
    >>> check_out_dir("/proc/version/results")
    Traceback (most recent call last):
    ...
    ValueError: output folder /proc/version/results: /proc/version is not a folder
    """
    out = Path(out_dir)
    existing = out
    while not existing.exists():
        if existing.parent == existing:
            break
        existing = existing.parent
    if not existing.is_dir():
        raise ValueError(f"output folder {out}: {existing} is not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ValueError(f"output folder {out}: {existing} is not writable")
    return out


def write_results(
    name: str,
    out_dir: Path | str,
    *,
    table: pd.DataFrame,
    summary: pd.DataFrame | None = None,
    figure: Figure | None = None,
    notes: str = "",
    title: str | None = None,
    digits: int = 3,
) -> list[Path]:
    """Write ``NAME.csv`` (the raw table), ``NAME.md`` (summary + notes) and ``NAME.png``.

    The files are written to temporary names and renamed together once all are written, so a
    failure leaves no half-written file and no partial set.

    Parameters
    ----------
    name : str
        File stem; letters, digits, ``-`` and ``_`` only.
    out_dir : path
        Created if missing.
    table : DataFrame
        The per-fold records.
    summary : DataFrame, optional
        Written as a Markdown table; ``mean`` and ``se`` columns become ``mean ± SE``.
    figure : matplotlib Figure, optional
        Saved at 150 dpi, then closed.
    notes : str
        Markdown after the table (setup, differences from the paper).
    title : str, optional
        Heading of the Markdown file (default: ``name``).

    Returns
    -------
    list of Path
        The files written.
    """
    if not name or not all(c.isalnum() or c in "-_" for c in name):
        raise ValueError(f"bad result name {name!r}")
    out = check_out_dir(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    body = [f"# {title or name}", ""]
    if summary is not None:
        body += [_markdown(summary, digits), ""]
    if notes:
        body += [notes.strip(), ""]
    text = "\n".join(body)
    files: list[tuple[Path, Callable[[Path], None]]] = [
        (out / f"{name}.csv", lambda p: table.to_csv(p, index=False)),
        (out / f"{name}.md", lambda p: _write_text(p, text)),
    ]
    if figure is not None:
        files.append(
            (
                out / f"{name}.png",
                lambda p: figure.savefig(p, dpi=150, bbox_inches="tight", format="png"),
            )
        )
    try:
        _atomic_write_all(files)
    finally:
        if figure is not None:
            import matplotlib.pyplot as plt

            plt.close(figure)
    written = [path for path, _ in files]
    return written
