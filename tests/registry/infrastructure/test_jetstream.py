"""Tests of pubsubml.registry.infrastructure.jetstream: the stream found or made, the probe."""

from __future__ import annotations

import asyncio
import time

import pytest

from pubsubml.registry.infrastructure.jetstream import ensure_stream, jetstream_available
from registry.conftest import free_port
from registry.infrastructure.conftest import (
    JETSTREAM_UP,
    NATS_URL,
    delete_stream,
    needs_jetstream,
    replica_pair,
    with_jetstream,
)


@needs_jetstream
def test_a_stream_that_already_captures_the_subject_is_used_as_it_is(subject: str) -> None:
    """An operator's stream (file storage, its own name) is neither replaced nor duplicated."""
    operator = f"OPERATOR_{time.monotonic_ns()}"

    async def run() -> tuple[str | None, str, int]:
        await with_jetstream(lambda js: js.add_stream(name=operator, subjects=[subject]))
        async with replica_pair(subject, jetstream=True) as (a, _, woken):
            a.broadcast()
            await asyncio.wait_for(woken.wait(), 10)
            found = await with_jetstream(lambda js: ensure_stream(js, subject))
        info = await with_jetstream(lambda js: js.stream_info(operator))
        return a.stream, found, info.state.messages

    try:
        stream, found, messages = asyncio.run(run())
    finally:
        delete_stream(operator)
    assert stream == found == operator
    assert messages == 1


def test_jetstream_availability_is_probed_and_bad_urls_are_refused() -> None:
    assert asyncio.run(jetstream_available(f"nats://127.0.0.1:{free_port()}", timeout=1)) is False
    if JETSTREAM_UP:
        assert asyncio.run(jetstream_available(NATS_URL)) is True
    with pytest.raises(ValueError, match="NATS server URL"):
        asyncio.run(jetstream_available("http://127.0.0.1:4222"))
