"""UCI Heart Disease at four hospitals (FLamby's Fed-Heart-Disease), with a public schema.

The package ships the four unedited "processed" files of the UCI Heart Disease data set
(Janosi, Steinbrunn, Pfisterer & Detrano, 1988, https://doi.org/10.24432/C52P4X, CC BY 4.0; see
``heart_disease_files/README.md``), one per hospital: Cleveland (303 patients), Hungary (294),
Switzerland (123) and VA Long Beach (200).  Each row has 13 features and ``num``, the angiographic
diagnosis (0 no disease, 1–4 disease); ``?`` marks a missing value, and so do ``chol = 0`` (all
123 Switzerland rows, 49 VA rows) and ``trestbps = 0`` (one VA row).

Two readings of the files:

* **as recorded** (:func:`load_heart_disease`, :func:`hospital_datasets`): each hospital keeps the
  features it records (:func:`recorded_features`: a feature is recorded at a hospital when at most
  half of its rows miss it); its few missing cells are filled with the public default of
  :data:`~pubsubml.data.heart_disease_schema.HEART_SCHEMA`; the label is ``num > 0``.  A
  hospital's frame lacks the features it does not record, so a model extends it with the
  schema's public defaults (:meth:`~pubsubml.schema.FeatureSchema.extend`);
* **FLamby's protocol** (:func:`flamby_split`): the preprocessing and the per-hospital train/test
  split of du Terrail et al., "FLamby: Datasets and Benchmarks for Cross-Silo Federated Learning
  in Realistic Healthcare Settings", NeurIPS 2022 Datasets and Benchmarks Track, reproduced from
  the behaviour of ``flamby/datasets/fed_heart_disease/dataset.py`` (github.com/owkin/FLamby),
  with FLamby's data-dependent per-centre standardisation apart (:func:`flamby_normalize`).

:data:`~pubsubml.data.heart_disease_schema.HEART_SCHEMA` is written from public clinical
constants only (:mod:`~pubsubml.data.heart_disease_schema`); nothing in it is computed from the
files.
"""

from __future__ import annotations

import functools
import io
from collections.abc import Mapping
from dataclasses import dataclass, replace
from importlib import resources
from types import MappingProxyType

import numpy as np
import pandas as pd

from pubsubml.data.dataset import Dataset, UnknownDatasetError
from pubsubml.data.heart_disease_schema import HEART_SCHEMA

__all__ = [
    "COLUMNS",
    "FLAMBY_RANDOM_STATE",
    "FLAMBY_TRAIN_FRACTION",
    "HOSPITALS",
    "HOSPITAL_FILES",
    "HOSPITAL_NAMES",
    "RECORDED_MAX_MISSING_SHARE",
    "FlambySplit",
    "flamby_normalize",
    "flamby_split",
    "hospital_datasets",
    "load_heart_disease",
    "read_hospital",
    "recorded_features",
]

HOSPITALS: tuple[str, ...] = ("cleveland", "hungary", "switzerland", "va")
"""The four hospitals, in FLamby's client order (client 0 to 3)."""

HOSPITAL_FILES: Mapping[str, str] = MappingProxyType(
    {
        "cleveland": "processed.cleveland.data",
        "hungary": "processed.hungarian.data",
        "switzerland": "processed.switzerland.data",
        "va": "processed.va.data",
    }
)
"""The file of each hospital in ``pubsubml/data/heart_disease_files``."""

HOSPITAL_NAMES: Mapping[str, str] = MappingProxyType(
    {
        "cleveland": "Cleveland Clinic Foundation, Cleveland, Ohio",
        "hungary": "Hungarian Institute of Cardiology, Budapest",
        "switzerland": "University Hospitals of Zurich and Basel, Switzerland",
        "va": "V.A. Medical Center, Long Beach, California",
    }
)
"""Display name of each hospital."""

COLUMNS: tuple[str, ...] = (
    "age",
    "sex",
    "cp",
    "trestbps",
    "chol",
    "fbs",
    "restecg",
    "thalach",
    "exang",
    "oldpeak",
    "slope",
    "ca",
    "thal",
    "num",
)
"""The 14 columns of every file, in file order: 13 features, then the diagnosis ``num``."""

RECORDED_MAX_MISSING_SHARE = 0.5
"""A feature is recorded at a hospital when at most this share of its rows miss it."""

