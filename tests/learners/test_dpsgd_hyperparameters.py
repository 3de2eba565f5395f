"""What ``"auto"`` resolves to in a DP-SGD network, from public inputs only (pubsub-ml.txt §8)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import torch

from pubsubml.learners import DPMLPClassifier, DPMLPRegressor, dp_sgd_defaults


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


# ---- the networks ------------------------------------------------------------------------------
def test_private_network_auto_takes_the_dp_defaults() -> None:
    X, y = _data(600, 0)
    clf = DPMLPClassifier(
        classes=[0, 1], hidden_layer_sizes=(8,), target_epsilon=1.0, random_state=0
    )

    clf.fit(X, y)

    expected = dp_sgd_defaults(600, 1.0, 1e-5, 4, model="mlp")
    assert clf.hyperparameters_ == expected
    assert (clf.hyperparameters_.batch_size, clf.steps_) == (200, 90)


def test_network_defaults_do_not_depend_on_the_private_rows() -> None:
    (Xa, ya), (Xb, yb) = _data(600, 0), _data(600, 1)
    params: dict[str, Any] = {
        "classes": [0, 1],
        "hidden_layer_sizes": (8,),
        "target_epsilon": 1.0,
        "random_state": 0,
    }

    a = DPMLPClassifier(**params).fit(Xa, ya)
    b = DPMLPClassifier(**params).fit(Xb, 1 - yb)

    assert a.hyperparameters_ == b.hyperparameters_
    assert a.privacy_events_ == b.privacy_events_


def test_non_private_network_auto_keeps_the_former_setting() -> None:
    X, y = _data(250, 0)

    reg = DPMLPRegressor(hidden_layer_sizes=(8,), epochs=2, dp=False, random_state=0).fit(X, y)

    assert (reg.hyperparameters_.batch_size, reg.hyperparameters_.learning_rate) == (100, 1e-3)
    assert reg.steps_ == 2 * math.ceil(250 / 100)


def test_explicit_learning_rate_behaves_exactly_as_before() -> None:
    X, y = _data(300, 0)
    params: dict[str, Any] = {
        "classes": [0, 1],
        "hidden_layer_sizes": (8,),
        "epochs": 3,
        "batch_size": 50,
        "learning_rate": 1e-2,
        "noise_multiplier": 1.0,
        "random_state": 0,
    }

    clf = DPMLPClassifier(**params).fit(X, y)

    assert clf.hyperparameters_.learning_rate == 1e-2
    assert (clf.sample_rate_, clf.steps_) == (50 / 300, 3 * 6)


def test_a_learning_rate_set_alone_keeps_the_former_batch_of_100() -> None:
    X, y = _data(600, 0)

    clf = DPMLPClassifier(
        classes=[0, 1], hidden_layer_sizes=(8,), epochs=2, learning_rate=1e-2, noise_multiplier=1.0
    ).fit(X, y)

    assert (clf.hyperparameters_.batch_size, clf.hyperparameters_.learning_rate) == (100, 1e-2)
    assert (clf.sample_rate_, clf.steps_) == (100 / 600, 2 * 6)
