"""Tests of pubsubml.registry.infrastructure.feed_notifier: tickets and wake-ups."""

from __future__ import annotations

import asyncio
import threading

from pubsubml.registry.infrastructure.feed_notifier import FeedNotifier


def test_notifier_before_bind_hands_out_no_ticket() -> None:
    notifier = FeedNotifier()
    assert notifier.ticket() is None
    notifier.notify()  # nobody to wake: no error
    assert notifier.ticket() is None


def test_a_commit_sets_tickets_taken_before_it_only() -> None:
    async def scenario() -> tuple[bool, bool, bool]:
        notifier = FeedNotifier()
        notifier.bind(asyncio.get_running_loop())
        before = notifier.ticket()
        assert before is not None and not before.is_set()
        notifier.notify()  # from the loop's own thread: rotates at once
        after = notifier.ticket()
        assert after is not None
        await notifier.wait(after, 0.0)  # a zero timeout does not wait
        return before.is_set(), after is before, after.is_set()

    assert asyncio.run(scenario()) == (True, False, False)


def test_a_commit_in_another_thread_wakes_the_waiting_reader() -> None:
    async def scenario() -> bool:
        notifier = FeedNotifier()
        notifier.bind(asyncio.get_running_loop())
        ticket = notifier.ticket()
        assert ticket is not None
        thread = threading.Thread(target=notifier.notify)
        thread.start()
        await notifier.wait(ticket, 30.0)
        thread.join()
        return ticket.is_set()

    assert asyncio.run(scenario()) is True


def test_wait_returns_unset_after_its_timeout_and_notify_after_close_is_ignored() -> None:
    notifier = FeedNotifier()

    async def scenario() -> bool:
        notifier.bind(asyncio.get_running_loop())
        ticket = notifier.ticket()
        assert ticket is not None
        await notifier.wait(ticket, 0.01)
        return ticket.is_set()

    assert asyncio.run(scenario()) is False
    notifier.notify()  # its loop is closed now
