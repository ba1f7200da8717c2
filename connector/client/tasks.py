"""The client's background tasks: kept alive while they run, their failures always observed.

asyncio keeps only a weak reference to a task and reports an exception nobody retrieved as
"Task exception was never retrieved" when the task is collected, long after and far from its
cause. Every task the client starts without awaiting it goes through `spawn`, which holds it
in its owner's set and retrieves its outcome: an exception there is a client bug, logged at
ERROR with its traceback on the `minilog.client` logger at the moment it happens.
"""
import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

log = logging.getLogger("minilog.client")


def spawn(coro: Coroutine[Any, Any, Any], tasks: set[asyncio.Task[Any]]) -> asyncio.Task[Any]:
    """Run `coro` in the background, held in `tasks` until it ends, its failure logged."""
    task = asyncio.get_running_loop().create_task(coro)
    tasks.add(task)
    task.add_done_callback(tasks.discard)
    task.add_done_callback(log_failure)
    return task


def log_failure(task: asyncio.Task[Any]) -> None:
    """Retrieve `task`'s exception and log it: nobody awaits a background task."""
    if not task.cancelled() and (e := task.exception()) is not None:
        name = getattr(task.get_coro(), "__qualname__", task.get_name())
        log.error("background task %s failed", name, exc_info=e)


def retrieve_exception(task: asyncio.Task[Any]) -> None:
    """Mark `task`'s exception retrieved: for a shared task whose awaiters (through
    `asyncio.shield`) each receive it, and which may end after all of them gave up."""
    if not task.cancelled():
        task.exception()
