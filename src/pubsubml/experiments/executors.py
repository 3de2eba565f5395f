"""Where the runner's independent tasks run: in this process, a local process pool, or Ray.

An :class:`Executor` runs ``fn(*args)`` for a list of argument tuples and hands back
``(index, result)`` pairs as the tasks finish; the caller puts each result at its index, so what it
builds does not depend on the backend, the number of workers or the order the tasks finished in.
Two backends, chosen by name with :func:`make_executor`:

* ``"process"`` (:class:`ProcessPoolBackend`): in this process with ``jobs == 1``, else a local
  :class:`~concurrent.futures.ProcessPoolExecutor` of ``jobs`` spawned workers;
* ``"ray"`` (:class:`RayBackend`): `Ray <https://docs.ray.io>`_ tasks, on a Ray instance started on
  this machine with ``jobs`` CPUs (the default) or on a running cluster (``address="auto"`` or
  ``"ray://host:10001"``).  Ray is imported only when this backend starts.

Every worker of either pool runs its tasks with one BLAS/torch thread: the pool provides the
parallelism.

Notes
-----
Both pools pickle the tasks and their results to move them between processes; the tasks and
results are the operator's own simulation objects, never artifacts received from other sites.

Examples
--------
>>> def square(x: int) -> int:
...     return x * x
>>> with make_executor("process", jobs=1) as pool:
...     sorted(pool.submit(square, [(1,), (2,), (3,)]))
[(0, 1), (1, 4), (2, 9)]
"""

from __future__ import annotations

import importlib.util
import itertools
import logging
import multiprocessing
import os
import socket
import sys
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from typing import Any, Protocol, Self, TypeVar
from urllib.parse import urlsplit

from pubsubml.errors import ExecutorConnectionError

__all__ = [
    "EXECUTORS",
    "Executor",
    "ProcessPoolBackend",
    "RayBackend",
    "driver_pythonpath",
    "make_executor",
]

T = TypeVar("T")

_RAY_HINT = (
    "the ray executor needs Ray, a dependency of pubsubml: pip install ray "
    "(ray[client] for a ray:// address)"
)


class Executor(Protocol):
    """Runs independent tasks and hands back their results (a context manager).

    Attributes
    ----------
    jobs : int
        Workers (CPUs) asked for.
    """

    jobs: int

    def __enter__(self) -> Self:
        """Start the workers."""
        ...

    def __exit__(self, *exc: object) -> None:
        """Stop what :meth:`__enter__` started."""
        ...

    def submit(
        self, fn: Callable[..., T], tasks: Sequence[tuple[Any, ...]]
    ) -> Iterator[tuple[int, T]]:
        """Run ``fn(*args)`` for every ``args`` of ``tasks``; yield ``(index, result)`` as they end.

        ``fn`` is a top-level (picklable) function.  Every index of ``tasks`` is yielded once; the
        first task that raises stops the iteration with its exception.
        """
        ...


