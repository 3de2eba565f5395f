"""The four hospitals as they are: each with the features it records, PubSub-ML against Own.

Each repeat splits every hospital again (:func:`~.splits.hospital_splits`: stratified, 34 % test)
and runs, per hospital as the subscriber (:func:`hospitals_task`):

* **Own**: its CV-chosen own model on its training part;
* **PubSub-ML (ε = 0.5 / 1 / 4)**: it subscribes to the other three hospitals' DP logistic models
  (each trained on that hospital's training part and columns, DP-SGD at ε, δ = 1e-5) and
  customizes on its training part; **PubSub-ML***: the same with non-private publishers;
* **DP-FedAvg (V)** and **(F)** at ε = 1: one federation of the four training parts per repeat
  (record-level DP-SGD at every hospital), vanilla and fine-tuned by the hospital without DP;
* **Pooled**: the own learner on the four training parts together (each extended to the 13
  features with the public defaults), non-private: a ceiling reference, not a private method.

Every publisher publishes one model per repeat and budget, which all three subscribers use.
Scores: accuracy, ROC AUC and log-loss on the hospital's test part.

**A new small clinic** (``part = "clinic"``): 30, 60 or 100 patients drawn from one hospital's
training part (nested, stratified: :func:`~.splits.clinic_rows`) subscribe to the other three
hospitals' DP models (ε = 1) of the same repeat; it is scored, with its Own, on that hospital's
test part.

References
----------
pubsub-ml.txt §1 (small sites), §7.3 (Own, PubSub-ML*, DP-FedAvg (V)/(F)), §8.1.3 (sites with
different features: defaults for the missing ones), §8.2.1 (ε from 0.25 to 1).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from pubsubml.data.heart_disease import HOSPITALS
from pubsubml.data.heart_disease_schema import HEART_SCHEMA
from pubsubml.experiments.heart_disease.methods import (
    SMOKE_TRAINING,
    TRAINING,
    Training,
    customize,
    fit_federated,
    fit_own,
    hospital_models,
    scores,
)
from pubsubml.experiments.heart_disease.splits import clinic_rows, hospital_splits, split_seed
from pubsubml.experiments.reports import mean_se_cell
from pubsubml.experiments.runner import Record
from pubsubml.methods.pubsub.own_crossfit import CrossFitStore

__all__ = [
    "CLINIC_SIZES",
    "CLINIC_SOURCES",
    "EPSILONS",
    "HOSPITAL_METHODS",
    "clinic_label",
    "hospitals_task",
    "pubsub_label",
    "summarize_clinic",
    "summarize_hospitals",
    "targets",
]

EPSILONS: tuple[float, ...] = (0.5, 1.0, 4.0)
"""The publishers' budgets of the PubSub-ML rows."""

CLINIC_SIZES: tuple[int, ...] = (30, 60, 100)
"""Patients of the new small clinic."""

CLINIC_SOURCES: tuple[str, ...] = ("cleveland", "hungary", "va")
"""The hospitals a clinic is drawn from, in turn (Switzerland's 81 training patients, 5 of them
healthy, are too few for a 100-patient clinic with both classes in every CV fold)."""

_SMOKE_CLINIC = ((30,), ("cleveland",))


def pubsub_label(epsilon: float | None) -> str:
    """``"PubSub-ML (ε = 1)"``, or ``"PubSub-ML*"`` for non-private publishers.

    Examples
    --------
    >>> pubsub_label(0.5), pubsub_label(None)
    ('PubSub-ML (ε = 0.5)', 'PubSub-ML*')
    """
    return "PubSub-ML*" if epsilon is None else f"PubSub-ML (ε = {epsilon:g})"


HOSPITAL_METHODS: tuple[str, ...] = (
    "Own",
    *(pubsub_label(e) for e in EPSILONS),
    pubsub_label(None),
    "DP-FedAvg (V)",
    "DP-FedAvg (F)",
    "Pooled",
)
"""The methods of the hospitals table, in its order."""


def clinic_label(hospital: str) -> str:
    """The ``hospital`` column of a clinic drawn from ``hospital``.

    Examples
    --------
    >>> clinic_label("va")
    'clinic from va'
    """
    return f"clinic from {hospital}"


def _record(
    part: str, hospital: str, method: str, model: Any, X: pd.DataFrame, y: np.ndarray, **extra: Any
) -> Record:
    return {
        "part": part,
        "hospital": hospital,
        "method": method,
        "n_test": len(y),
        **scores(model, X, y),
        **extra,
    }


def _choice(model: Any) -> str:
    return str(getattr(model, "choice_", "constant"))


