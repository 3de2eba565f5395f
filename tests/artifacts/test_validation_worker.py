"""Tests of pubsubml.artifacts.validation_worker: the frame protocol and the worker process."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from pubsubml.artifacts import Artifact, PrivacyRecord, make_artifact
from pubsubml.artifacts.card import MLPArchitecture
from pubsubml.artifacts.safetensors_codec import mlp_to_safetensors
from pubsubml.artifacts.signing import generate_signing_key
from pubsubml.artifacts.validation_worker import FRAME_HEADER, read_frame, write_frame
from pubsubml.privacy.events import DPEvent
from pubsubml.schema import FeatureSchema

MiB = 1 << 20


# ---- frames ---------------------------------------------------------------------------------
def test_frames_round_trip_in_order() -> None:
    messages = [b"header", b"", b"\x00" * 1000, json.dumps({"k": "é"}).encode()]
    stream = io.BytesIO()
    for message in messages:
        write_frame(stream, message)
    stream.seek(0)

    received = [read_frame(stream, limit=1000) for _ in messages]

    assert received == messages
    assert read_frame(stream, limit=1000) is None  # clean end of stream


def test_a_frame_is_a_big_endian_length_then_the_bytes() -> None:
    stream = io.BytesIO()

    write_frame(stream, b"abc")

    assert stream.getvalue() == (3).to_bytes(FRAME_HEADER, "big") + b"abc"


def test_write_frame_flushes_buffered_streams() -> None:
    raw = io.BytesIO()
    buffered = io.BufferedWriter(raw, buffer_size=1 << 16)  # type: ignore[arg-type]

    write_frame(buffered, b"payload")

    assert raw.getvalue().endswith(b"payload")


def test_frames_over_the_limit_are_refused() -> None:
    stream = io.BytesIO()
    write_frame(stream, b"x" * 11)
    stream.seek(0)

    with pytest.raises(ValueError, match="frame of 11 bytes exceeds 10"):
        read_frame(stream, limit=10)


@pytest.mark.parametrize(
    "data",
    [(5).to_bytes(FRAME_HEADER, "big")[:3], (5).to_bytes(FRAME_HEADER, "big") + b"abc"],
    ids=["header", "body"],
)
def test_truncated_frames_raise_eof_error(data: bytes) -> None:
    with pytest.raises(EOFError, match="truncated"):
        read_frame(io.BytesIO(data), limit=100)


# ---- the worker process ---------------------------------------------------------------------
def _artifact(epsilon: float) -> Artifact:
    """A small network whose card claims ``epsilon`` for pure events worth ε = 1."""
    rng = np.random.default_rng(0)
    layers = [(rng.normal(size=(2, 2)).astype(np.float32), np.zeros(2, np.float32))]
    events = [DPEvent(mechanism="approx_dp", epsilon=0.5, delta=0.0, count=2)]
    return make_artifact(
        mlp_to_safetensors(layers),
        format="safetensors",
        publisher="site-a",
        schema=FeatureSchema.numeric(["a", "b"]),
        classes=[0, 1],
        privacy=PrivacyRecord.from_events(events, epsilon=epsilon, delta=0.0, accountant="pure"),
        signing_key=generate_signing_key(),
        architecture=MLPArchitecture(
            layer_sizes=[2, 2], activation="tanh", output_activation="softmax"
        ),
    )


def _request(artifact: Artifact) -> list[bytes]:
    header = {"card": artifact.card.to_json(), "site_delta": 1e-5, "max_weights_bytes": MiB}
    return [json.dumps(header).encode(), artifact.weights]


def test_the_worker_answers_each_request_then_exits_at_end_of_input() -> None:
    frames = [
        *_request(_artifact(epsilon=1.0)),
        *_request(_artifact(epsilon=0.5)),  # understates ε
        b"{}",  # a header without a card
        b"",
        b"not json",
        b"weights",
    ]
    stdin = io.BytesIO()
    for frame in frames:
        write_frame(stdin, frame)
    command = [
        sys.executable,
        "-m",
        "pubsubml.artifacts.validation_worker",
        "--cpu-seconds",
        "30",
        "--memory-bytes",
        str(4 << 30),
        "--max-weights-bytes",
        str(MiB),
    ]

    done = subprocess.run(
        command,
        input=stdin.getvalue(),
        capture_output=True,
        timeout=120,
        check=False,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )

    assert done.returncode == 0, done.stderr.decode(errors="replace")
    stdout = io.BytesIO(done.stdout)
    answers = []
    while (frame := read_frame(stdout, limit=MiB)) is not None:
        answers.append(json.loads(frame))
    assert len(answers) == 4
    assert answers[0] == {"ok": True, "epsilon": pytest.approx(1.0)}
    assert answers[1]["ok"] is False
    assert answers[1]["error"] == "InvalidPrivacyParameterError"
    assert "may not claim less" in answers[1]["detail"]
    assert [a["error"] for a in answers[2:]] == ["UntrustedArtifactError"] * 2
    assert "(KeyError)" in answers[2]["detail"]
    assert "(JSONDecodeError)" in answers[3]["detail"]
