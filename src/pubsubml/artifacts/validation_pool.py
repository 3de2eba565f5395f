"""A pool of validation worker processes: untrusted artifacts are checked outside the server.

Loading an uploaded ONNX graph and composing a card's DP events cost CPU time and memory that the
uploader chooses.  :class:`ValidationPool` runs them (:func:`~pubsubml.artifacts.validation.
validate_untrusted`) in long-lived worker processes (:mod:`pubsubml.artifacts.validation_worker`),
each limited in address space and in CPU time per request, with a wall-clock deadline on top.  A
request that exceeds a limit is refused (422 ``untrusted_artifact``) and only its own worker is
replaced: every worker handles one request at a time, so no other publish is disturbed.  The
workers are started once and reused (pooled, not spawned per request); their number caps how
many validations run at once, and a request that finds none free within ``wait_seconds`` gets
503 ``busy``.  Nothing crosses the process boundary as a pickle: requests and answers are framed
JSON and raw bytes.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import queue
import select
import subprocess
import sys
import threading
import time
from typing import Any

from pubsubml.artifacts.card import ModelCard
from pubsubml.artifacts.validation_worker import FRAME_HEADER, write_frame
from pubsubml.errors import (
    DataValidationError,
    DigestMismatchError,
    InvalidPrivacyParameterError,
    PayloadTooLargeError,
    PubsubmlError,
    SchemaMismatchError,
    ServiceBusyError,
    SignatureError,
    UntrustedArtifactError,
)

__all__ = ["ValidationPool", "shared_pool"]

log = logging.getLogger("pubsubml.registry")

# The only errors a worker may report; anything else is reported as an untrusted artifact.
_ERRORS: dict[str, type[PubsubmlError]] = {
    cls.__name__: cls
    for cls in (
        DataValidationError,
        DigestMismatchError,
        InvalidPrivacyParameterError,
        PayloadTooLargeError,
        SchemaMismatchError,
        SignatureError,
        UntrustedArtifactError,
    )
}
_MAX_ANSWER_BYTES = 1 << 20


class _WorkerGone(Exception):
    """The worker died, or missed its deadline."""


class _Worker:
    def __init__(self, args: list[str]) -> None:
        env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "pubsubml.artifacts.validation_worker", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
        )

    def request(self, header: bytes, weights: bytes, deadline: float) -> dict[str, Any]:
        stdin, stdout = self.proc.stdin, self.proc.stdout
        assert stdin is not None and stdout is not None
        try:
            write_frame(stdin, header)
            write_frame(stdin, weights)
        except (BrokenPipeError, OSError) as exc:
            raise _WorkerGone("the worker stopped reading") from exc
        size = int.from_bytes(self._read(FRAME_HEADER, deadline), "big")
        if size > _MAX_ANSWER_BYTES:
            raise _WorkerGone(f"answer of {size} bytes")
        try:
            answer = json.loads(self._read(size, deadline))
        except ValueError:
            raise _WorkerGone("malformed answer") from None
        if not isinstance(answer, dict):
            raise _WorkerGone("malformed answer")
        return answer

    def _read(self, n: int, deadline: float) -> bytes:
        stdout = self.proc.stdout
        assert stdout is not None
        fd = stdout.fileno()
        buf = bytearray()
        while len(buf) < n:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
                raise _WorkerGone("deadline")
            chunk = os.read(fd, n - len(buf))
            if not chunk:
                raise _WorkerGone(f"exit status {self.proc.wait()}")
            buf += chunk
        return bytes(buf)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()
        self.proc.wait()


class ValidationPool:
    """Worker processes that run :func:`~pubsubml.artifacts.validation.validate_untrusted`.

    Parameters
    ----------
    size : int
        Number of workers, and so of validations running at once.
    cpu_seconds : float
        CPU time one validation may use (the worker is killed by the kernel beyond it).
    memory_bytes : int
        Address space of a worker (its imports take about 0.5 GB of it).
    max_weights_bytes : int
        Largest weights a worker accepts.
    wait_seconds : float, default=30
        How long a request waits for a free worker before :class:`ServiceBusyError`.

    Examples
    --------
    >>> pool = ValidationPool(1, cpu_seconds=10, memory_bytes=2 << 30, max_weights_bytes=1 << 20)
    >>> pool.size
    1
    >>> pool.close()
    """

    def __init__(
        self,
        size: int,
        *,
        cpu_seconds: float,
        memory_bytes: int,
        max_weights_bytes: int,
        wait_seconds: float = 30.0,
    ) -> None:
        if size < 1 or cpu_seconds <= 0 or memory_bytes <= 0:
            raise ValueError("size, cpu_seconds and memory_bytes must be positive")
        self.size = size
        self.cpu_seconds = cpu_seconds
        self.wait_seconds = wait_seconds
        self._args = [
            "--cpu-seconds",
            repr(float(cpu_seconds)),
            "--memory-bytes",
            str(int(memory_bytes)),
            "--max-weights-bytes",
            str(int(max_weights_bytes)),
        ]
        # None stands for a worker not started yet (started on first use, then kept).
        self._idle: queue.LifoQueue[_Worker | None] = queue.LifoQueue()
        for _ in range(size):
            self._idle.put(None)
        self._all: set[_Worker] = set()
        self._lock = threading.Lock()
        self._closed = False

    def start(self) -> None:
        """Start every worker not started yet, without waiting for them to be ready (their
        imports then overlap the server's start-up instead of delaying a first upload)."""
        if self._closed:
            return
        slots: list[_Worker | None] = []
        while True:
            try:
                slots.append(self._idle.get_nowait())
            except queue.Empty:
                break
        for worker in slots:
            if worker is not None and not worker.alive():
                self._discard(worker)
                worker = None
            self._idle.put(worker or self._start())

    def validate(
        self, card: ModelCard, weights: bytes, *, site_delta: float, max_weights_bytes: int
    ) -> float:
        """ε of the card's events, after the weights passed their safe loader, in a worker.

        Raises
        ------
        UntrustedArtifactError
            The weights fail a check, or their validation exceeded a CPU-time, memory or
            wall-clock limit.
        InvalidPrivacyParameterError
            See :func:`~pubsubml.artifacts.validation.recompute_epsilon`.
        ServiceBusyError
            No worker became free within ``wait_seconds``.
        """
        if self._closed:
            raise ServiceBusyError("the validation pool is shut down")
        try:
            worker = self._idle.get(timeout=self.wait_seconds)
        except queue.Empty:
            raise ServiceBusyError(
                f"all {self.size} validation workers are busy; nothing was published, retry"
            ) from None
        header = json.dumps(
            {
                "card": card.to_json(),
                "site_delta": site_delta,
                "max_weights_bytes": max_weights_bytes,
            }
        ).encode()
        try:
            if worker is None or not worker.alive():
                worker = self._start()
            # Worker start-up (imports) is not the request's fault: it has its own allowance.
            deadline = time.monotonic() + 3.0 * self.cpu_seconds + 30.0
            answer = worker.request(header, weights, deadline)
        except _WorkerGone as exc:
            if worker is not None:
                self._discard(worker)
            self._idle.put(None)
            log.warning("validation worker stopped (%s); refused the artifact", exc)
            raise UntrustedArtifactError(
                "validating the artifact exceeded the registry's limits (CPU time "
                f"{self.cpu_seconds:g} s per artifact, bounded memory and wall-clock time); "
                "it was refused"
            ) from None
        except BaseException:
            if worker is not None:
                self._discard(worker)
            self._idle.put(None)
            raise
        self._idle.put(worker)
        if answer.get("ok") is True:
            return float(answer["epsilon"])
        cls = _ERRORS.get(str(answer.get("error")), UntrustedArtifactError)
        raise cls(str(answer.get("detail", "the artifact was refused"))[:2000])

    def _start(self) -> _Worker:
        worker = _Worker(self._args)
        with self._lock:
            self._all.add(worker)
        return worker

    def _discard(self, worker: _Worker) -> None:
        worker.kill()
        with self._lock:
            self._all.discard(worker)

    def close(self) -> None:
        """Stop every worker (a later :meth:`validate` raises :class:`ServiceBusyError`)."""
        self._closed = True
        with self._lock:
            workers, self._all = list(self._all), set()
        for worker in workers:
            worker.kill()


_SHARED: dict[tuple[Any, ...], ValidationPool] = {}
_SHARED_LOCK = threading.Lock()


def shared_pool(
    size: int,
    *,
    cpu_seconds: float,
    memory_bytes: int,
    max_weights_bytes: int,
    wait_seconds: float = 30.0,
) -> ValidationPool:
    """The process-wide pool with these limits (several apps in one process share workers)."""
    key = (size, cpu_seconds, memory_bytes, max_weights_bytes, wait_seconds)
    with _SHARED_LOCK:
        pool = _SHARED.get(key)
        if pool is None:
            pool = ValidationPool(
                size,
                cpu_seconds=cpu_seconds,
                memory_bytes=memory_bytes,
                max_weights_bytes=max_weights_bytes,
                wait_seconds=wait_seconds,
            )
            _SHARED[key] = pool
        return pool


@atexit.register
def _close_shared() -> None:  # pragma: no cover - at interpreter exit
    for pool in _SHARED.values():
        pool.close()
