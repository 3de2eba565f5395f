"""Shared pytest configuration, and small seeded data and publishers trained once per session."""

from __future__ import annotations

import os

# Before torch is imported: one thread per xdist worker (two workers share the two cores), else two.
# A worker inherits the controller's environment, where this file has already set "2", so a
# worker sets its own value rather than keeping that one: two workers with two threads each
# spin-wait against each other on two cores and run the smaller tensor work many times slower.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ["OMP_NUM_THREADS"] = "1"
else:
    os.environ.setdefault("OMP_NUM_THREADS", "2")

import contextlib
import json
import logging
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch
from threadpoolctl import threadpool_limits

from pubsubml.data import hyperplane_chunks, hyperplane_schema
from pubsubml.learners.mlp import DPMLPClassifier, fit_many
from pubsubml.methods.proxyfl.peers import free_port
from pubsubml.schema import FeatureSchema

# `--dist loadgroup` that keeps the tests' groups under pytest 9.2 (hooks of the controller and
# the workers; see xdist_groups.py).
from xdist_groups import (  # noqa: F401
    pytest_collection_finish,
    pytest_configure_node,
    pytest_unconfigure,
    pytest_xdist_make_scheduler,
)

if os.environ.get("PYTEST_XDIST_WORKER"):
    # The BLAS and OpenMP libraries pytest loaded before this file (numpy's and scipy's, through
    # the warning filter of the configuration) read their thread count when loaded: one here too.
    threadpool_limits(limits=1)


@pytest.fixture
def rng() -> np.random.Generator:
    """A seeded generator so every test is reproducible."""
    return np.random.default_rng(0)


logging.getLogger("absl").setLevel(logging.ERROR)  # dp-accounting's RDP convergence notes


@contextlib.contextmanager
def one_torch_thread() -> Iterator[None]:
    """The networks here are tiny: one thread avoids spin-waiting on a busy 2-core machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@pytest.fixture
def one_thread() -> Iterator[None]:
    """Use with ``pytestmark = pytest.mark.usefixtures("one_thread")`` in a test module."""
    with one_torch_thread():
        yield


@pytest.fixture(scope="session")
def hyperplane() -> dict[str, Any]:
    """Five DP publishers on a shared Hyperplane concept, five trained on pure label noise
    (pubsub-ml.txt §8.2.5), a subscriber's 500 rows and a 2000-row test set."""
    schema = hyperplane_schema(10)
    chunks = list(hyperplane_chunks(14, 500, seed=0, mag_change=0.0))
    rng = np.random.default_rng(0)
    good = [
        (
            pd.concat([chunks[i][0], chunks[i + 5][0]], ignore_index=True),
            np.concatenate([chunks[i][1], chunks[i + 5][1]]),
        )
        for i in range(5)
    ]
    noisy = [(X, rng.integers(0, 2, len(y))) for X, y in good]
    est = DPMLPClassifier(
        schema=schema,
        classes=[0, 1],
        hidden_layer_sizes=(16,),
        epochs=5,
        batch_size=100,
        learning_rate=0.01,
        epsilon=1.0,
        delta=1e-4,
        accountant="rdp",
        random_state=0,
    )
    with one_torch_thread():
        models = fit_many(est, [X for X, _ in good + noisy], [y for _, y in good + noisy])
    test = (
        pd.concat([c[0] for c in chunks[11:]], ignore_index=True),
        np.concatenate([c[1] for c in chunks[11:]]),
    )
    return {
        "schema": schema,
        "good": models[:5],
        "noise": models[5:],
        "subscriber": chunks[10],
        "test": test,
    }


@pytest.fixture(scope="session")
def split_features() -> dict[str, Any]:
    """pubsub-ml.txt §8.1.3: the subscriber has A, C; publishers A, B and B, C; few rows."""
    rng = np.random.default_rng(0)
    k = 8
    A, C = [f"a{i}" for i in range(k)], [f"c{i}" for i in range(k)]
    schema = FeatureSchema.numeric([*A, "b", *C])
    w = rng.uniform(-1, 1, 2 * k + 1)
    w[k] = 1.0

    def data(n: int) -> tuple[pd.DataFrame, np.ndarray]:
        X = rng.random((n, 2 * k + 1))
        y = ((X - 0.5) @ w > 0).astype(int)
        flip = rng.random(n) < 0.05
        y[flip] = 1 - y[flip]
        return pd.DataFrame(X, columns=schema.names), y

    return {"schema": schema, "A": A, "C": C, "data": data}


RAY_GROUP = "ray"
"""The pytest-xdist group of the ``ray``-marked tests: ``--dist loadgroup`` runs them on one worker."""

