"""The hospitals as they are: labels, summaries paired by repeat, the target check, one repeat."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pubsubml.data.heart_disease import HOSPITALS
from pubsubml.experiments.heart_disease.hospitals import (
    HOSPITAL_METHODS,
    clinic_label,
    hospitals_task,
    pubsub_label,
    summarize_clinic,
    summarize_hospitals,
    targets,
)


def _fake() -> pd.DataFrame:
    rows = []
    own = {"cleveland": [0.80, 0.70, 0.90], "va": [0.70, 0.60, 0.65]}
    gain = {"cleveland": [0.00, 0.01, -0.01], "va": [-0.02, -0.01, -0.03]}
    for hospital in ("va", "cleveland"):  # out of HOSPITALS order on purpose
        for repeat in range(3):
            common = {"part": "hospitals", "hospital": hospital, "repeat": repeat, "auc": 0.8}
            common |= {"log_loss": 0.5}
            o = own[hospital][repeat]
            rows.append(common | {"method": "Own", "accuracy": o})
            rows.append(
                common
                | {"method": pubsub_label(1.0), "accuracy": o + gain[hospital][repeat]}
                | {"fallback": repeat == 0}
            )
            rows.append(common | {"method": "Pooled", "accuracy": o + 0.05})
    return pd.DataFrame(rows)


def test_labels() -> None:
    assert pubsub_label(4.0) == "PubSub-ML (ε = 4)" and pubsub_label(None) == "PubSub-ML*"
    assert HOSPITAL_METHODS[0] == "Own" and HOSPITAL_METHODS[-1] == "Pooled"
    assert clinic_label("cleveland") == "clinic from cleveland"


def test_summary_pairs_by_repeat_in_hospital_and_method_order() -> None:
    summary = summarize_hospitals(_fake())
    assert summary[["hospital", "method"]].values.tolist() == [
        ["cleveland", "Own"],
        ["cleveland", "PubSub-ML (ε = 1)"],
        ["cleveland", "Pooled"],
        ["va", "Own"],
        ["va", "PubSub-ML (ε = 1)"],
        ["va", "Pooled"],
    ]
    va = summary[(summary["hospital"] == "va") & (summary["method"] == "PubSub-ML (ε = 1)")]
    d = np.array([-0.02, -0.01, -0.03])
    se = d.std(ddof=1) / np.sqrt(3)
    assert va.iloc[0]["accuracy − Own"] == f"{d.mean():.3f} ± {se:.3f}"
    assert va.iloc[0]["fallback"] == "33%" and va.iloc[0]["n"] == 3
    pooled = summary[(summary["hospital"] == "va") & (summary["method"] == "Pooled")].iloc[0]
    assert pooled["accuracy − Own"] == "0.050 ± 0.000" and pooled["fallback"] == ""
    assert summary.iloc[0]["accuracy − Own"] == ""  # Own itself


def test_target_is_own_minus_one_point_at_every_hospital() -> None:
    check = targets(_fake())
    assert check["hospital"].tolist() == ["cleveland", "va"]
    assert check["met"].tolist() == ["yes", "no"]  # va loses 2 points on average
    assert targets(_fake(), tolerance=0.02)["met"].tolist() == ["yes", "yes"]


def test_clinic_summary_is_by_source_and_size() -> None:
    rows = []
    for repeat in range(2):
        for n in (30, 60):
            for method, acc in (("Own", 0.7), (pubsub_label(1.0), 0.75), ("PubSub-ML*", 0.8)):
                rows.append(
                    {"part": "clinic", "hospital": clinic_label("va"), "n_rows": n}
                    | {"repeat": repeat, "method": method, "accuracy": acc + n / 1000}
                    | {"auc": 0.7, "log_loss": 0.6}
                )
    summary = summarize_clinic(pd.DataFrame(rows))
    assert summary["n_rows"].tolist() == [30, 30, 30, 60, 60, 60]
    assert summary["accuracy − Own"].tolist()[1:3] == ["0.050 ± 0.000", "0.100 ± 0.000"]


@pytest.mark.slow
def test_one_repeat_scores_every_method_at_every_hospital() -> None:
    table = pd.DataFrame(hospitals_task(0, smoke=True))
    hosp = table[table["part"] == "hospitals"]
    assert set(hosp["hospital"]) == set(HOSPITALS)
    assert (hosp.groupby("hospital")["method"].apply(list) == [list(HOSPITAL_METHODS)] * 4).all()
    private = hosp[
        hosp["method"].str.startswith("PubSub-ML (") | hosp["method"].str.startswith("DP")
    ]
    assert (private["epsilon"] <= 4.0 + 1e-9).all()
    assert hosp[hosp["method"] == pubsub_label(0.5)]["epsilon"].max() <= 0.5 + 1e-9
    assert hosp["accuracy"].between(0, 1).all() and hosp["auc"].notna().all()
    clinic = table[table["part"] == "clinic"]
    assert set(clinic["n_rows"]) == {30} and set(clinic["hospital"]) == {clinic_label("cleveland")}
    assert hosp.groupby("hospital")["n_test"].first().to_dict() == {
        "cleveland": 104,
        "hungary": 100,
        "switzerland": 42,
        "va": 68,
    }