FLAMBY_TRAIN_FRACTION = 0.66
"""FLamby's train share of each hospital (the test share is ``1.0 - 0.66``)."""

FLAMBY_RANDOM_STATE = 43
"""FLamby's ``random_state`` for ``train_test_split``."""

_DATA_PACKAGE = "pubsubml.data"
_DATA_FOLDER = "heart_disease_files"
_FLAMBY_DROPPED = ("slope", "ca", "thal")
_FLAMBY_DUMMIES = ("cp", "restecg")


_CATEGORICAL = tuple(f.name for f in HEART_SCHEMA.features if f.kind == "categorical")


def _check_hospital(hospital: str) -> str:
    if not isinstance(hospital, str) or hospital not in HOSPITALS:
        raise UnknownDatasetError(f"unknown hospital {hospital!r}; use one of {list(HOSPITALS)}")
    return hospital


@functools.lru_cache(maxsize=len(HOSPITALS))
def _file_frame(hospital: str) -> pd.DataFrame:
    """The hospital's file with ``?`` as NaN and nothing else changed (cached: callers copy)."""
    resource = resources.files(_DATA_PACKAGE).joinpath(_DATA_FOLDER, HOSPITAL_FILES[hospital])
    text = resource.read_text(encoding="ascii")
    frame = pd.read_csv(io.StringIO(text), header=None, names=list(COLUMNS), na_values=["?"])
    return frame.astype(np.float64).astype({"num": np.int64})


def read_hospital(hospital: str) -> pd.DataFrame:
    """One hospital's file as a frame, with every missing value as NaN.

    ``?`` is NaN, and so are ``chol == 0`` and ``trestbps == 0``, which the data set's
    documentation lists as missing.  The 13 feature columns are float64 (NaN needs a float), the
    diagnosis ``num`` (0–4, never missing) is int64 and kept as recorded.

    Parameters
    ----------
    hospital : {"cleveland", "hungary", "switzerland", "va"}

    Returns
    -------
    DataFrame with the columns :data:`COLUMNS`, one row per patient in file order.

    Raises
    ------
    UnknownDatasetError
        If ``hospital`` is not one of :data:`HOSPITALS`.

    Examples
    --------
    >>> frame = read_hospital("switzerland")
    >>> frame.shape, int(frame["chol"].isna().sum())
    ((123, 14), 123)
    """
    frame = _file_frame(_check_hospital(hospital)).copy()
    for column in ("chol", "trestbps"):
        frame.loc[frame[column] == 0, column] = np.nan
    return frame


@functools.lru_cache(maxsize=len(HOSPITALS))
def _recorded(hospital: str) -> tuple[str, ...]:
    missing = read_hospital(hospital)[HEART_SCHEMA.names].isna().mean()
    return tuple(n for n in HEART_SCHEMA.names if missing[n] <= RECORDED_MAX_MISSING_SHARE)


def recorded_features(hospital: str) -> list[str]:
    """The features a hospital records: those missing in at most half of its rows.

    Missing means ``?`` in the file, or ``chol == 0`` / ``trestbps == 0`` (see
    :func:`read_hospital`).  The rule gives: Cleveland all 13 features; Hungary all but ``slope``,
    ``ca`` and ``thal``; Switzerland all but ``chol`` (never measured), ``fbs`` (61 % missing) and
    ``ca``; VA Long Beach all but ``slope`` (51 % missing), ``ca`` and ``thal``.

    Parameters
    ----------
    hospital : {"cleveland", "hungary", "switzerland", "va"}

    Returns
    -------
    list of str
        In :data:`HEART_SCHEMA` order.

    Examples
    --------
    >>> recorded_features("hungary")
    ['age', 'sex', 'cp', 'trestbps', 'chol', 'fbs', 'restecg', 'thalach', 'exang', 'oldpeak']
    """
    return list(_recorded(_check_hospital(hospital)))


def _as_recorded(hospital: str) -> Dataset:
    frame = read_hospital(hospital)
    names = recorded_features(hospital)
    X = frame[names].fillna({n: HEART_SCHEMA[n].default for n in names})
    X = X.astype({n: np.int64 for n in names if n in _CATEGORICAL})
    y = (frame["num"] > 0).to_numpy(dtype=np.int64)
    return Dataset(X.reset_index(drop=True), y, HEART_SCHEMA, "classification", (0, 1))


