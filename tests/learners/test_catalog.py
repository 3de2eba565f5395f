"""The learner catalog: explicit registration, lookup, filters and errors."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LinearRegression
from sklearn.svm import SVC

from pubsubml.errors import LearnerRegistrationError, UnknownLearnerError
from pubsubml.learners import (
    DPGaussianNB,
    DPLogisticRegression,
    DPMLPClassifier,
    DPMLPRegressor,
    DPRandomForestClassifier,
    DPSGDLinearRegression,
    DPSGDLogisticRegression,
    LocalModel,
)
from pubsubml.learners.catalog import (
    available_learners,
    create_learner,
    get_learner_spec,
    register_builtin_learners,
    register_learner,
    unregister_learner,
)
from pubsubml.schema import FeatureSchema

BUILTINS = {
    "dp_gaussian_nb": (DPGaussianNB, True, "classification"),
    "dp_logistic_regression": (DPLogisticRegression, True, "classification"),
    "dp_mlp_classifier": (DPMLPClassifier, True, "classification"),
    "dp_mlp_regressor": (DPMLPRegressor, True, "regression"),
    "dp_random_forest": (DPRandomForestClassifier, True, "classification"),
    "dp_sgd_linear": (DPSGDLinearRegression, True, "regression"),
    "dp_sgd_logistic": (DPSGDLogisticRegression, True, "classification"),
    "linear_regression": (LocalModel, False, "regression"),
    "logistic_regression": (LocalModel, False, "classification"),
    "mlp_classifier": (DPMLPClassifier, False, "classification"),
    "mlp_regressor": (DPMLPRegressor, False, "regression"),
    "random_forest": (LocalModel, False, "classification"),
}


@pytest.fixture
def scratch_name() -> Iterator[str]:
    """A learner name that is removed again after the test."""
    name = "scratch_learner"
    yield name
    if name in available_learners():
        unregister_learner(name)


def test_builtins_are_registered_with_their_task_and_privacy() -> None:
    for name, (cls, private, task) in BUILTINS.items():
        spec = get_learner_spec(name)

        assert isinstance(create_learner(name), cls)
        assert (spec.private, spec.task) == (private, task)
    assert set(BUILTINS) <= set(available_learners())


def test_available_learners_is_sorted_and_filters() -> None:
    names = available_learners()

    assert names == sorted(names)
    assert set(available_learners(private=True)) >= {n for n, v in BUILTINS.items() if v[1]}
    assert "dp_mlp_regressor" in available_learners(task="regression", private=True)
    assert "dp_mlp_regressor" not in available_learners(task="classification")
    assert "random_forest" not in available_learners(private=True)


def test_non_private_mlps_are_the_mlps_without_dp() -> None:
    assert create_learner("mlp_classifier").dp is False
    assert create_learner("mlp_regressor", epochs=3).get_params()["epochs"] == 3
    with pytest.raises(TypeError):
        create_learner("mlp_classifier", dp=True)


def test_local_factories_route_parameters() -> None:
    schema = FeatureSchema.numeric(["a"])

    model = create_learner("random_forest", schema=schema, classes=[0, 1], n_estimators=7)

    assert model.schema is schema and model.classes == [0, 1]
    assert isinstance(model.estimator, RandomForestClassifier)
    assert model.estimator.n_estimators == 7


def test_create_passes_params_to_the_factory() -> None:
    clf = create_learner("dp_logistic_regression", classes=["a", "b"], epsilon=0.3, C=2.0)

    assert (clf.classes, clf.epsilon, clf.C) == (["a", "b"], 0.3, 2.0)
    with pytest.raises(TypeError):
        create_learner("dp_gaussian_nb", no_such_parameter=1)


def test_unknown_name_lists_the_known_ones() -> None:
    with pytest.raises(UnknownLearnerError) as info:
        create_learner("dp_svm")

    message = str(info.value)
    assert (
        "dp_svm" in message and "dp_logistic_regression" in message and "random_forest" in message
    )
    assert isinstance(info.value, KeyError)
    with pytest.raises(UnknownLearnerError):
        get_learner_spec(["not", "hashable"])  # type: ignore[arg-type]


def test_register_plain_sklearn_estimator(scratch_name: str) -> None:
    register_learner(scratch_name, SVC, private=False, task="classification")

    model = create_learner(scratch_name, C=3.0)

    assert type(model) is SVC and model.C == 3.0
    assert scratch_name in available_learners(task="classification", private=False)


def test_duplicate_registration_raises_unless_overwrite(scratch_name: str) -> None:
    register_learner(scratch_name, SVC, private=False, task="classification")

    with pytest.raises(LearnerRegistrationError, match="already registered"):
        register_learner(scratch_name, LinearRegression, private=False, task="regression")
    assert get_learner_spec(scratch_name).factory is SVC

    register_learner(
        scratch_name, LinearRegression, private=False, task="regression", overwrite=True
    )
    assert get_learner_spec(scratch_name).task == "regression"


def test_builtin_registration_is_not_repeated_silently() -> None:
    with pytest.raises(LearnerRegistrationError):
        register_builtin_learners()
    register_builtin_learners(overwrite=True)

    assert get_learner_spec("dp_gaussian_nb").factory is DPGaussianNB


@pytest.mark.parametrize(
    ("name", "factory", "private", "task"),
    [
        ("Bad Name", SVC, False, "classification"),
        ("", SVC, False, "classification"),
        (3, SVC, False, "classification"),
        ("ok_name", "SVC", False, "classification"),
        ("ok_name", SVC, "no", "classification"),
        ("ok_name", SVC, False, "clustering"),
    ],
)
def test_invalid_registration_raises_and_changes_nothing(
    name: object, factory: object, private: object, task: object
) -> None:
    before = available_learners()

    with pytest.raises(LearnerRegistrationError):
        register_learner(name, factory, private=private, task=task)  # type: ignore[arg-type]

    assert available_learners() == before


def test_unregister_unknown_raises() -> None:
    with pytest.raises(UnknownLearnerError):
        unregister_learner("never_registered")
