"""Rebalance steps that must run inside the application's poll, and how they get there.

A mixin of `GroupMembership`. In Java the whole rebalance runs inside `poll`, so partitions
never change while the application processes a batch between two polls, and a commit made after
processing it still counts. Here the membership runs in the background, so each step that
touches the application (auto-commit and `on_revoke` before partitions go, `on_assign`,
`on_lost`, `on_commit` reports) is queued and the runner waits until the caller of poll has run
it: the asyncio consumer runs the queue in the task that polls (`serve`); the sync Consumer
takes it to the thread that calls poll (`take_callbacks`, run, `finish_callbacks`), so user
code never runs on the event-loop thread. `ready` (a threading.Event) says something waits.
"""
import asyncio
import collections
import logging
import threading
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from .group_api import GroupOwner

log = logging.getLogger("minilog.client.group")


class _Pending:
    """A step waiting for the poll caller: `await pre()` (on the loop), then the user's
    `fn(*args)` (in the poll thread), then `post()` (on the loop); `future` is set after."""
    __slots__ = ("args", "fn", "future", "kind", "post", "pre")

    def __init__(self, kind: str, fn: Callable[..., Any] | None, args: Sequence[Any],
                 future: asyncio.Future[None],
                 pre: Callable[[], Awaitable[None]] | None = None,
                 post: Callable[[], None] | None = None) -> None:
        self.kind, self.fn, self.args, self.future = kind, fn, args, future
        self.pre, self.post = pre, post


class PollSteps:
    """Queue of steps for the poll caller (see the module docstring)."""

    # GroupMembership's, which this mixin serves
    group_id: str
    owner: GroupOwner
    ready: threading.Event
    _pending: collections.deque[_Pending]
    _errors: list[BaseException]
    _closed: bool
    poll: Callable[[], None]

    def take_callbacks(self) -> list[_Pending]:
        items = list(self._pending)
        self._pending.clear()
        self.ready.clear()
        return items

    def finish_callbacks(self, items: Sequence[_Pending]) -> None:
        for item in items:
            if item.post is not None:
                item.post()
            if not item.future.done():
                item.future.set_result(None)

    async def serve(self) -> None:
        """Run the queued steps here (the asyncio consumer's poll); raise a callback's error."""
        for item in self.take_callbacks():
            await self._run_item(item)
        self.poll()

    async def _run_item(self, item: _Pending) -> None:
        try:
            if item.pre is not None:
                await item.pre()
            if item.fn is not None:
                result = item.fn(*item.args)
                if asyncio.iscoroutine(result):
                    await result
        except Exception as e:  # noqa: BLE001 - the user's error surfaces from poll
            log.warning("group %s: %s callback raised %r", self.group_id, item.kind, e)
            self._errors.append(e)
        finally:
            self.finish_callbacks([item])

    def _enqueue(self, kind: str, fn: Callable[..., Any] | None, args: Sequence[Any],
                 pre: Callable[[], Awaitable[None]] | None = None,
                 post: Callable[[], None] | None = None) -> _Pending:
        item = _Pending(kind, fn, args, asyncio.get_running_loop().create_future(), pre, post)
        self._pending.append(item)
        self.ready.set()
        self.owner.group_notify()
        return item

    async def _at_poll(self, kind: str, fn: Callable[..., Any] | None, args: Sequence[Any],
                       pre: Callable[[], Awaitable[None]] | None = None,
                       post: Callable[[], None] | None = None, wait: bool = True) -> None:
        """Queue a step for the poll caller and (unless `wait` is false) wait until it ran.
        Closing an asyncio consumer runs it at once: close is the caller then."""
        if self._closed and not self.owner.group_defer_callbacks:
            item = _Pending(kind, fn, args, asyncio.get_running_loop().create_future(), pre, post)
            await self._run_item(item)
            return
        item = self._enqueue(kind, fn, args, pre, post)
        if wait:
            await item.future
