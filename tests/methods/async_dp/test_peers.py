"""Algorithm 1 with the learner and the owners in separate OS processes (HTTP on 127.0.0.1)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from pubsubml.errors import DataValidationError
from pubsubml.methods.async_dp.peers import run_async_dp_processes
from pubsubml.methods.async_dp.theory import gradient_norm_bound


@pytest.mark.parametrize("style", ["request", "broadcast"])
def test_processes_run_algorithm_1_and_learner_never_sees_rows(style: str) -> None:
    rng = np.random.default_rng(3)
    p, horizon, eps = 3, 12, [2.0, 4.0]
    parts = []
    for n in (60, 90):
        X = rng.uniform(-0.5, 0.5, (n, p))
        parts.append((X, np.clip(X @ [0.3, -0.2, 0.1] + 0.1 * rng.normal(size=n), -1, 1)))
    xi = gradient_norm_bound(x_l1_bound=1.5, y_abs_bound=1.0, theta_max=1.0)
    result = run_async_dp_processes(
        parts, epsilons=eps, horizon=horizon, clip_norm=xi, theta_max=1.0, reg=1e-3, rho=1.0,
        style=style, clock_unit_s=0.01, timeout_s=90.0, seed=1,
    )  # fmt: skip

    # Algorithm 1 ran T iterations, one owner at a time, in increasing time.
    assert len(result.owners) == horizon and np.all(np.diff(result.times) > 0)
    assert result.theta_learner.shape == (p,) and np.abs(result.theta_learner).max() <= 1.0
    # Each owner enforced its own budget: k_i answers cost k_i·ε_i/T.
    answers = [r["answers"] for r in result.owner_reports]
    assert answers == np.bincount(result.owners, minlength=2).tolist()
    for report, budget in zip(result.owner_reports, eps, strict=True):
        assert report["spent_epsilon"] == pytest.approx(report["answers"] * budget / horizon)

    # The learner received registrations, requests and p-vectors of noisy gradients, nothing else.
    raw = {float(v) for X, y in parts for v in np.concatenate([X.ravel(), y])}
    allowed = {"/register": {"owner", "n_records"}, "/request": {"owner"},
               "/answer": {"owner", "ticket", "gradient"}}  # fmt: skip
    gradients = 0
    for message in result.messages:
        body = message["body"]
        assert set(body) == allowed[message["path"]]
        assert all(isinstance(v, int) for k, v in body.items() if k != "gradient")
        if message["path"] == "/answer":
            gradients += 1
            assert len(body["gradient"]) == p and not raw & set(body["gradient"])
    assert gradients == horizon
    assert sorted(m["body"]["n_records"] for m in result.messages if m["path"] == "/register") == [
        60,
        90,
    ]


def _children() -> set[int]:
    """PIDs of this process's children (Linux /proc)."""
    me, found = os.getpid(), set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == me:
            found.add(int(stat.parent.name))
    return found


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")
def test_run_is_bounded_and_cleans_up() -> None:
    before = _children()
    X = np.zeros((5, 2))
    with pytest.raises(DataValidationError, match="did not"):
        run_async_dp_processes(
            [(X, np.zeros(5))] * 2, epsilons=[1.0, 1.0], horizon=10**6, clip_norm=1.0,
            theta_max=1.0, reg=1e-3, rho=1.0, timeout_s=1.0,
        )  # fmt: skip
    assert _children() <= before
