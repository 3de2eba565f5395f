"""The options of ``heart-disease``: protocols, Flower rows and clinic repeats."""

from __future__ import annotations

from pubsubml.experiments.heart_disease.experiment import HEART_DISEASE_EXPERIMENT
from pubsubml.experiments.heart_disease.options import clinic_repeats, flower_on, protocols

EXP = HEART_DISEASE_EXPERIMENT


def test_both_protocols_run_flamby_first() -> None:
    assert protocols(EXP.options()) == ["flamby", "hospitals"]
    assert protocols(EXP.options(protocol="hospitals")) == ["hospitals"]


def test_flower_rows_are_on_unless_smoke() -> None:
    assert flower_on(EXP.options()) and not flower_on(EXP.options(smoke=True))
    assert not flower_on(EXP.options(flower=False))


def test_clinic_repeats_are_capped_by_the_repeats() -> None:
    assert clinic_repeats(EXP.options()) == 20
    assert clinic_repeats(EXP.options(folds=5)) == 5
    assert clinic_repeats(EXP.options(smoke=True)) == 1
