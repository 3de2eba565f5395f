"""Result files of the experiments: mean ± standard error, Markdown tables, CSV + MD + PNG.

One reduction (:func:`summarize`, mean and ``std(ddof=1) / sqrt(n)`` per group; :func:`mean_se` is
the same for one group of values), one Markdown renderer
(:func:`markdown_table`) and one writer (:func:`write_results`) serve every experiment, so that every
``docs/results/NAME.{csv,md,png}`` has the same shape: the raw records, a summary table with notes,
and a figure.

Examples
--------
>>> df = pd.DataFrame({"method": ["a", "a", "b"], "score": [1.0, 3.0, 2.0]})
>>> print(markdown_table(summarize(df, ["method"])))
| method | mean ± SE | n |
|---|---|---|
| a | 2.000 ± 1.000 | 2 |
| b | 2.000 ± 0.000 | 1 |
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "check_out_dir",
    "markdown_table",
    "mean_se",
    "mean_se_cell",
    "mean_se_label",
    "summarize",
    "write_results",
]


def summarize(
    df: pd.DataFrame, by: Sequence[str], value: str = "score", *, single_se: float = 0.0
) -> pd.DataFrame:
    """Mean and standard error of ``value`` per group of ``by``, over all seeds and folds.

    The one mean ± SE of the experiments and the demo: NumPy's mean and ``std(ddof=1) / sqrt(n)``
    of each group, ``n`` the number of measurements in it.  One
    measurement has no spread to estimate: where ``n == 1`` the SE is ``single_se``, 0 by default
    (the result tables, whose ``n`` column shows it); ``math.nan`` prints it as not estimated (the
    demo's tables).  Groups keep the order in which they first appear; missing values of ``value``
    are left out.

    Parameters
    ----------
    df : DataFrame
        One row per measurement.
    by : sequence of str
        The grouping columns.
    value : str, default="score"
        The measured column.
    single_se : float, default=0.0
        The SE of a group of one measurement.

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
    >>> summarize(df, ["method"], single_se=float("nan"))["se"].tolist()
    [1.0, nan]
    """
    missing = [c for c in [*by, value] if c not in df.columns]
    if missing:
        raise KeyError(f"columns not in the table: {missing}")
    values = df[value].astype(float)
    grouped = values.groupby([df[c] for c in by], sort=False, dropna=False)
    out = grouped.agg(["count"]).reset_index().rename(columns={"count": "n"})
    out["mean"] = grouped.agg(_mean).to_numpy(dtype=float)
    out["se"] = grouped.agg(_standard_error).to_numpy(dtype=float)
    out["se"] = out["se"].where(out["n"] > 1, single_se).astype(float)
    out["n"] = out["n"].astype(int)
    return out[[*by, "mean", "se", "n"]]


def _mean(values: pd.Series) -> float:
    """NumPy's mean of the non-missing ``values`` (NaN when there are none)."""
    v = values.dropna().to_numpy(dtype=float)
    return float(np.mean(v)) if len(v) else math.nan


def _standard_error(values: pd.Series) -> float:
    """``std(ddof=1) / sqrt(n)`` of the non-missing ``values`` (NaN when ``n < 2``)."""
    v = values.dropna().to_numpy(dtype=float)
    return float(np.std(v, ddof=1) / np.sqrt(len(v))) if len(v) > 1 else math.nan


def mean_se(values: Any, *, single_se: float = 0.0) -> tuple[float, float, int]:
    """Mean, standard error and number of the non-missing ``values``: :func:`summarize` of one
    group (``nan, nan, 0`` when there are none).

    Examples
    --------
    >>> mean_se([1.0, 3.0, float("nan")])
    (2.0, 1.0, 2)
    >>> mean_se([2.0]), mean_se([2.0], single_se=float("nan"))
    ((2.0, 0.0, 1), (2.0, nan, 1))
    """
    frame = pd.DataFrame({"group": 0, "value": np.asarray(values, dtype=float).ravel()})
    row = summarize(frame, ["group"], "value", single_se=single_se)
    if row.empty or int(row["n"].iloc[0]) == 0:
        return math.nan, math.nan, 0
    return float(row["mean"].iloc[0]), float(row["se"].iloc[0]), int(row["n"].iloc[0])


def mean_se_cell(values: pd.Series, digits: int = 2, *, missing: str = "NA") -> str:
    """``"mean ± SE"`` of the non-missing ``values`` (:func:`mean_se`; ``missing`` when there
    are none).

    Examples
    --------
    >>> mean_se_cell(pd.Series([1.0, 3.0, None]))
    '2.00 ± 1.00'
    """
    mean, se, n = mean_se(values)
    if n == 0:
        return missing
    return mean_se_label(mean, se, digits)


def mean_se_label(mean: float, se: float, digits: int = 3, *, sign: bool = False) -> str:
    """``"0.812 ± 0.004"`` (``sign``: the mean with its sign, ``"+0.012 ± 0.004"``).

    Examples
    --------
    >>> mean_se_label(0.81234, 0.0041)
    '0.812 ± 0.004'
    >>> mean_se_label(0.0123, float("nan"), 4, sign=True)
    '+0.0123 ± nan'
    """
    return f"{mean:{'+' if sign else ''}.{digits}f} ± {se:.{digits}f}"


def markdown_table(summary: pd.DataFrame, digits: int | None = 3) -> str:
    """``summary`` as a Markdown table: ``mean`` and ``se`` become one ``mean ± SE`` column,
    floats are written with ``digits`` decimals (``.4g`` when ``digits`` is ``None``).

    Examples
    --------
    >>> print(markdown_table(pd.DataFrame({"a": [1], "b": ["x"], "c": [0.12345]})))
    | a | b | c |
    |---|---|---|
    | 1 | x | 0.123 |
    """
    frame = summary.copy()
    if {"mean", "se"} <= set(frame.columns):
        frame.insert(
            list(frame.columns).index("mean"),
            "mean ± SE",
            [
                mean_se_label(m, s, 3 if digits is None else digits)
                for m, s in zip(frame["mean"], frame["se"], strict=True)
            ],
        )
        frame = frame.drop(columns=["mean", "se"])
    cols = [str(c) for c in frame.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in frame.itertuples(index=False):
        cells = [_cell(v, digits) for v in row]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _cell(value: Any, digits: int | None) -> str:
    if not isinstance(value, float):
        return str(value)
    return f"{value:.4g}" if digits is None else f"{value:.{digits}f}"


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
    digits: int | None = 3,
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
    digits : int or None, default=3
        Decimals of the summary's floats (``None``: four significant digits).

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
        body += [markdown_table(summary, digits), ""]
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
