"""Executors: the process pool and Ray run the same tasks and hand back every result by index."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from pubsubml.errors import ExecutorConnectionError
from pubsubml.experiments.executors import (
    EXECUTORS,
    Executor,
    ProcessPoolBackend,
    RayBackend,
    make_executor,
)


def probe(x: int) -> tuple[int, int]:
    """``x²`` and the worker's torch threads."""
    import torch

    return x * x, torch.get_num_threads()


def where(x: int) -> tuple[int, int]:
    return x, os.getpid()


def refuse(x: int) -> int:
    if x == 2:
        raise ValueError(f"task {x} refuses")
    return x


def mark(folder: str, x: int) -> int:
    """Leave a file named ``x`` in ``folder``; task 0 then fails, and the others end a second
    after task 0 started (so none ends before the failure is known, however the workers start)."""
    (Path(folder) / str(x)).touch()
    if x == 0:
        raise ValueError("task 0 refuses")
    deadline = time.monotonic() + 60
    while not (Path(folder) / "0").exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(1.0)
    return x


def _stop_at_first_error(pool: Executor, folder: Path, n: int) -> int:
    """Run ``n`` :func:`mark` tasks on ``pool`` until task 0 fails; how many of them ran."""
    with pytest.raises(ValueError, match="task 0 refuses"), pool:
        list(pool.submit(mark, [(str(folder), x) for x in range(n)]))
    return len(list(folder.iterdir()))


def _run(pool: Executor, n: int = 5) -> dict[int, tuple[int, int]]:
    with pool:
        pairs = list(pool.submit(probe, [(x,) for x in range(n)]))
    assert sorted(i for i, _ in pairs) == list(range(n))  # every index exactly once
    return dict(pairs)


def test_one_job_runs_in_this_process_in_order() -> None:
    with make_executor("process", jobs=1) as pool:
        pairs = list(pool.submit(where, [(x,) for x in range(4)]))
    assert pairs == [(i, (i, os.getpid())) for i in range(4)]


def test_process_pool_workers_use_one_thread() -> None:
    results = _run(make_executor("process", jobs=2))
    assert results == {x: (x * x, 1) for x in range(5)}


def test_process_pool_drops_the_tasks_not_started_when_one_fails(tmp_path: Path) -> None:
    # Two workers; the executor queues a call or two ahead of them, never all 30.
    assert _stop_at_first_error(make_executor("process", jobs=2), tmp_path, 30) <= 6


@pytest.mark.ray
def test_ray_runs_the_tasks_elsewhere_like_the_process_pool_and_raises_their_errors(
    ray_session: RayBackend,
) -> None:
    import ray

    assert _run(make_executor("ray", jobs=2)) == {x: (x * x, 1) for x in range(5)}
    with RayBackend(jobs=1) as pool:
        pids = {pid for _, (_, pid) in pool.submit(where, [(x,) for x in range(3)])}
    assert os.getpid() not in pids
    assert ray.is_initialized()  # started by the fixture, not by this backend: left running
    for failing in (make_executor("process", jobs=1), make_executor("ray", jobs=2)):
        with pytest.raises(ValueError, match="task 2 refuses"), failing:
            list(failing.submit(refuse, [(x,) for x in range(4)]))


def on_node(x: int) -> tuple[int, int, str]:
    """``x²``, the worker's process id and the address of the Ray node it runs on."""
    import ray

    return x * x, os.getpid(), ray.util.get_node_ip_address()


@pytest.mark.ray
def test_ray_joins_a_running_cluster_and_leaves_it_running(ray_cluster: str) -> None:
    import ray

    with make_executor("ray", jobs=1, address=ray_cluster) as pool:
        assert ray.cluster_resources()["CPU"] == 2  # the cluster's CPUs are used, not jobs
        results = dict(pool.submit(on_node, [(x,) for x in range(6)]))
    assert not ray.is_initialized()  # left, not shut down: it is joined again below
    assert {x: r[0] for x, r in results.items()} == {x: x * x for x in range(6)}
    assert {r[2] for r in results.values()} == {"127.0.0.1"}
    assert os.getpid() not in {r[1] for r in results.values()}
    with (
        pytest.raises(ValueError, match="task 2 refuses"),
        make_executor("ray", jobs=1, address=ray_cluster) as pool,
    ):
        list(pool.submit(refuse, [(x,) for x in range(4)]))
    # Without the cluster's token (a process of its own: Ray keeps the token it first read);
    # three one-second tries to reach the cluster instead of Ray's twenty.
    code = (
        "from pubsubml.experiments.executors import make_executor\n"
        f"with make_executor('ray', jobs=1, address={ray_cluster!r}): pass"
    )
    refused = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "RAY_AUTH_TOKEN": "0" * 64, "RAY_NUM_REDIS_GET_RETRIES": "3"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert refused.returncode == 1
    error = "pubsubml.errors.ExecutorConnectionError: cannot join the Ray cluster at "
    (line,) = [x for x in refused.stderr.splitlines() if x.startswith(error)]
    assert ray_cluster in line and "RAY_AUTH_MODE=token" in line and "RAY_AUTH_TOKEN" in line


