"""Tests of pubsubml.registry.infrastructure.loop_calls: a callback runs on the loop's own thread,
at once from the loop, soon from another thread, never without an open loop."""

from __future__ import annotations

import asyncio
import threading

from pubsubml.registry.infrastructure.loop_calls import call_on_loop


def test_no_loop_or_a_closed_one_runs_nothing() -> None:
    calls: list[int] = []
    call_on_loop(None, lambda: calls.append(1))
    loop = asyncio.new_event_loop()
    loop.close()
    call_on_loop(loop, lambda: calls.append(2))
    assert calls == []


def test_on_the_loop_at_once_and_from_another_thread_on_the_loop_thread() -> None:
    async def run() -> tuple[list[str], set[int], int]:
        loop = asyncio.get_running_loop()
        seen: list[str] = []
        threads: set[int] = set()
        call_on_loop(loop, lambda: seen.append("now"))
        at_once = list(seen)  # ran before this line, not scheduled
        done = asyncio.Event()

        def from_worker() -> None:
            seen.append("worker")
            threads.add(threading.get_ident())
            done.set()

        await asyncio.to_thread(call_on_loop, loop, from_worker)
        await asyncio.wait_for(done.wait(), 5)
        assert at_once == ["now"]
        return seen, threads, threading.get_ident()

    seen, threads, loop_thread = asyncio.run(run())
    assert seen == ["now", "worker"] and threads == {loop_thread}