RAY_NODEID = pytest.StashKey[str]()
"""A ``ray``-marked test's node id as collected, the one its child process is given (a
pytest-xdist that writes the group into node ids, as 3.8 does under pytest 8, appends ``@ray``)."""


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups of the items
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Put the end-to-end runs (marked ``slow``) first, in their collected order; group the
    ``ray``-marked tests.

    ``make test`` runs the whole suite in one pytest-xdist session: the long runs start at once
    and the thousands of short tests fill the workers around them, so neither worker idles at the
    end waiting on a long run that happened to be scheduled last.  The ``ray``-marked tests go to
    one worker (``xdist_group``), which runs those that share a local Ray instance in one child
    process (see ``pytest_pyfunc_call``).
    """
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
    if os.environ.get(RAY_HERE) == "1":
        return
    for item in items:
        if item.get_closest_marker("ray") is not None:
            item.stash[RAY_NODEID] = item.nodeid
            item.add_marker(pytest.mark.xdist_group(RAY_GROUP))


RAY_HERE = "PUBSUBML_TEST_RAY_HERE"
"""Set in the child pytest process that runs a ``ray``-marked test (see below)."""


RAY_REPORT = "PUBSUBML_TEST_RAY_REPORT"
"""Set in a child pytest process: the file where it writes each test's outcome as JSON."""

RAY_OUTCOMES = pytest.StashKey[dict[str, dict[str, str]]]()
"""The outcomes of the ``ray``-marked tests a child process has run, by node id."""


def _shares_local_ray(item: pytest.Item) -> bool:
    """Whether a ``ray``-marked test can run in one child with others: it uses the session's local
    Ray instance, not a cluster of its own (Ray keeps the first token it reads in a process) nor
    an instance it starts and shuts down itself (``own_ray``: Flower's Simulation Engine)."""
    names = getattr(item, "fixturenames", ())
    return "ray_cluster" not in names and "own_ray" not in names


def _run_ray_child(config: pytest.Config, nodeids: list[str]) -> dict[str, dict[str, str]]:
    """Run ``nodeids`` in one child pytest process; their outcomes by node id."""
    # The plugins no ray-marked test uses stay unloaded (their imports are a good part of a
    # child's start).
    unused = [f"-pno:{name}" for name in ("hypothesispytest", "schemathesis", "xdist", "anyio")]
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *unused, "-rs"]
    with tempfile.TemporaryDirectory(prefix="ray-child") as temp:
        report = Path(temp) / "outcomes.json"
        done = subprocess.run(
            [*command, *nodeids],
            cwd=config.rootpath,
            env={**os.environ, RAY_HERE: "1", RAY_REPORT: str(report)},
            capture_output=True,
            text=True,
            timeout=600,
        )
        outcomes: dict[str, dict[str, str]] = (
            json.loads(report.read_text()) if report.exists() else {}
        )
    output = f"exit status {done.returncode}\n{done.stdout[-4000:]}{done.stderr[-2000:]}"
    for nodeid in nodeids:  # a test the child never reported (it crashed, say) fails here
        outcomes.setdefault(nodeid, {"outcome": "failed", "detail": output})
    return outcomes


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """Run a ``ray``-marked test in a child pytest process.

    Ray starts a raylet, a GCS and workers as children of the process that calls ``ray.init``,
    and installs its own handlers in it; the child runs the test in-process (with ``RAY_HERE``
    set), so none of that is left in the pytest-xdist worker, and the parent reports the child's
    outcome.  The first such test to run also runs, in the same child, every other selected one
    that shares the local instance (``ray_session``): one interpreter and one Ray start for all of
    them.  That needs them all on this worker: without xdist, or with ``--dist loadgroup`` (their
    ``xdist_group``); otherwise each runs in a child of its own.
    """
    if pyfuncitem.get_closest_marker("ray") is None or os.environ.get(RAY_HERE) == "1":
        return None
    config = pyfuncitem.config
    outcomes = config.stash.setdefault(RAY_OUTCOMES, {})
    nodeid = pyfuncitem.stash.get(RAY_NODEID, pyfuncitem.nodeid)
    if nodeid not in outcomes:
        batch = [nodeid]
        # On an xdist worker, `dist` reads "no" and `loadgroup` says how the tests were handed out.
        together = not os.environ.get("PYTEST_XDIST_WORKER") or bool(config.getvalue("loadgroup"))
        if together and _shares_local_ray(pyfuncitem):
            batch += [
                other.stash[RAY_NODEID]
                for other in pyfuncitem.session.items
                if other is not pyfuncitem
                and RAY_NODEID in other.stash
                and _shares_local_ray(other)
                and other.stash[RAY_NODEID] not in outcomes
            ]
        outcomes.update(_run_ray_child(config, batch))
    outcome = outcomes[nodeid]
    if outcome["outcome"] == "skipped":
        pytest.skip(outcome["detail"][:300])
    if outcome["outcome"] == "failed":
        pytest.fail(f"in the child pytest process:\n{outcome['detail']}", pytrace=False)
    return True


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """In a child process of ``ray``-marked tests: note each test's outcome for the parent."""
    if os.environ.get(RAY_HERE) != "1" or not os.environ.get(RAY_REPORT):
        return
    if report.when == "setup" and report.passed:
        return  # a test that passes its setup and then ends the process must not count as passed
    path = Path(os.environ[RAY_REPORT])
    outcomes = json.loads(path.read_text()) if path.exists() else {}
    if outcomes.get(report.nodeid, {}).get("outcome", "passed") != "passed":
        return  # the first phase that skips or fails decides
    if report.skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        outcomes[report.nodeid] = {"outcome": "skipped", "detail": reason.removeprefix("Skipped: ")}
    elif report.failed:
        outcomes[report.nodeid] = {"outcome": "failed", "detail": report.longreprtext[-6000:]}
    elif report.when == "call":
        outcomes[report.nodeid] = {"outcome": "passed", "detail": ""}
    path.write_text(json.dumps(outcomes))


