"""Producers a script never closed: flushed briefly and closed quietly at interpreter exit.

A `Producer` runs its event loop in a daemon thread. A script that ends without `flush()` or
`close()` would leave that loop's tasks to be destroyed mid-flight at interpreter shutdown
("Task was destroyed but it is pending!" tracebacks) and its queued records silently dropped.
confluent-kafka prints nothing there; minilog does as little: at exit each open producer gets
EXIT_FLUSH_S to deliver what it holds, is closed, and one line says how many records were left
undelivered, if any (the script should have flushed).
"""
from __future__ import annotations

import atexit
import logging
import time
import weakref
from typing import Protocol

log = logging.getLogger("minilog.producer")

EXIT_FLUSH_S = 2.0

_open: weakref.WeakSet["_Closable"] = weakref.WeakSet()


class _Closable(Protocol):
    def close_at_exit(self, timeout: float) -> int: ...


def track(producer: _Closable) -> None:
    """Close `producer` at interpreter exit unless it was closed before."""
    _open.add(producer)


def untrack(producer: _Closable) -> None:
    _open.discard(producer)


def close_open_producers(timeout: float = EXIT_FLUSH_S) -> int:
    """Flush every producer still open (together up to `timeout` seconds), close them, and
    warn once if records were left undelivered; how many were."""
    left, deadline = 0, time.monotonic() + timeout
    for producer in list(_open):
        untrack(producer)
        try:
            left += producer.close_at_exit(max(0.0, deadline - time.monotonic()))
        except Exception as e:  # at exit: say nothing more than the one line below
            log.debug("closing a producer at exit: %r", e)
    if left:
        log.warning("%d record%s not delivered: a Producer was never flushed or closed before "
                    "the interpreter exited (call flush() or close())", left,
                    "" if left == 1 else "s")
    return left


atexit.register(close_open_producers)
