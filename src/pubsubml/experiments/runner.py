"""The experiment runner: seeds × folds × parameter grid, run in a process pool or on Ray.

A measurement is a top-level function ``fn(seed, fold, **params) -> list[Record]`` that measures
one fold of one seed under one parameter setting; :func:`run_grid` runs every combination (in a
process pool with ``jobs > 1``, or as Ray tasks with ``executor="ray"``: see
:mod:`pubsubml.experiments.executors`) and returns the records as one table.  The paper reports
"average results with standard errors using the 5-fold cross-validation" (pubsub-ml.txt §7.4);
:func:`kfold_indices` gives the folds, and :mod:`pubsubml.experiments.reports` the mean ± standard
error and the files.  :class:`~pubsubml.experiments.base.Experiment` puts the pieces together.

Examples
--------
>>> def fake(seed: int, fold: int, shift: float = 0.0) -> list[Record]:
...     return [{"method": "m", "score": fold + shift}]
>>> table = run_grid(fake, seeds=1, folds=3, grid=[{"shift": 0.0}, {"shift": 1.0}], progress=False)
>>> table.groupby("shift")["score"].mean().to_dict()
{0.0: 1.0, 1.0: 2.0}
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd
from sklearn.model_selection import KFold, StratifiedKFold

from pubsubml.experiments.executors import make_executor

__all__ = ["Record", "kfold_indices", "progress_bar", "run_grid"]

Record = dict[str, Any]
_RESERVED = ("seed", "fold")


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
    executor: str = "process",
    address: str | None = None,
) -> pd.DataFrame:
    """Run ``fn(seed, fold, **params)`` for every seed, fold and parameter setting.

    Parameters
    ----------
    fn : callable
        A top-level function (picklable, for ``jobs > 1`` or Ray) returning a list of records
        (dicts).
    seeds : int or sequence of int, default=1
        ``n`` means seeds ``0 … n-1``.
    folds : int, default=5
        Fold indices ``0 … folds-1`` are passed to ``fn``, which makes its own split (e.g. with
        :func:`kfold_indices`).
    grid : sequence of dict, default=({},)
        Extra keyword arguments; one task per (setting, seed, fold).
    jobs : int, default=1
        Worker processes (Ray: CPUs of the instance started here); tasks are independent and
        seeded, so results do not depend on ``jobs``.
    description : str
        Label of the progress bar.
    progress : bool, default=True
        Show a rich progress bar.
    executor : {"process", "ray"}, default="process"
        Where the tasks run (:func:`~pubsubml.experiments.executors.make_executor`); results do
        not depend on it.
    address : str, optional
        The Ray cluster to join (``"auto"``, ``"ray://host:10001"``); ``None`` starts Ray on this
        machine.  Ray only.

    Returns
    -------
    DataFrame
        One row per record with columns ``seed``, ``fold``, the setting's keys and the record's keys,
        ordered by (setting, seed, fold) whatever order the tasks finished in.

    Raises
    ------
    ValueError
        ``seeds``, ``folds`` or ``jobs`` below 1, an unknown ``executor``, an ``address`` without
        Ray, or a record that redefines ``seed``, ``fold`` or a parameter.
    ImportError
        ``executor="ray"`` without Ray installed.
    """
    if folds < 1 or jobs < 1:
        raise ValueError(f"folds and jobs must be >= 1, got {folds} and {jobs}")
    tasks = [
        (int(s), f, dict(p)) for p in (grid or ({},)) for s in _seeds(seeds) for f in range(folds)
    ]
    pool = make_executor(executor, jobs, address)
    results: list[list[Record]] = [[] for _ in tasks]
    with pool, progress_bar(progress) as bar:
        task_id = bar.add_task(description or getattr(fn, "__name__", "run"), total=len(tasks))
        for i, records in pool.submit(_call, [(fn, s, f, p) for s, f, p in tasks]):
            results[i] = records  # by index: the order does not depend on when tasks finished
            bar.advance(task_id)
    return pd.DataFrame([r for rs in results for r in rs])


class _NullProgress:
    def __enter__(self) -> _NullProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def add_task(self, description: str, total: int) -> int:
        return 0

    def advance(self, task_id: int, advance: float = 1) -> None:
        return None


def progress_bar(show: bool) -> Any:
    """A rich progress bar (``add_task``, ``advance``) as a context manager; a silent one when
    ``show`` is false."""
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
