"""The own model's candidates (pubsub-ml.txt §4 Step 1; the Own baseline of §7.3)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

pytestmark = pytest.mark.usefixtures("one_thread")


def test_default_network_does_not_underfit() -> None:
    from pubsubml.methods import OwnLearner

    rng = np.random.default_rng(3)
    X = pd.DataFrame(rng.random((200, 4)), columns=["a", "b", "c", "d"])
    y = (X["a"] + X["b"] > 1).astype(int).to_numpy()
    Xt = pd.DataFrame(rng.random((2000, 4)), columns=["a", "b", "c", "d"])
    yt = (Xt["a"] + Xt["b"] > 1).astype(int).to_numpy()
    assert OwnLearner(kind="mlp", random_state=0).fit(X, y).score(Xt, yt) > 0.9