@pytest.fixture(scope="session")
def own_ray() -> None:
    """Marks a ``ray``-marked test that starts and shuts down a Ray instance of its own (Flower's
    Simulation Engine calls ``ray.shutdown()`` when a run ends): it runs in a child of its own."""
    return None


@pytest.fixture(scope="session")
def ray_session() -> Iterator[Any]:
    """One local Ray instance with 2 CPUs for the child process of the ``ray``-marked tests that
    share it (nothing in the parent); backends and commands find it running.  Skipped, with the
    reason, where Ray cannot start (a sandbox without shared memory, say)."""
    if os.environ.get(RAY_HERE) != "1":
        yield None
        return
    from pubsubml.experiments.executors import RayBackend

    backend = RayBackend(jobs=2)
    try:
        backend.__enter__()
    except ImportError:
        raise
    except Exception as exc:
        pytest.skip(f"Ray cannot start on this machine: {exc}")
    yield backend
    backend.__exit__(None, None, None)


@pytest.fixture
def ray_cluster(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A Ray cluster of ``ray start --head`` on loopback with 2 CPUs; yields its address.

    Started as a user would start one (``ray start --head --block``), in the child process of a
    ``ray``-marked test.  Every port is chosen free here (never Ray's fixed defaults, which a
    local instance of another test may hold); the node's address is 127.0.0.1 (Ray maps loopback
    to the machine's address unless ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``, which also keeps it
    a one-node cluster); it checks a token of its own, which this process is given as the docs
    tell a user (``RAY_AUTH_MODE=token``, ``RAY_AUTH_TOKEN``); its workers import the tests'
    functions from this process's ``sys.path``, as a real cluster's nodes import installed code.
    Stopped with SIGTERM, which drains the node and stops its processes (the process group is
    killed if that takes over 60 s).  Skipped, with the reason, where Ray cannot start.
    """
    if os.environ.get(RAY_HERE) != "1":
        yield ""
        return
    token = secrets.token_hex(32)
    monkeypatch.setenv("RAY_AUTH_MODE", "token")  # read once, when Ray first starts here
    monkeypatch.setenv("RAY_AUTH_TOKEN", token)
    monkeypatch.setenv("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # for `ray start` and drivers
    ray = pytest.importorskip("ray")
    from ray._private import ray_constants

    from pubsubml.experiments.executors import driver_pythonpath

    port = free_port()
    agent_ports = [
        "--dashboard-agent-grpc-port",
        "--dashboard-agent-listen-port",
        "--metrics-export-port",
        "--node-manager-port",
        "--object-manager-port",
        "--runtime-env-agent-port",
    ]
    temp = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # Ray's socket paths must stay short
    command = [
        str(Path(sys.executable).with_name("ray")),
        "start",
        "--head",
        "--block",
        "--node-ip-address=127.0.0.1",
        f"--port={port}",
        "--num-cpus=2",
        "--include-dashboard=false",
        "--disable-usage-stats",
        f"--temp-dir={temp}",
        f"--worker-port-list={','.join(str(free_port()) for _ in range(16))}",
        *(f"{flag}={free_port()}" for flag in agent_ports),
    ]
    env = {**os.environ, "PYTHONPATH": driver_pythonpath()}  # as a local instance's workers
    log = Path(temp) / "ray-start.log"
    with log.open("wb") as out:
        head = subprocess.Popen(
            command, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        deadline = time.monotonic() + 120
        while True:
            if head.poll() is not None:
                pytest.skip(f"`ray start --head` failed: {log.read_text()[-600:]}")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                break
            if time.monotonic() > deadline:
                pytest.skip("`ray start --head` did not answer within 120 s")
            time.sleep(0.2)
        # This driver resolves the node's address as the head did, even had Ray been imported.
        monkeypatch.setattr(ray_constants, "ENABLE_RAY_CLUSTER", False)
        yield f"127.0.0.1:{port}"
    finally:
        if ray.is_initialized():
            ray.shutdown()
        head.terminate()
        try:
            head.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)
            head.wait(10)
        shutil.rmtree(temp, ignore_errors=True)
