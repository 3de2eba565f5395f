"""Tests of pubsubml.methods.pubsub.customizer_params: the Customizer's parameters are checked
before anything is fitted, and cloning shares what is fitted and read-only."""

from __future__ import annotations

import pytest
from sklearn.base import clone

from methods.pubsub.conftest import Threshold, _frame
from pubsubml.errors import DataValidationError, SchemaMismatchError
from pubsubml.methods import Customizer
from pubsubml.methods.pubsub.own_crossfit import CrossFitStore
from pubsubml.schema import FeatureSchema

pytestmark = pytest.mark.usefixtures("one_thread")


def test_bad_input_raises_and_changes_nothing() -> None:
    X, y = _frame(100, 5)
    c = Customizer(models=[Threshold(0.5)], random_state=0)
    with pytest.raises(SchemaMismatchError):
        c.fit(X.to_numpy(), y)
    with pytest.raises(DataValidationError):
        c.fit(X, y[:-1])
    with pytest.raises(SchemaMismatchError, match="not in the public schema"):
        Customizer(schema=FeatureSchema.numeric(["x0"]), random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="top_m"):
        Customizer(top_m=0).fit(X, y)
    with pytest.raises(ValueError, match="nothing to customize"):
        Customizer(own_model=None).fit(X, y)
    assert not hasattr(c, "fusion_model_")


def test_fit_top_ms_refuses_bad_configurations_before_fitting() -> None:
    X, y = _frame(100, 6)
    base = Customizer(models=[Threshold(0.5)], own_model=None, random_state=0)
    with pytest.raises(ValueError, match="top_ms is empty"):
        base.fit_top_ms(X, y, [])
    with pytest.raises(ValueError, match="top_m must be a positive integer"):
        base.fit_top_ms(X, y, [None, 0])


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"task": "clustering"}, "task must be"),
        ({"cv": 1}, "cv must be"),
        ({"fusion_model": "tree"}, "unknown fusion_model"),
        ({"selection_metric": "auc"}, "unknown selection_metric"),
        ({"own_model": "svm"}, "unknown own_model"),
    ],
)
def test_bad_parameters_are_refused_with_their_name(params: dict[str, object], match: str) -> None:
    X, y = _frame(60, 0)
    with pytest.raises(ValueError, match=match):
        Customizer(models=[Threshold(0.5)], random_state=0, **params).fit(X, y)  # type: ignore[arg-type]


def test_clone_shares_the_models_the_schema_and_the_cross_fit_store() -> None:
    schema = FeatureSchema.numeric(["x0", "x1", "x2"])
    models, store = [Threshold(0.5)], CrossFitStore()
    twin = clone(Customizer(models=models, schema=schema, cross_fits=store, top_m=2))
    assert twin.models is models and twin.schema is schema and twin.cross_fits is store
    assert twin.top_m == 2