def hospitals_task(
    repeat: int, *, smoke: bool = False, seed: int = 0, clinic: bool = True
) -> list[Record]:
    """Every method at every hospital for one repeat, and the small clinics.

    Parameters
    ----------
    repeat : int
        Draws the split, the models' seeds and the clinics' rows.
    smoke : bool, default=False
        Seconds-long training, one clinic of 30 patients from Cleveland.
    seed : int, default=0
        The run's seed.
    clinic : bool, default=True
        Run the small clinics too.

    Returns
    -------
    list of dict
        ``part`` ("hospitals" or "clinic"), ``hospital``, ``method``, ``epsilon`` (the largest ε
        any site spent; ``inf`` without DP), ``n_train``, ``n_test``, ``accuracy``, ``correct``,
        ``auc``, ``log_loss``; ``own_choice`` (Own, PubSub-ML), ``fallback`` (PubSub-ML) and
        ``n_rows`` (clinic).
    """
    training = SMOKE_TRAINING if smoke else TRAINING
    parts = hospital_splits(repeat, seed)
    rs = split_seed(seed, repeat) % 100_000
    data = {h: (p.X_train, p.y_train) for h, p in parts.items()}
    stores = {h: CrossFitStore() for h in HOSPITALS}
    rows: list[Record] = []

    def add(hospital: str, method: str, model: Any, *, extend: bool = False, **extra: Any) -> None:
        p = parts[hospital]
        X = HEART_SCHEMA.extend(p.X_test) if extend else p.X_test
        info = {"n_train": len(p.y_train)} | extra
        rows.append(_record("hospitals", hospital, method, model, X, p.y_test, **info))

    for h, (X, y) in data.items():
        own = fit_own(X, y, HEART_SCHEMA, seed=rs, kind=training.own_kind, store=stores[h])
        add(h, "Own", own, epsilon=math.inf, own_choice=_choice(own))
    published: dict[float | None, dict[str, Any]] = {}
    for eps in (*EPSILONS, None):
        models = hospital_models(data, HEART_SCHEMA, epsilon=eps, seed=rs, training=training)
        published[eps] = models
        spent = _spent(models)
        for h, (X, y) in data.items():
            others = [models[o] for o in HOSPITALS if o != h]
            sub, fallback = customize(
                others, X, y, HEART_SCHEMA, seed=rs, store=stores[h], kind=training.own_kind
            )
            add(
                h,
                pubsub_label(eps),
                sub,
                epsilon=max(spent[o] for o in HOSPITALS if o != h),
                fallback=fallback,
                own_choice=_choice(getattr(sub, "own_model_", sub)),
            )
    fl = fit_federated(
        "FedAvg", list(data.values()), HEART_SCHEMA, epsilon=1.0, seed=rs, training=training
    )
    from pubsubml.methods.federated import fine_tune

    for h, (X, y) in data.items():
        add(h, "DP-FedAvg (V)", fl, epsilon=float(fl.epsilon_))
        tuned = fine_tune(fl, X, y, epochs=training.fine_tune_epochs, random_state=rs)
        add(h, "DP-FedAvg (F)", tuned, epsilon=float(fl.epsilon_))
    X_pool = pd.concat([HEART_SCHEMA.extend(X) for X, _ in data.values()], ignore_index=True)
    y_pool = np.concatenate([y for _, y in data.values()])
    pooled = fit_own(X_pool, y_pool, HEART_SCHEMA, seed=rs, kind=training.own_kind)
    for h in HOSPITALS:
        add(h, "Pooled", pooled, extend=True, epsilon=math.inf, own_choice=_choice(pooled))
    if clinic:
        rows += _clinics(parts, published, training, seed=seed, repeat=repeat, rs=rs, smoke=smoke)
    return rows


def _spent(models: Mapping[str, Any]) -> dict[str, float]:
    return {h: float(getattr(m.estimator, "epsilon_", math.inf)) for h, m in models.items()}


def _clinics(
    parts: Mapping[str, Any],
    published: Mapping[float | None, Mapping[str, Any]],
    training: Training,
    *,
    seed: int,
    repeat: int,
    rs: int,
    smoke: bool,
) -> list[Record]:
    """Own, PubSub-ML (ε = 1) and PubSub-ML* of a small clinic drawn from each source."""
    sizes, sources = _SMOKE_CLINIC if smoke else (CLINIC_SIZES, CLINIC_SOURCES)
    rows: list[Record] = []
    for index, source in enumerate(sources):
        p = parts[source]
        draw = split_seed(seed, repeat, 1_000 + index)
        for n in sizes:
            picked = clinic_rows(p.y_train, n, draw)
            X, y = p.X_train.iloc[picked].reset_index(drop=True), p.y_train[picked]
            store = CrossFitStore()
            info = {"n_rows": n, "n_train": n}
            own = fit_own(X, y, HEART_SCHEMA, seed=rs, kind=training.own_kind, store=store)
            where = clinic_label(source)
            rows.append(
                _record("clinic", where, "Own", own, p.X_test, p.y_test, epsilon=math.inf, **info)
            )
            for eps in (1.0, None):
                models = published[eps]
                others = [models[o] for o in HOSPITALS if o != source]
                sub, fallback = customize(
                    others, X, y, HEART_SCHEMA, seed=rs, store=store, kind=training.own_kind
                )
                spent = max(_spent(models)[o] for o in HOSPITALS if o != source)
                rows.append(
                    _record(
                        "clinic",
                        where,
                        pubsub_label(eps),
                        sub,
                        p.X_test,
                        p.y_test,
                        epsilon=spent,
                        fallback=fallback,
                        **info,
                    )
                )
    return rows