def hospital_datasets() -> dict[str, Dataset]:
    """Each hospital as recorded: one :class:`Dataset` per hospital, in :data:`HOSPITALS` order.

    ``X`` holds the hospital's :func:`recorded_features` only, in schema order; the schema is the
    full :data:`HEART_SCHEMA` (a :class:`Dataset` does not require every schema column), so
    ``HEART_SCHEMA.extend(d.X)`` gives the 13 features with the public defaults in place of the
    unrecorded ones.  The missing cells of a recorded feature (e.g. 28.5 % of VA's ``trestbps``,
    42 % of Switzerland's ``thal``) are filled with that feature's public default; ``X`` has no
    NaN.
    Categorical features are int64 codes, numeric ones float64.  ``y`` is ``num > 0`` (int64),
    classes (0, 1).

    Examples
    --------
    >>> {h: d.X.shape for h, d in hospital_datasets().items()}
    {'cleveland': (303, 13), 'hungary': (294, 10), 'switzerland': (123, 10), 'va': (200, 10)}
    """
    return {h: _as_recorded(h) for h in HOSPITALS}


def load_heart_disease(hospital: str | None = None) -> Dataset:
    """UCI Heart Disease as recorded: one hospital, or all four pooled.

    With ``hospital`` given, the :class:`Dataset` of :func:`hospital_datasets` for it: only the
    features it records.  With ``hospital=None``, the four hospitals one after the other (in
    :data:`HOSPITALS` order: rows 0–302 Cleveland, 303–596 Hungary, 597–719 Switzerland, 720–919
    VA), each extended to the 13 features of :data:`HEART_SCHEMA` with the public defaults
    (:meth:`~pubsubml.schema.FeatureSchema.extend`), so the pooled frame has every schema column
    and no NaN; :func:`hospital_datasets` keeps the hospitals apart.  Target ``num > 0`` (heart
    disease, 55.3 % of the 920 patients), classes (0, 1).

    Parameters
    ----------
    hospital : {"cleveland", "hungary", "switzerland", "va"}, optional

    Raises
    ------
    UnknownDatasetError
        If ``hospital`` is not ``None`` nor one of :data:`HOSPITALS`.

    Examples
    --------
    >>> d = load_heart_disease()
    >>> d.X.shape, d.classes, d.task
    ((920, 13), (0, 1), 'classification')
    >>> load_heart_disease("switzerland").X.shape
    (123, 10)
    """
    if hospital is not None:
        return _as_recorded(_check_hospital(hospital))
    parts = hospital_datasets().values()
    X = pd.concat([HEART_SCHEMA.extend(d.X) for d in parts], ignore_index=True)
    X = X.astype({n: (np.int64 if n in _CATEGORICAL else np.float64) for n in HEART_SCHEMA.names})
    y = np.concatenate([d.y for d in parts])
    return Dataset(X, y, HEART_SCHEMA, "classification", (0, 1))


@dataclass(frozen=True)
class FlambySplit:
    """One hospital's train and test sets under FLamby's Fed-Heart-Disease protocol.

    Attributes
    ----------
    X_train : ndarray of shape (n_train, 13), float64
    y_train : ndarray of shape (n_train,), int64
    X_test : ndarray of shape (n_test, 13), float64
    y_test : ndarray of shape (n_test,), int64
    columns : tuple of str
        Names of the 13 columns: ``age``, ``sex``, ``trestbps``, ``chol``, ``fbs``, ``thalach``,
        ``exang``, ``oldpeak``, then the one-hot columns ``cp_2``, ``cp_3``, ``cp_4``,
        ``restecg_1``, ``restecg_2``.
    """

    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    columns: tuple[str, ...]


def _flamby_kept(hospital: str) -> pd.DataFrame:
    """FLamby's rows of a hospital: slope, ca, thal dropped, then every row with a ``?`` dropped.

    ``chol = 0`` and ``trestbps = 0`` stay values here, as in FLamby.
    """
    frame = _file_frame(hospital).drop(columns=list(_FLAMBY_DROPPED))
    return frame.dropna(axis=0).reset_index(drop=True)


def _flamby_test_rows(y: np.ndarray) -> np.ndarray:
    from sklearn.model_selection import train_test_split

    levels, counts = np.unique(y, return_counts=True)
    stratify = y if len(levels) > 1 and bool((counts > 2).all()) else None
    _, test = train_test_split(
        np.arange(len(y)),
        test_size=1.0 - FLAMBY_TRAIN_FRACTION,
        train_size=FLAMBY_TRAIN_FRACTION,
        random_state=FLAMBY_RANDOM_STATE,
        shuffle=True,
        stratify=stratify,
    )
    return np.asarray(test)


