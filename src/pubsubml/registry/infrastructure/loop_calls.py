"""Calling into the server's event loop from any thread."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

__all__ = ["call_on_loop"]


def call_on_loop(loop: asyncio.AbstractEventLoop | None, callback: Callable[[], None]) -> None:
    """Run ``callback`` on ``loop``: now when called on it, else soon, from any thread.

    Nothing happens when there is no loop yet or it is closed (a server starting or stopped).

    Examples
    --------
    >>> calls = []
    >>> call_on_loop(None, lambda: calls.append(1))
    >>> calls
    []
    """
    if loop is None or loop.is_closed():
        return
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        callback()
    else:
        loop.call_soon_threadsafe(callback)