# ---- summaries --------------------------------------------------------------------------------
_METRICS = {"accuracy": "accuracy", "auc": "ROC AUC", "log_loss": "log-loss"}


def _mean_se(values: pd.Series, digits: int = 3) -> str:
    return mean_se_cell(values, digits, missing="")


def _paired(part: pd.DataFrame, keys: Sequence[str]) -> pd.Series:
    """Per row of ``part``, accuracy minus Own's accuracy on the same repeat (and keys)."""
    own = part[part["method"] == "Own"].set_index([*keys, "repeat"])["accuracy"]
    index = pd.MultiIndex.from_frame(part[[*keys, "repeat"]])
    return pd.Series(part["accuracy"].to_numpy() - own.reindex(index).to_numpy(), index=part.index)


def _summary(table: pd.DataFrame, keys: list[str], order: Sequence[str]) -> pd.DataFrame:
    frame = table.copy()
    frame["diff"] = _paired(frame, keys)
    rank = {m: i for i, m in enumerate(order)}
    frame["_m"] = frame["method"].map(rank).fillna(len(rank))
    out = []
    for key, part in frame.sort_values([*keys, "_m"], kind="stable").groupby(
        [*keys, "_m"], sort=False
    ):
        row: dict[str, Any] = dict(zip(keys, key[: len(keys)], strict=True))
        row["method"] = part["method"].iloc[0]
        for column, name in _METRICS.items():
            row[name] = _mean_se(part[column])
        row["accuracy − Own"] = "" if row["method"] == "Own" else _mean_se(part["diff"])
        if "fallback" in part and part["fallback"].notna().any():
            row["fallback"] = f"{part['fallback'].astype(float).mean():.0%}"
        else:
            row["fallback"] = ""
        row["n"] = int(part["repeat"].nunique())
        out.append(row)
    return pd.DataFrame(out)


def summarize_hospitals(table: pd.DataFrame) -> pd.DataFrame:
    """Mean ± SE over repeats per hospital and method, with the paired gain over Own.

    Parameters
    ----------
    table : DataFrame
        :func:`hospitals_task`'s records of part ``"hospitals"``, with a ``repeat`` column.

    Returns
    -------
    DataFrame
        ``hospital``, ``method``, ``accuracy``, ``ROC AUC``, ``log-loss`` (mean ± SE over
        repeats), ``accuracy − Own`` (paired by repeat), ``fallback`` (share of repeats in which
        CUSTOMIZE kept the own model alone), ``n`` (repeats).
    """
    part = table[table["part"] == "hospitals"]
    part = part.assign(_h=part["hospital"].map({h: i for i, h in enumerate(HOSPITALS)}))
    part = part.sort_values("_h", kind="stable").drop(columns="_h")
    return _summary(part, ["hospital"], HOSPITAL_METHODS)


def summarize_clinic(table: pd.DataFrame) -> pd.DataFrame:
    """As :func:`summarize_hospitals` for the small clinics, by source hospital and size."""
    part = table[table["part"] == "clinic"].copy()
    part["n_rows"] = part["n_rows"].astype(int)
    order = ["Own", pubsub_label(1.0), pubsub_label(None)]
    return _summary(part, ["hospital", "n_rows"], order)


def targets(table: pd.DataFrame, tolerance: float = 0.01) -> pd.DataFrame:
    """Whether PubSub-ML at ε = 1 is within ``tolerance`` of Own's accuracy at every hospital.

    Returns
    -------
    DataFrame
        ``hospital``, ``Own``, ``PubSub-ML (ε = 1)`` (mean accuracy), ``difference`` (mean ± SE
        over repeats, paired), ``met`` ("yes" when the mean difference is ≥ −tolerance).

    Examples
    --------
    >>> t = pd.DataFrame({"part": "hospitals", "hospital": "va", "repeat": [0, 0, 1, 1],
    ...                   "method": ["Own", "PubSub-ML (ε = 1)"] * 2,
    ...                   "accuracy": [0.80, 0.78, 0.70, 0.71]})
    >>> targets(t)[["difference", "met"]].values.tolist()
    [['-0.005 ± 0.015', 'yes']]
    """
    part = table[table["part"] == "hospitals"].copy()
    part["diff"] = _paired(part, ["hospital"])
    label = pubsub_label(1.0)
    rows = []
    for hospital in [h for h in HOSPITALS if h in set(part["hospital"])]:
        here = part[part["hospital"] == hospital]
        ours = here[here["method"] == label]
        diff = float(ours["diff"].mean())
        rows.append(
            {
                "hospital": hospital,
                "Own": f"{here[here['method'] == 'Own']['accuracy'].mean():.3f}",
                label: f"{ours['accuracy'].mean():.3f}",
                "difference": _mean_se(ours["diff"]),
                "met": "yes" if diff >= -tolerance - 1e-12 else "no",
            }
        )
    return pd.DataFrame(rows)
