"""One rule for how a site's data fits the consortium's schema, shared by ``schema check`` and ``train``.

A model's card lists the features the model takes (pubsub-ml.txt §3.2: channels match them), so a
model must not list a feature the site does not hold, unless the site chose to extend its data to
the consortium's schema with the public defaults (§4 Step 3), which the card then records
(``defaulted_features``).  So, for a data file and a schema file:

* a schema feature the data lacks is an error, unless ``--extend-schema`` fills it from its public
  default;
* a column that is not a schema feature, a value that is not a number, or a category the schema
  does not list is an error;
* a value outside its public bounds is clipped to them (clipping to public bounds is what bounds
  every row's influence, DESIGN.md), and reported per column; ``--strict`` refuses it instead.

``schema check`` and ``train`` call :func:`fit_report` and print the same lines.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["FitReport", "fit_report", "read_table"]


@dataclass
class FitReport:
    """How a data file fits a schema (see the module notes).

    Attributes
    ----------
    columns : list of str
        The data's feature columns (the label excluded), in file order.
    missing : list of str
        Schema features the data lacks.
    errors : list of str
        One line per problem that refuses the data (missing features included, unless extended).
    clipped : dict of str to int
        Rows whose value lies outside the feature's public bounds, per column.
    notes : list of str
        One line per column with clipped rows, and one for the extension.
    """

    columns: list[str]
    missing: list[str]
    errors: list[str] = field(default_factory=list)
    clipped: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def read_table(path: Path) -> Any:
    """A CSV or Parquet file as a DataFrame (``.csv``, ``.parquet``, ``.pq``).

    Raises
    ------
    ValueError
        Another suffix, or a file that cannot be read (one line).
    """
    import pandas as pd

    suffix = path.suffix.lower()
    if suffix not in (".csv", ".parquet", ".pq"):
        raise ValueError(f"{path}: expected a .csv or .parquet file")
    try:
        return pd.read_csv(path) if suffix == ".csv" else pd.read_parquet(path)
    except (OSError, ValueError) as exc:
        detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ValueError(f"cannot read {path}: {detail}") from None


def fit_report(
    schema: Any, frame: Any, label: str | None, *, extend: bool = False, strict: bool = False
) -> FitReport:
    """Check ``frame`` against ``schema`` by the one rule of the module notes.

    Parameters
    ----------
    schema : FeatureSchema
    frame : DataFrame
    label : str or None
        The label column (not a feature); it must be present when given.
    extend : bool, default=False
        Fill the schema features the data lacks from their public defaults.
    strict : bool, default=False
        Refuse values outside the public bounds instead of clipping them.

    Returns
    -------
    FitReport

    Examples
    --------
    >>> import pandas as pd
    >>> from pubsubml.schema import FeatureSchema
    >>> schema = FeatureSchema.numeric(["a", "b"])
    >>> frame = pd.DataFrame({"a": [0.5, 2.0], "y": [0, 1]})
    >>> fit_report(schema, frame, "y").errors[0][:42]
    'the data lacks schema feature(s) b: a mode'
    >>> for line in fit_report(schema, frame, "y", extend=True).notes:
    ...     print(line)
    a: 1 row(s) outside [0, 1]: clipped to the public bounds
    b: not in the data, set to its public default 0.5 (recorded on the card)
    """
    if label is not None and label not in frame.columns:
        report = FitReport(columns=[], missing=[])
        report.errors.append(f"the label column {label!r} is not in the data")
        return report
    columns = [str(c) for c in frame.columns if c != label]
    missing = [n for n in schema.names if n not in columns]
    report = FitReport(columns=columns, missing=missing)
    extra = [c for c in columns if c not in schema.names]
    if extra:
        report.errors.append(f"extra columns (not in the schema): {', '.join(extra)}")
    if missing and not extend:
        report.errors.append(
            f"the data lacks schema feature(s) {', '.join(missing)}: a model lists only the "
            "features it was trained on; pass --extend-schema to train with them at their public "
            "defaults (recorded on the card), or use the schema of this site's columns "
            "(pubsubml schema infer)"
        )
    if columns and not [c for c in columns if c in schema.names]:
        report.errors.append("no column of the data is a schema feature")
    for name in (c for c in columns if c in schema.names):
        if schema[name].kind == "numeric":
            _check_numeric(report, name, schema[name], frame[name], strict)
        else:
            _check_categorical(report, name, schema[name], frame[name])
    if extend:
        for name in missing:
            report.notes.append(
                f"{name}: not in the data, set to its public default {schema[name].default!r} "
                "(recorded on the card)"
            )
    return report


def _check_numeric(report: FitReport, name: str, feature: Any, values: Any, strict: bool) -> None:
    """Record a numeric column's non-numbers and empty cells (errors) and its values outside
    the public bounds (clipped, or refused with ``strict``)."""
    import pandas as pd

    numbers = pd.to_numeric(values, errors="coerce")
    bad = int((numbers.isna() & values.notna()).sum())
    empty = int(values.isna().sum())
    out = int(((numbers < feature.lower) | (numbers > feature.upper)).sum())
    if bad:
        report.errors.append(f"{name}: {bad} value(s) are not numbers")
    if empty:
        report.errors.append(f"{name}: {empty} empty value(s)")
    if out:
        report.clipped[name] = out
        where = f"outside [{feature.lower:g}, {feature.upper:g}]"
        if strict:
            report.errors.append(f"{name}: {out} row(s) {where} (refused by --strict)")
        else:
            report.notes.append(f"{name}: {out} row(s) {where}: clipped to the public bounds")


def _check_categorical(report: FitReport, name: str, feature: Any, values: Any) -> None:
    """Record a categorical column's unknown categories and empty cells (errors)."""
    allowed = {str(c) for c in feature.categories or ()}
    unknown = sorted({str(v) for v in values.dropna()} - allowed)
    if unknown:
        report.errors.append(f"{name}: unknown categories {unknown[:5]}")
    empty = int(values.isna().sum())
    if empty:
        report.errors.append(f"{name}: {empty} empty value(s)")
