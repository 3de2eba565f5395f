"""The validation worker: a process that checks untrusted artifacts under CPU-time and memory limits.

Run as ``python -m pubsubml.artifacts.validation_worker --cpu-seconds C --memory-bytes M`` by
:class:`~pubsubml.artifacts.validation_pool.ValidationPool`; it never serves HTTP and touches no
database or store.  Before reading anything it limits its own address space (``RLIMIT_AS``) and
turns core dumps off; before each request it sets its CPU-time limit (``RLIMIT_CPU``) to the CPU
time used so far plus ``C`` seconds, so a request that computes longer is killed by the kernel
(SIGXCPU), wherever it is, C++ code included.  A request that allocates beyond the limit fails
with ``MemoryError`` (reported) or kills the worker; the pool replaces a dead worker.

Protocol (stdin → stdout, no pickle in either direction): every message is a frame, an 8-byte
big-endian length then that many bytes.  A request is two frames, a JSON header
``{"card": <card JSON>, "site_delta": δ, "max_weights_bytes": n}`` then the raw weights; the answer
is one JSON frame, ``{"ok": true, "epsilon": ε}`` or
``{"ok": false, "error": <error class name>, "detail": <message>}``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import sys
from typing import IO, Any

__all__ = ["FRAME_HEADER", "main", "read_frame", "write_frame"]

#: Bytes of the length prefix of a frame.
FRAME_HEADER = 8
_MAX_HEADER_FRAME = 4 << 20


def write_frame(stream: IO[bytes], data: bytes) -> None:
    """Write one frame (length prefix, then ``data``) and flush."""
    stream.write(len(data).to_bytes(FRAME_HEADER, "big"))
    stream.write(data)
    stream.flush()


def read_frame(stream: IO[bytes], limit: int) -> bytes | None:
    """Read one frame of at most ``limit`` bytes; ``None`` at a clean end of stream."""
    head = stream.read(FRAME_HEADER)
    if not head:
        return None
    if len(head) != FRAME_HEADER:
        raise EOFError("truncated frame header")
    size = int.from_bytes(head, "big")
    if size > limit:
        raise ValueError(f"frame of {size} bytes exceeds {limit}")
    data = stream.read(size)
    if len(data) != size:
        raise EOFError("truncated frame")
    return bytes(data)


def _limit_memory(memory_bytes: int) -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        memory_bytes = min(memory_bytes, hard)
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, hard))


def _arm_cpu_limit(cpu_seconds: float) -> None:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    used = usage.ru_utime + usage.ru_stime
    _soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
    soft = math.ceil(used + cpu_seconds)
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


def _answer(header: bytes, weights: bytes) -> dict[str, Any]:
    from pubsubml.artifacts.card import ModelCard
    from pubsubml.artifacts.validation import validate_untrusted
    from pubsubml.errors import PubsubmlError

    try:
        request = json.loads(header)
        card = ModelCard.from_json(request["card"])
        epsilon = validate_untrusted(
            card,
            weights,
            site_delta=float(request["site_delta"]),
            max_weights_bytes=int(request["max_weights_bytes"]),
        )
        return {"ok": True, "epsilon": epsilon}
    except PubsubmlError as exc:
        return {"ok": False, "error": type(exc).__name__, "detail": str(exc)}
    except MemoryError:
        return {
            "ok": False,
            "error": "UntrustedArtifactError",
            "detail": "validating the artifact exceeded the registry's memory limit",
        }
    except Exception as exc:  # anything else a hostile payload provokes is a refusal, not a crash
        return {
            "ok": False,
            "error": "UntrustedArtifactError",
            "detail": f"the artifact could not be validated ({type(exc).__name__})",
        }


def main(argv: list[str] | None = None) -> int:
    """Serve validation requests on stdin/stdout until stdin closes."""
    parser = argparse.ArgumentParser(prog="python -m pubsubml.artifacts.validation_worker")
    parser.add_argument("--cpu-seconds", type=float, required=True)
    parser.add_argument("--memory-bytes", type=int, required=True)
    parser.add_argument("--max-weights-bytes", type=int, required=True)
    args = parser.parse_args(argv)
    _limit_memory(args.memory_bytes)
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # a stray print must not corrupt the protocol
    # Imported once, before any request and its CPU-time limit: the checks, the codecs, and the
    # accountants that recompute ε (dp-accounting, which the privacy record loads on first use).
    import pubsubml.artifacts.validation
    import pubsubml.privacy.accountants.registry  # noqa: F401

    while True:
        header = read_frame(stdin, _MAX_HEADER_FRAME)
        if header is None:
            return 0
        weights = read_frame(stdin, args.max_weights_bytes + 1)
        if weights is None:
            return 0
        _arm_cpu_limit(args.cpu_seconds)
        answer = _answer(header, weights)
        write_frame(stdout, json.dumps(answer).encode())


if __name__ == "__main__":  # pragma: no cover - run by the pool as a subprocess
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    raise SystemExit(main())
