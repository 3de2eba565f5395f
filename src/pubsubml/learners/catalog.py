"""The learner catalog: names → estimator factories, with their task and privacy.

Sites choose their model types independently (pubsub-ml.txt §1, "model-agnostic"; §8.2.2), so
the code that trains a site's model looks it up by name here.  Built-ins are registered in one
explicit table by :func:`register_builtin_learners`, called once when this module is imported;
plug-ins call :func:`register_learner` themselves.  Unknown names raise
:class:`~pubsubml.errors.UnknownLearnerError`; there is no dispatch on strings anywhere else.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, get_args

from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LinearRegression, LogisticRegression

from pubsubml.errors import LearnerRegistrationError, UnknownLearnerError
from pubsubml.learners.dpsgd_linear import DPSGDLinearRegression, DPSGDLogisticRegression
from pubsubml.learners.forest import DPRandomForestClassifier
from pubsubml.learners.local import LocalModel
from pubsubml.learners.logistic import DPLogisticRegression
from pubsubml.learners.mlp import DPMLPClassifier, DPMLPRegressor
from pubsubml.learners.naive_bayes import DPGaussianNB
from pubsubml.schema import FeatureSchema

__all__ = [
    "LearnerSpec",
    "Task",
    "available_learners",
    "create_learner",
    "get_learner_spec",
    "register_builtin_learners",
    "register_learner",
    "unregister_learner",
]

Task = Literal["classification", "regression"]
_NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")


@dataclass(frozen=True)
class LearnerSpec:
    """A registered learner.

    Attributes
    ----------
    name : str
    factory : callable
        ``factory(**params)`` returns an unfitted estimator (a pubsubml learner or a plain
        scikit-learn estimator).
    private : bool
        Whether the fitted estimator carries a finite DP guarantee (``epsilon_``, ``delta_``,
        ``privacy_events_``).
    task : {"classification", "regression"}
    """

    name: str
    factory: Callable[..., Any]
    private: bool
    task: Task


_CATALOG: dict[str, LearnerSpec] = {}


def register_learner(
    name: str,
    factory: Callable[..., Any],
    *,
    private: bool,
    task: Task,
    overwrite: bool = False,
) -> None:
    """Register ``factory`` under ``name``.

    Parameters
    ----------
    name : str
        Lower-case letters, digits and ``_``, starting with a letter (at most 64 characters).
    factory : callable
        ``factory(**params)`` returns an unfitted estimator; a class works.
    private : bool
        True for DP learners.
    task : {"classification", "regression"}
    overwrite : bool, default=False
        Replace an existing registration instead of raising.

    Raises
    ------
    LearnerRegistrationError
        On a malformed name, a non-callable factory, a bad ``private`` or ``task``, or a name
        already registered without ``overwrite=True``.  The catalog is unchanged.

    Examples
    --------
    >>> from sklearn.svm import SVC
    >>> register_learner("svc_example", SVC, private=False, task="classification")
    >>> "svc_example" in available_learners(private=False)
    True
    >>> unregister_learner("svc_example")
    """
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise LearnerRegistrationError(
            f"invalid learner name {name!r}: use lower-case letters, digits and '_', starting "
            "with a letter"
        )
    if not callable(factory):
        raise LearnerRegistrationError(f"factory for {name!r} is not callable: {factory!r}")
    if not isinstance(private, bool):
        raise LearnerRegistrationError(f"private must be a bool, got {private!r}")
    if task not in get_args(Task):
        raise LearnerRegistrationError(f"task must be one of {list(get_args(Task))}, got {task!r}")
    if name in _CATALOG and not overwrite:
        raise LearnerRegistrationError(
            f"learner {name!r} is already registered; pass overwrite=True to replace it"
        )
    _CATALOG[name] = LearnerSpec(name=name, factory=factory, private=private, task=task)


def unregister_learner(name: str) -> None:
    """Remove a registration.

    Raises
    ------
    UnknownLearnerError
        When ``name`` is not registered.
    """
    get_learner_spec(name)
    del _CATALOG[name]


def get_learner_spec(name: str) -> LearnerSpec:
    """The :class:`LearnerSpec` registered under ``name``.

    Raises
    ------
    UnknownLearnerError
        Listing the registered names.
    """
    try:
        return _CATALOG[name]
    except (KeyError, TypeError):
        raise UnknownLearnerError(
            f"unknown learner {name!r}; registered learners: {', '.join(sorted(_CATALOG))}"
        ) from None


def create_learner(name: str, **params: Any) -> Any:
    """A new, unfitted estimator of the learner ``name`` built with ``params``.

    Raises
    ------
    UnknownLearnerError
        When ``name`` is not registered (the message lists the registered names).
    TypeError
        When the factory does not accept ``params``.

    Examples
    --------
    >>> create_learner("dp_gaussian_nb", classes=[0, 1], epsilon=0.5).epsilon
    0.5
    """
    return get_learner_spec(name).factory(**params)


def available_learners(task: Task | None = None, private: bool | None = None) -> list[str]:
    """Sorted names of the registered learners, optionally filtered by task and privacy.

    Examples
    --------
    >>> "dp_logistic_regression" in available_learners(task="classification", private=True)
    True
    """
    return sorted(
        spec.name
        for spec in _CATALOG.values()
        if (task is None or spec.task == task) and (private is None or spec.private == private)
    )


# ---- built-in learners -------------------------------------------------------------------
def _mlp_classifier(**params: Any) -> DPMLPClassifier:
    return DPMLPClassifier(**params, dp=False)


def _mlp_regressor(**params: Any) -> DPMLPRegressor:
    return DPMLPRegressor(**params, dp=False)


def _local_logistic_regression(
    *, schema: FeatureSchema | None = None, classes: Any = None, **params: Any
) -> LocalModel:
    return LocalModel(estimator=LogisticRegression(**params), schema=schema, classes=classes)


def _local_random_forest(
    *, schema: FeatureSchema | None = None, classes: Any = None, **params: Any
) -> LocalModel:
    return LocalModel(estimator=RandomForestClassifier(**params), schema=schema, classes=classes)


def _local_linear_regression(*, schema: FeatureSchema | None = None, **params: Any) -> LocalModel:
    return LocalModel(estimator=LinearRegression(**params), schema=schema)


_BUILTINS: tuple[tuple[str, Callable[..., Any], bool, Task], ...] = (
    # name                     factory                      private  task
    ("dp_gaussian_nb", DPGaussianNB, True, "classification"),
    ("dp_logistic_regression", DPLogisticRegression, True, "classification"),
    ("dp_mlp_classifier", DPMLPClassifier, True, "classification"),
    ("dp_mlp_regressor", DPMLPRegressor, True, "regression"),
    ("dp_random_forest", DPRandomForestClassifier, True, "classification"),
    ("dp_sgd_linear", DPSGDLinearRegression, True, "regression"),
    ("dp_sgd_logistic", DPSGDLogisticRegression, True, "classification"),
    ("linear_regression", _local_linear_regression, False, "regression"),
    ("logistic_regression", _local_logistic_regression, False, "classification"),
    ("mlp_classifier", _mlp_classifier, False, "classification"),
    ("mlp_regressor", _mlp_regressor, False, "regression"),
    ("random_forest", _local_random_forest, False, "classification"),
)


def register_builtin_learners(*, overwrite: bool = False) -> None:
    """Register the built-in learners of pubsubml (called once at import of this module).

    ``logistic_regression``, ``random_forest`` and ``linear_regression`` are
    :class:`~pubsubml.learners.local.LocalModel` over the scikit-learn estimator of that name;
    their factory passes ``schema`` (and ``classes``) to the LocalModel and every other parameter
    to the scikit-learn estimator.  ``mlp_classifier``/``mlp_regressor`` are the MLPs with
    ``dp=False``.  ``dp_sgd_logistic``/``dp_sgd_linear`` are the DP-SGD linear models
    (``schema=``, ``classes=`` for the classifier, ``epsilon=``, ``delta=``, ``random_state=``;
    the rest ``"auto"``).
    """
    for name, factory, private, task in _BUILTINS:
        register_learner(name, factory, private=private, task=task, overwrite=overwrite)


register_builtin_learners()
