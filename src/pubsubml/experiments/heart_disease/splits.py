"""The rows every method of the ``heart-disease`` benchmark trains and is scored on.

Two protocols over the four hospitals of UCI Heart Disease (:mod:`pubsubml.data.heart_disease`):

* **FLamby's** (:func:`flamby_frames`): FLamby's one fixed per-hospital train/test split
  (:func:`~pubsubml.data.heart_disease.flamby_split`: train 199 / 172 / 30 / 85, test 104 / 89 /
  16 / 45 patients at Cleveland, Hungary, Switzerland, VA), its rows as frames over the 10
  features FLamby keeps (:data:`FLAMBY_SCHEMA`: ``slope``, ``ca`` and ``thal`` dropped), so that
  our models encode them by the public bounds of :data:`~pubsubml.data.heart_disease_schema.HEART_SCHEMA`
  instead of FLamby's per-centre z-scores;
* **the hospitals as they are** (:func:`hospital_splits`): each hospital with the features it
  records (:func:`~pubsubml.data.heart_disease.hospital_datasets`), split again at every repeat
  into train and test parts, stratified by the label, at FLamby's fraction (34 % test: 104, 100,
  42 and 68 patients).

:func:`clinic_rows` draws a new small clinic from one hospital's training part.

References
----------
du Terrail et al., "FLamby", NeurIPS 2022 Datasets and Benchmarks Track (the split);
pubsub-ml.txt §7.4 (train / test protocol of the evaluation).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import pandas as pd
from sklearn.model_selection import train_test_split

from pubsubml.data.heart_disease import (
    FLAMBY_TRAIN_FRACTION,
    HOSPITALS,
    flamby_split,
    hospital_datasets,
)
from pubsubml.data.heart_disease_schema import HEART_SCHEMA
from pubsubml.experiments.pubsub.small.scenarios import stratified_order
from pubsubml.schema import FeatureSchema

__all__ = [
    "FLAMBY_FEATURES",
    "FLAMBY_SCHEMA",
    "TEST_FRACTION",
    "HospitalSplit",
    "clinic_rows",
    "flamby_frame",
    "flamby_frames",
    "hospital_splits",
    "split_seed",
]

FLAMBY_FEATURES: tuple[str, ...] = tuple(
    n for n in HEART_SCHEMA.names if n not in ("slope", "ca", "thal")
)
"""The 10 features FLamby keeps, in :data:`~pubsubml.data.heart_disease_schema.HEART_SCHEMA` order."""

FLAMBY_SCHEMA: FeatureSchema = HEART_SCHEMA.subset(FLAMBY_FEATURES)
"""The public schema of FLamby's features (18 encoded columns: 5 numeric, ``cp`` and ``restecg``
one-hot over their public codes, 3 binary features one-hot)."""

TEST_FRACTION: float = round(1.0 - FLAMBY_TRAIN_FRACTION, 2)
"""The test share of every hospital split (FLamby's: 0.34)."""

_CATEGORICAL = ("sex", "cp", "fbs", "restecg", "exang")


@dataclass(frozen=True)
class HospitalSplit:
    """One hospital's train and test rows.

    Attributes
    ----------
    X_train, X_test : DataFrame
        Feature columns of the public schema (a hospital's subset of them).
    y_train, y_test : ndarray of int64
        ``num > 0`` (heart disease).
    """

    X_train: pd.DataFrame
    y_train: np.ndarray
    X_test: pd.DataFrame
    y_test: np.ndarray


def flamby_frame(X: np.ndarray, columns: tuple[str, ...]) -> pd.DataFrame:
    """FLamby's one-hot matrix as a frame of the 10 kept features, categorical codes restored.

    ``cp_2``, ``cp_3``, ``cp_4`` give ``cp`` (1 when all three are 0, the dropped first level);
    ``restecg_1``, ``restecg_2`` give ``restecg`` (0 when both are 0).  Every other column is kept
    as FLamby keeps it: ``chol = 0`` (never measured at Switzerland, often not at VA) stays 0,
    which the public encoding clips to the schema's lower bound, so a model still sees it as the
    lowest value, as FLamby's does.

    Parameters
    ----------
    X : ndarray of shape (n, 13)
        Rows of :class:`~pubsubml.data.heart_disease.FlambySplit`.
    columns : tuple of str
        Their names (``FlambySplit.columns``).

    Returns
    -------
    DataFrame with the columns :data:`FLAMBY_FEATURES`; categorical features are int64.

    Examples
    --------
    >>> cols = ("age", "sex", "trestbps", "chol", "fbs", "thalach", "exang", "oldpeak",
    ...         "cp_2", "cp_3", "cp_4", "restecg_1", "restecg_2")
    >>> row = np.array([[60, 1, 130, 0, 0, 150, 1, 1.5, 0, 0, 1, 0, 1]], dtype=float)
    >>> flamby_frame(row, cols)[["cp", "restecg", "chol"]].to_dict("records")
    [{'cp': 4, 'restecg': 2, 'chol': 0.0}]
    """
    frame = pd.DataFrame(X, columns=list(columns))

    def decode(prefix: str, first: int, levels: tuple[int, ...]) -> np.ndarray:
        code = np.full(len(frame), first, dtype=np.int64)
        for level in levels:
            code[frame[f"{prefix}_{level}"].to_numpy() == 1] = level
        return code

    out = frame[[c for c in FLAMBY_FEATURES if c in frame.columns]].copy()
    out["cp"] = decode("cp", 1, (2, 3, 4))
    out["restecg"] = decode("restecg", 0, (1, 2))
    out = out[list(FLAMBY_FEATURES)]
    return out.astype({c: np.int64 for c in _CATEGORICAL})


@functools.lru_cache(maxsize=1)
def _flamby_frames() -> tuple[HospitalSplit, ...]:
    out = []
    for split in flamby_split().values():
        out.append(
            HospitalSplit(
                X_train=flamby_frame(split.X_train, split.columns),
                y_train=split.y_train.copy(),
                X_test=flamby_frame(split.X_test, split.columns),
                y_test=split.y_test.copy(),
            )
        )
    return tuple(out)


def flamby_frames() -> dict[str, HospitalSplit]:
    """FLamby's fixed Fed-Heart-Disease split as frames over :data:`FLAMBY_FEATURES`.

    The rows and labels of :func:`~pubsubml.data.heart_disease.flamby_split`, one-hot columns
    decoded by :func:`flamby_frame`.  Switzerland's 30 training patients all have heart disease
    (FLamby keeps one healthy Swiss patient, who is in the test set).

    Returns
    -------
    dict of str to HospitalSplit
        In :data:`~pubsubml.data.heart_disease.HOSPITALS` order (FLamby's clients 0 to 3).

    Examples
    --------
    >>> {h: (len(s.y_train), len(s.y_test)) for h, s in flamby_frames().items()}
    {'cleveland': (199, 104), 'hungary': (172, 89), 'switzerland': (30, 16), 'va': (85, 45)}
    """
    return dict(zip(HOSPITALS, _flamby_frames(), strict=True))


def split_seed(*keys: int) -> int:
    """A 32-bit seed drawn from ``keys`` (e.g. the run seed, a repeat and a hospital's index).

    Examples
    --------
    >>> split_seed(0, 1) == split_seed(0, 1) != split_seed(1, 0)
    True
    """
    return int(np.random.SeedSequence(list(keys)).generate_state(1)[0])


def hospital_splits(repeat: int, seed: int = 0) -> dict[str, HospitalSplit]:
    """Each hospital as recorded, split into train and test parts for one repeat.

    Stratified by the label (Switzerland has 8 healthy patients in 123), test share
    :data:`TEST_FRACTION`, a new split for every ``(seed, repeat)`` and hospital.  Test parts:
    Cleveland 104, Hungary 100, Switzerland 42 (3 healthy), VA 68 patients.

    Parameters
    ----------
    repeat : int
        The repeat index (≥ 0).
    seed : int, default=0
        The run's seed.

    Returns
    -------
    dict of str to HospitalSplit
        In :data:`~pubsubml.data.heart_disease.HOSPITALS` order, each with the columns that
        hospital records.

    Examples
    --------
    >>> parts = hospital_splits(0)
    >>> {h: (len(s.y_train), len(s.y_test)) for h, s in parts.items()}
    {'cleveland': (199, 104), 'hungary': (194, 100), 'switzerland': (81, 42), 'va': (132, 68)}
    """
    if repeat < 0:
        raise ValueError(f"repeat must be >= 0, got {repeat}")
    out: dict[str, HospitalSplit] = {}
    for index, (hospital, data) in enumerate(hospital_datasets().items()):
        train, test = train_test_split(
            np.arange(len(data.y)),
            test_size=TEST_FRACTION,
            stratify=data.y,
            random_state=split_seed(seed, repeat, index) % 2**31,
        )
        train, test = np.sort(train), np.sort(test)
        out[hospital] = HospitalSplit(
            X_train=data.X.iloc[train].reset_index(drop=True),
            y_train=data.y[train],
            X_test=data.X.iloc[test].reset_index(drop=True),
            y_test=data.y[test],
        )
    return out


def clinic_rows(y: np.ndarray, size: int, seed: int) -> np.ndarray:
    """Positions of a small clinic's ``size`` rows among a hospital's training rows ``y``.

    The first ``size`` positions of :func:`~pubsubml.experiments.pubsub.small.stratified_order`:
    class shares as in ``y`` to within one row, and nested (a clinic of 30 rows is part of the
    clinic of 60 drawn with the same seed), so results at different sizes are paired.

    Raises
    ------
    ValueError
        ``size`` outside ``[1, len(y)]``.

    Examples
    --------
    >>> y = np.array([0] * 40 + [1] * 60)
    >>> rows = clinic_rows(y, 30, seed=0)
    >>> len(rows), int(y[rows].sum()), set(rows) <= set(clinic_rows(y, 60, seed=0))
    (30, 18, True)
    """
    if not 1 <= size <= len(y):
        raise ValueError(f"a clinic of {size} rows from {len(y)}")
    return np.sort(stratified_order(np.asarray(y), seed)[:size])