@pytest.mark.ray
def test_ray_submits_as_many_tasks_as_cpus_and_never_cancels_one(
    ray_session: RayBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ray

    def no_cancel(*args: object, **kwargs: object) -> None:
        raise AssertionError("ray.cancel can abort the driver on a task that is ending")

    monkeypatch.setattr(ray, "cancel", no_cancel)
    # The instance has 2 CPUs: task 0 fails while one other runs; the rest are never submitted.
    assert _stop_at_first_error(make_executor("ray", jobs=2), tmp_path, 30) <= 2
    with make_executor("ray", jobs=2) as pool:  # stopping early waits for the running task
        results = pool.submit(where, [(x,) for x in range(30)])
        next(results)
        results.close()
    assert _run(make_executor("ray", jobs=2), n=7) == {x: (x * x, 1) for x in range(7)}


def test_bad_choices_are_refused_before_anything_starts() -> None:
    assert EXECUTORS == ("process", "ray")
    with pytest.raises(ValueError, match="unknown executor 'dask'"):
        make_executor("dask", jobs=2)
    with pytest.raises(ValueError, match="address applies to the ray executor only"):
        make_executor("process", jobs=2, address="auto")
    for name in EXECUTORS:
        with pytest.raises(ValueError, match="jobs must be >= 1"):
            make_executor(name, jobs=0)
    with pytest.raises(RuntimeError, match="with block"):
        next(iter(ProcessPoolBackend(jobs=2).submit(where, [(1,)])))


def _joins(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Record the backend's ``ray.init`` calls, each refused as an unauthenticated join is."""
    ray = pytest.importorskip("ray")
    calls: list[dict[str, Any]] = []

    def init(**kwargs: Any) -> None:
        calls.append(kwargs)
        raise ConnectionError(f"Failed to connect to Ray cluster at {kwargs['address']}")

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", init)
    return calls


def test_a_cluster_address_where_nothing_answers_is_refused_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``ray.init`` would wait minutes on such an address; the backend refuses it first."""
    calls = _joins(monkeypatch)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    for address in (f"127.0.0.1:{port}", f"ray://127.0.0.1:{port}"):
        started = time.monotonic()
        with pytest.raises(ExecutorConnectionError, match="nothing answers there"):
            with make_executor("ray", jobs=1, address=address):
                pass
        assert time.monotonic() - started < 10
    assert calls == []


def test_a_cluster_that_cannot_be_joined_says_how_to_pass_its_token(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = _joins(monkeypatch)
    with socket.socket() as server:  # something answers: Ray itself is asked to join
        server.bind(("127.0.0.1", 0))
        server.listen()
        address = f"127.0.0.1:{server.getsockname()[1]}"
        with pytest.raises(ExecutorConnectionError, match="RAY_AUTH_MODE=token") as refused:
            with make_executor("ray", jobs=1, address=address):
                pass
    assert address in str(refused.value) and isinstance(refused.value, ConnectionError)
    assert [c["address"] for c in calls] == [address]
    with pytest.raises(ExecutorConnectionError, match="RAY_AUTH_MODE=token"):  # left to Ray
        with make_executor("ray", jobs=1, address="auto"):
            pass


def _local_starts(monkeypatch: pytest.MonkeyPatch, failures: list[str]) -> list[str]:
    """Record the backend's local ``ray.init`` calls, refusing the first ones with ``failures``."""
    ray = pytest.importorskip("ray")
    calls: list[str] = []

    def init(**kwargs: Any) -> None:
        calls.append("init")
        tries = calls.count("init")
        if tries <= len(failures):
            raise ValueError(failures[tries - 1])

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", init)
    monkeypatch.setattr(ray, "shutdown", lambda: calls.append("shutdown"))
    return calls


CLASH = (
    "Ray component dashboard_agent_http is trying to use a port number 53551 that is used by "
    "other components."
)


def test_a_local_start_whose_random_ports_clash_is_tried_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = _local_starts(monkeypatch, [CLASH])
    with make_executor("ray", jobs=1):
        pass
    assert calls == ["init", "shutdown", "init", "shutdown"]  # the second start, then the exit
    calls = _local_starts(monkeypatch, [CLASH] * 3)
    with pytest.raises(ValueError, match="is trying to use a port number"):
        make_executor("ray", jobs=1).__enter__()
    assert calls == ["init", "shutdown"] * 3
    calls = _local_starts(monkeypatch, ["num_cpus must be positive"])  # not chance: at once
    with pytest.raises(ValueError, match="num_cpus"):
        make_executor("ray", jobs=1).__enter__()
    assert calls == ["init", "shutdown"]


def test_missing_ray_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now fails
    with pytest.raises(ImportError, match="pip install ray"):
        make_executor("ray", jobs=2)


def test_the_package_and_cli_do_not_import_ray() -> None:
    code = (
        "import sys, pubsubml, pubsubml.cli, pubsubml.experiments.catalog, "
        "pubsubml.experiments.executors; print('ray' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "False", (out.stdout, out.stderr[-2000:])