def _init_worker() -> None:
    """One BLAS/torch thread per worker process: the pool provides the parallelism."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch

    torch.set_num_threads(1)


def _check_jobs(jobs: int) -> int:
    if int(jobs) < 1:
        raise ValueError(f"jobs must be >= 1, got {jobs}")
    return int(jobs)


class ProcessPoolBackend:
    """Tasks in this process (``jobs == 1``) or in a pool of ``jobs`` spawned worker processes.

    ``fn`` and the arguments are pickled by reference: ``fn`` must be importable by name in a
    fresh interpreter (the workers get this process's ``sys.path``).

    Parameters
    ----------
    jobs : int, default=1
        Worker processes; 1 runs every task here, one after the other.

    Raises
    ------
    ValueError
        ``jobs`` below 1.
    """

    def __init__(self, jobs: int = 1) -> None:
        self.jobs = _check_jobs(jobs)
        self._pool: ProcessPoolExecutor | None = None

    def __enter__(self) -> Self:
        if self.jobs > 1:
            ctx = multiprocessing.get_context("spawn")
            self._pool = ProcessPoolExecutor(self.jobs, mp_context=ctx, initializer=_init_worker)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def submit(
        self, fn: Callable[..., T], tasks: Sequence[tuple[Any, ...]]
    ) -> Iterator[tuple[int, T]]:
        """Run ``fn(*args)`` for every ``args``; yield ``(index, result)`` as each ends."""
        if self._pool is None:
            if self.jobs > 1:
                raise RuntimeError("use the backend in a with block")
            for i, args in enumerate(tasks):
                yield i, fn(*args)
            return
        futures: dict[Future[T], int] = {
            self._pool.submit(fn, *args): i for i, args in enumerate(tasks)
        }
        try:
            for fut in as_completed(futures):
                yield futures[fut], fut.result()
        finally:  # stopped early: the tasks no worker has started never run
            for fut in futures:
                fut.cancel()


_worker_ready = False


def _run_in_worker(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` in a Ray worker, after the same one-time set-up as a process pool worker."""
    global _worker_ready
    if not _worker_ready:
        _init_worker()
        _worker_ready = True
    return fn(*args)


_AUTH_HINT = (
    "if the cluster is up, note that a cluster of `ray start` checks a token when it was started "
    "with RAY_AUTH_MODE=token or found one in ~/.ray/auth_token (a local Ray instance writes one "
    "there): run with RAY_AUTH_MODE=token and the cluster's token in RAY_AUTH_TOKEN (or in "
    "~/.ray/auth_token on this machine)"
)


def _check_answers(address: str, timeout: float = 5.0) -> None:
    """Refuse at once a ``HOST:PORT`` or ``ray://HOST:PORT`` where nothing accepts connections
    (``ray.init`` would wait minutes for it); other forms (``"auto"``) are left to Ray.

    Raises
    ------
    ExecutorConnectionError
    """
    parts = urlsplit(address if "://" in address else f"gcs://{address}")
    try:
        host, port = parts.hostname, parts.port
    except ValueError:  # a port that is not a number
        host = port = None
    if not host or port is None:
        return
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as exc:
        raise ExecutorConnectionError(
            f"cannot join the Ray cluster at {address}: nothing answers there ({exc}); start one "
            "with `ray start --head` and give the address it prints, or leave --address out to "
            "start Ray on this machine"
        ) from None


def driver_pythonpath() -> str:
    """This process's ``sys.path`` as a ``PYTHONPATH`` (absolute folders that exist).

    Ray workers import a task's function by name, as spawned pool workers do: the Ray instance
    this backend starts gives them this path; a cluster's nodes need the same code installed.
    """
    path = [os.path.abspath(p or os.curdir) for p in sys.path]
    return os.pathsep.join(p for p in path if os.path.isdir(p))


_PORT_CLASH = "is trying to use a port number"
_LOCAL_STARTS = 3


def _start_local(ray: Any, jobs: int) -> None:
    """A new local Ray instance with ``jobs`` CPUs, its workers on this process's path.

    Ray picks each of its components' ports at random among the free ones, each pick on its own,
    and refuses to start (``ValueError``: "... is trying to use a port number ... that is used by
    other components") when two picks were the same port; that is chance, not a port in use, so
    the start is tried again, up to three times, after a ``ray.shutdown()`` that stops whatever
    the failed start had begun.
    """
    for attempt in range(1, _LOCAL_STARTS + 1):
        try:
            # The workers import fn by name, like spawned pool workers: give them our path.
            ray.init(
                address="local",  # a new instance, even where RAY_ADDRESS or `ray start` is
                num_cpus=jobs,
                include_dashboard=False,
                logging_level=logging.WARNING,
                runtime_env={"env_vars": {"PYTHONPATH": driver_pythonpath()}},
            )
            return
        except ValueError as exc:
            ray.shutdown()
            if _PORT_CLASH not in str(exc) or attempt == _LOCAL_STARTS:
                raise


def _import_ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise ImportError(_RAY_HINT) from exc
    return ray


class RayBackend:
    """Tasks as Ray remote functions, one CPU each; results gathered with ``ray.get``.

    With ``address=None`` it starts a new Ray instance on this machine with ``jobs`` CPUs (no
    dashboard), whose workers get this process's ``sys.path`` as spawned pool workers do; a
    cluster of ``ray start`` or ``RAY_ADDRESS`` is joined only when given as ``address``
    (``"auto"``: the one started by ``ray start`` on this machine; ``"ray://host:10001"``: Ray
    Client, which needs ``ray[client]``), and its nodes need the same Python environment
    (pubsubml and the module of ``fn``).  A Ray instance already running in this process
    (``ray.is_initialized()``) is used as it is.  On exit Ray is shut down only when this backend
    started it.

    Parameters
    ----------
    jobs : int, default=1
        CPUs of the Ray instance started here (unused when joining a cluster).
    address : str, optional
        The cluster to join; ``None`` starts a local instance.

    Raises
    ------
    ImportError
        Ray is not installed (with the command that installs it).
    ValueError
        ``jobs`` below 1.
    ExecutorConnectionError
        On entering: nothing answers at ``address``, or Ray could not join the cluster there
        (the message says how to pass a cluster's authentication token).
    """

    def __init__(self, jobs: int = 1, address: str | None = None) -> None:
        self.jobs = _check_jobs(jobs)
        self.address = address
        if importlib.util.find_spec("ray") is None:
            raise ImportError(_RAY_HINT)
        self._ray: Any = None
        self._started = False

    def __enter__(self) -> Self:
        ray = _import_ray()
        if not ray.is_initialized():
            if self.address is None:
                _start_local(ray, self.jobs)
            else:
                _check_answers(self.address)
                try:
                    ray.init(address=self.address, logging_level=logging.WARNING)
                except (ConnectionError, RuntimeError) as exc:
                    raise ExecutorConnectionError(
                        f"cannot join the Ray cluster at {self.address}: {exc}; {_AUTH_HINT}"
                    ) from exc
            self._started = True
        self._ray = ray
        return self

    def __exit__(self, *exc: object) -> None:
        if self._started:
            self._ray.shutdown()
            self._started = False
        self._ray = None

    def submit(
        self, fn: Callable[..., T], tasks: Sequence[tuple[Any, ...]]
    ) -> Iterator[tuple[int, T]]:
        """Run ``fn(*args)`` for every ``args`` as Ray tasks; yield ``(index, result)`` as they end.

        At most as many tasks are in Ray at a time as it has CPUs (``jobs`` for an instance
        started here, the cluster's CPUs otherwise); the next one is submitted as one ends.  When
        the iteration stops early (a task raised, or the caller stopped), the tasks not yet
        submitted never run and the running ones are waited for, as the process pool does: they
        are not cancelled, because ``ray.cancel`` on a task whose reply is arriving can abort this
        process inside Ray (the ``it != submissible_tasks_.end()`` check of its task manager;
        ray-project/ray#54798).
        """
        ray = self._ray
        if ray is None:
            raise RuntimeError("use the backend in a with block")
        remote = ray.remote(num_cpus=1)(_run_in_worker)
        fn_ref = ray.put(fn)  # serialized once, not once per task
        slots = self.jobs if self.address is None and self._started else self._cluster_cpus()
        waiting = iter(enumerate(tasks))
        running: dict[Any, int] = {}

        def fill() -> None:
            for i, args in itertools.islice(waiting, max(0, slots - len(running))):
                running[remote.remote(fn_ref, *args)] = i

        try:
            fill()
            while running:
                done, _ = ray.wait(list(running), num_returns=1)
                for ref in done:
                    i = running.pop(ref)
                    result = ray.get(ref)
                    fill()
                    yield i, result
        finally:
            if running:
                ray.wait(list(running), num_returns=len(running))

    def _cluster_cpus(self) -> int:
        """The CPUs of the Ray instance this backend joined (at least one)."""
        return max(1, int(self._ray.cluster_resources().get("CPU", 1)))


def _process_pool(jobs: int, address: str | None) -> ProcessPoolBackend:
    if address is not None:
        raise ValueError(f"an address applies to the ray executor only, got {address!r}")
    return ProcessPoolBackend(jobs)


_BACKENDS: dict[str, Callable[[int, str | None], Executor]] = {
    "process": _process_pool,
    "ray": RayBackend,
}

#: The backends' names, as :func:`make_executor` and ``--executor`` take them.
EXECUTORS: tuple[str, ...] = tuple(_BACKENDS)


def make_executor(name: str, jobs: int = 1, address: str | None = None) -> Executor:
    """The backend called ``name`` with ``jobs`` workers (not started: use it in a ``with`` block).

    Parameters
    ----------
    name : {"process", "ray"}
        The backend.
    jobs : int, default=1
        Workers (CPUs).
    address : str, optional
        The Ray cluster to join (``"auto"``, ``"ray://host:10001"``); ray only.

    Raises
    ------
    ValueError
        An unknown ``name``, ``jobs`` below 1, or an ``address`` for a backend that takes none.
    ImportError
        ``name="ray"`` without Ray installed.
    """
    try:
        backend = _BACKENDS[name]
    except KeyError:
        known = ", ".join(repr(n) for n in EXECUTORS)
        raise ValueError(f"unknown executor {name!r}: use one of {known}") from None
    return backend(jobs, address)
