"""dp_sgd_defaults: a pure function of public inputs; Table 4."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pubsubml.errors import InvalidPrivacyParameterError
from pubsubml.learners import (
    TABLE4_HYPERPARAMETERS,
    DPMLPClassifier,
    dp_sgd_defaults,
)
from pubsubml.privacy.dpsgd import DPSGDConfig


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _data(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.random((n, 4))
    return X, (X[:, 0] + rng.normal(0, 0.1, n) > X[:, 1]).astype(int)


# ---- the rule ----------------------------------------------------------------------------------
def test_linear_defaults_are_full_batch_adam_for_100_steps() -> None:
    d = dp_sgd_defaults(1500, 1.0, 1e-5, 10)

    assert (d.batch_size, d.epochs, d.steps, d.optimizer, d.max_grad_norm) == (
        1500,
        100,
        100,
        "adam",
        1.0,
    )
    assert d.learning_rate == pytest.approx(0.2)  # reach 20 logits over 100 steps


def test_mlp_defaults_are_batches_of_a_third_for_the_paper_epochs() -> None:
    d = dp_sgd_defaults(1500, 1.0, 1e-5, 10, model="mlp")

    assert (d.batch_size, d.epochs, d.steps, d.learning_rate) == (500, 30, 90, 0.03)


def test_regression_reaches_twice_the_scaled_target_range() -> None:
    d = dp_sgd_defaults(1000, 1.0, 1e-5, 10, task="regression")

    assert d.learning_rate * d.steps == pytest.approx(2.0)


def test_wide_inputs_lower_the_learning_rate_by_the_row_norm_bound() -> None:
    narrow = dp_sgd_defaults(1000, 1.0, 1e-5, 10)
    wide = dp_sgd_defaults(1000, 1.0, 1e-5, 400)

    # ‖(x − ½, 1)‖ ≤ √(d/4 + 1) on the centred encoding: √101 for d = 400
    assert wide.learning_rate == pytest.approx(1.0 / math.sqrt(101))
    assert wide.learning_rate < narrow.learning_rate


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(1, 10**6),
    epsilon=st.one_of(st.none(), st.floats(0.01, 50.0)),
    width=st.integers(1, 5000),
    model=st.sampled_from(["linear", "mlp"]),
    task=st.sampled_from(["classification", "regression"]),
)
def test_steps_agree_with_the_engine_and_values_are_valid(
    n: int, epsilon: float | None, width: int, model: Any, task: Any
) -> None:
    d = dp_sgd_defaults(n, epsilon, 0.5 / n, width, model=model, task=task)

    config = DPSGDConfig(batch_size=d.batch_size, epochs=d.epochs, lr=d.learning_rate)
    assert config.steps_for(n) == d.steps
    assert 1 <= d.batch_size <= n and 0 < d.learning_rate <= 0.2
    assert d == dp_sgd_defaults(n, epsilon, 0.5 / n, width, model=model, task=task)


@pytest.mark.parametrize(
    ("args", "kwargs", "error"),
    [
        ((0, 1.0, 1e-5, 10), {}, ValueError),
        ((100, 1.0, 1e-5, 0), {}, ValueError),
        ((100, 0.0, 1e-5, 10), {}, InvalidPrivacyParameterError),
        ((100, 1.0, 0.02, 10), {}, InvalidPrivacyParameterError),
        ((100, 1.0, 1e-5, 10), {"model": "cnn"}, ValueError),
        ((100, 1.0, 1e-5, 10), {"task": "ranking"}, ValueError),
    ],
)
def test_bad_public_inputs_raise(
    args: tuple[Any, ...], kwargs: dict[str, Any], error: type
) -> None:
    with pytest.raises(error):
        dp_sgd_defaults(*args, **kwargs)


# ---- Table 4 -----------------------------------------------------------------------------------
def test_table4_preset_is_the_papers_setting() -> None:
    X, y = _data(600, 0)

    clf = DPMLPClassifier(
        classes=[0, 1], epsilon=1.0, random_state=0, **TABLE4_HYPERPARAMETERS
    ).fit(X, y)

    assert dict(TABLE4_HYPERPARAMETERS) == {
        "epochs": 30,
        "batch_size": 100,
        "learning_rate": 1e-3,
        "optimizer": "adam",
    }
    assert (clf.hyperparameters_.batch_size, clf.hyperparameters_.learning_rate) == (100, 1e-3)
    assert clf.steps_ == 30 * 6 and tuple(clf.hidden_layer_sizes) == (100, 50)
    with pytest.raises(TypeError):
        TABLE4_HYPERPARAMETERS["epochs"] = 1  # type: ignore[index]