def flamby_split() -> dict[str, FlambySplit]:
    """FLamby's Fed-Heart-Disease preprocessing and train/test split, one entry per hospital.

    Reproduces the behaviour of FLamby's ``HeartDiseaseRaw`` (du Terrail et al., NeurIPS 2022):

    1. per hospital, read the file with ``?`` as missing, drop ``slope``, ``ca`` and ``thal``,
       then drop every row with a missing value (``chol = 0`` and ``trestbps = 0`` are kept as
       values): 303, 261, 46 and 130 rows are kept;
    2. label ``num > 0`` → 1;
    3. split the row positions with scikit-learn's ``train_test_split(np.arange(n),
       test_size=1.0 - 0.66, train_size=0.66, random_state=43, shuffle=True, stratify=...)``,
       stratified on the label when both classes have more than two rows (Switzerland keeps one
       healthy patient, so its split is not stratified): train/test sizes 199/104, 172/89, 30/16
       and 85/45;
    4. one-hot encode ``cp`` and ``restecg`` over the four hospitals pooled, dropping the first
       level present (``pd.get_dummies(..., drop_first=True)``), which gives 13 columns.

    Rows keep their file order within the train and within the test set, as in FLamby.  FLamby
    then standardises each hospital with its own train mean and standard deviation; that step is
    data-dependent and is left to :func:`flamby_normalize`.

    Returns
    -------
    dict of str to FlambySplit
        In :data:`HOSPITALS` order (FLamby's clients 0 to 3).

    Examples
    --------
    >>> {h: (len(s.y_train), len(s.y_test)) for h, s in flamby_split().items()}
    {'cleveland': (199, 104), 'hungary': (172, 89), 'switzerland': (30, 16), 'va': (85, 45)}
    """
    kept = [_flamby_kept(h) for h in HOSPITALS]
    pooled = pd.concat(kept, ignore_index=True)
    features = pooled.drop(columns=["num"]).astype({c: np.int64 for c in _FLAMBY_DUMMIES})
    encoded = pd.get_dummies(
        features, columns=list(_FLAMBY_DUMMIES), drop_first=True, dtype=np.float64
    )
    columns = tuple(str(c) for c in encoded.columns)
    X_all = encoded.to_numpy(dtype=np.float64)
    y_all = (pooled["num"] > 0).to_numpy(dtype=np.int64)
    out: dict[str, FlambySplit] = {}
    start = 0
    for hospital, part in zip(HOSPITALS, kept, strict=True):
        stop = start + len(part)
        X, y = X_all[start:stop], y_all[start:stop]
        is_test = np.zeros(len(y), dtype=bool)
        is_test[_flamby_test_rows(y)] = True
        out[hospital] = FlambySplit(
            X_train=X[~is_test],
            y_train=y[~is_test],
            X_test=X[is_test],
            y_test=y[is_test],
            columns=columns,
        )
        start = stop
    return out


def flamby_normalize(split: FlambySplit) -> FlambySplit:
    """FLamby's per-centre standardisation of one hospital's split.

    Both sets become ``(x - mean) / (std + 1e-9)`` with the mean and the standard deviation
    (``ddof=1``, as ``torch.std``) of the hospital's own **train** set, column by column; a
    constant column becomes 0.  The statistics are computed from the data: use this only to
    replicate FLamby's non-private numbers (FLamby computes in float32, this in float64).  For
    pooled training FLamby uses the statistics of the pooled train set instead.

    Parameters
    ----------
    split : FlambySplit
        One entry of :func:`flamby_split`.

    Returns
    -------
    FlambySplit
        A new split with standardised ``X_train`` and ``X_test`` (labels and columns unchanged).

    Examples
    --------
    >>> s = flamby_normalize(flamby_split()["cleveland"])
    >>> bool(abs(s.X_train.mean(axis=0)).max() < 1e-9)
    True
    """
    mean = split.X_train.mean(axis=0)
    scale = split.X_train.std(axis=0, ddof=1) + 1e-9
    return replace(
        split,
        X_train=(split.X_train - mean) / scale,
        X_test=(split.X_test - mean) / scale,
    )
