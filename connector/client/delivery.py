"""What `Producer.send` hands back: a future completed by the sender, per batch.

The sender (`sender.py`) completes a whole batch at once; each future holds the batch and its
record's index and builds RecordMetadata only when asked. Callers may wait from any thread.
"""
from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeAlias

from .types import KafkaTimeoutError, RecordMetadata

if TYPE_CHECKING:
    from .producer_batch import ProducerBatch

Watcher = Callable[["DeliveryFuture"], object]

log = logging.getLogger("minilog.client")


class DeliveryFuture:
    """The outcome of one `Producer.send`: `result(timeout)` returns RecordMetadata or raises.

    Lighter than concurrent.futures.Future: no lock and no RecordMetadata per record. The loop
    thread completes a whole batch at once, giving each of its futures the batch and the
    record's index in it; `result()` builds the RecordMetadata when asked. `add_done_callback`
    callbacks run on the producer's loop thread (at once in the caller if already done).
    """
    # Unset `_batch` and `_exc` slots mean "not done yet". The completing thread writes the
    # outcome (`_index` before `_batch`), then reads `_watch`; a thread that wants to hear of
    # the outcome appends to `_watch`, then reads the outcome: one of the two sees the other.
    __slots__ = ("_batch", "_exc", "_index", "_watch")

    _batch: ProducerBatch | _Resolved
    _exc: BaseException
    _index: int
    _watch: list[Watcher] | None

    def __init__(self) -> None:
        self._watch = None  # None, or callables to run with the future once it is done

    def __repr__(self) -> str:
        state = "failed" if self._failure() is not None else "done" if self.done() else "pending"
        return f"<DeliveryFuture {state}>"

    def done(self) -> bool:
        return hasattr(self, "_batch") or hasattr(self, "_exc")

    def _failure(self) -> BaseException | None:
        return getattr(self, "_exc", None)

    def set_result(self, value: RecordMetadata) -> None:
        self._index = 0
        self._batch = _Resolved(value)
        self._run_watchers()

    def set_exception(self, exc: BaseException) -> None:
        self._exc = exc
        self._run_watchers()

    def _run_watchers(self) -> None:
        watch = self._watch
        while watch:
            try:
                fn = watch.pop(0)  # atomic: each runs once, whichever thread pops it
            except IndexError:
                return
            try:
                fn(self)
            except Exception:
                log.exception("delivery callback failed")

    def _add_watcher(self, fn: Watcher) -> None:
        """Run `fn(self)` when done (now, in this thread, if that happened meanwhile)."""
        with _FUTURE_LOCK:  # two threads adding the first watcher at once make one list
            if self._watch is None:
                self._watch = [fn]
            else:
                self._watch.append(fn)
        if self.done():  # the completing thread may have looked before `fn` was added
            self._run_watchers()

    def add_done_callback(self, fn: Watcher) -> None:
        if self.done():
            fn(self)
        else:
            self._add_watcher(fn)

    def _wait(self, timeout: float | None) -> None:
        if not self.done():
            event = threading.Event()
            if timeout is None or timeout > 0:  # else no need to be woken (nor to keep a watcher)
                self._add_watcher(lambda _: event.set())
            if not event.wait(timeout) and not self.done():
                raise KafkaTimeoutError(f"delivery not reported in {timeout:g}s")

    def result(self, timeout: float | None = None) -> RecordMetadata:
        self._wait(timeout)
        exc = self._failure()
        if exc is not None:
            raise exc
        return self._batch.metadata(self._index)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        self._wait(timeout)
        return self._failure()


class _SentFuture(DeliveryFuture):
    """The DeliveryFuture `Producer.send` makes: it sets `_watch` itself, so creating one runs
    no Python `__init__` (a third of the cost of a future)."""
    __slots__ = ()
    __init__ = object.__init__


_FUTURE_LOCK = threading.Lock()  # only for adding watchers: first waiter, late callbacks


class _Resolved:
    """The outcome given to `DeliveryFuture.set_result` directly."""
    __slots__ = ("value",)

    def __init__(self, value: RecordMetadata) -> None:
        self.value = value

    def metadata(self, index: int) -> RecordMetadata:
        return self.value


class BulkDelivery:
    """The outcome of a bulk send (`Producer.send_arrow`): one future for many records.

    `result(timeout)` returns how many records were written, or raises the first error any of
    them met; records are counted down per batch by the sender, with no object per record.
    """

    def __init__(self, count: int) -> None:
        self.count, self._left = count, count
        self._exc: BaseException | None = None
        self._event = threading.Event()
        if count == 0:
            self._event.set()

    def __repr__(self) -> str:
        return f"<BulkDelivery {self.count - self._left}/{self.count} done>"

    def _settle(self, n: int, exc: BaseException | None = None) -> None:
        """`n` records reached their outcome (loop thread only)."""
        if exc is not None and self._exc is None:
            self._exc = exc
        self._left -= n
        if self._left <= 0:
            self._event.set()

    def done(self) -> bool:
        return self._event.is_set()

    def result(self, timeout: float | None = None) -> int:
        if not self._event.wait(timeout):
            raise KafkaTimeoutError(f"{self._left} of {self.count} records not reported in "
                                    f"{timeout:g}s")
        if self._exc is not None:
            raise self._exc
        return self.count

    def exception(self, timeout: float | None = None) -> BaseException | None:
        try:
            self.result(timeout)
        except KafkaTimeoutError:
            raise
        except Exception as e:  # noqa: BLE001 - the outcome itself
            return e
        return None


class BulkShare:
    """What a batch of a `ValueColumn` (rows of an Arrow column, `Producer.send_arrow`) holds
    in place of a future per record: its `count` records' part of one BulkDelivery."""

    __slots__ = ("count", "delivery")

    def __init__(self, delivery: BulkDelivery, count: int) -> None:
        self.delivery, self.count = delivery, count


# What a queued record's outcome goes to: AsyncProducer.send's asyncio future, Producer.send's
# DeliveryFuture, Producer.send_arrow's one BulkDelivery for many records, or a BulkShare of one
# for a column's rows
Delivery: TypeAlias = "asyncio.Future[RecordMetadata] | DeliveryFuture | BulkDelivery | BulkShare"


def complete_futures(futures: Iterable[Any], batch: ProducerBatch) -> None:
    """`batch` is written: settle the futures of its records, all in one pass (loop thread).

    A DeliveryFuture gets the batch and its index (it builds its RecordMetadata only if
    asked); a BulkDelivery counts one down; other futures (asyncio's, from AsyncProducer) get
    their RecordMetadata now."""
    for i, fut in enumerate(futures):
        if fut.__class__ is _SentFuture:  # not done before: a batch completes once
            fut._index = i
            fut._batch = batch  # the outcome, written after what it points to
            if fut._watch is not None:
                fut._run_watchers()
        elif fut.__class__ is BulkDelivery:
            fut._settle(1)
        elif fut.__class__ is BulkShare:
            fut.delivery._settle(fut.count)
        elif isinstance(fut, DeliveryFuture):
            if not fut.done():
                fut._index = i
                fut._batch = batch
                fut._run_watchers()
        elif not fut.done():
            fut.set_result(batch.metadata(i))


def fail_futures(futures: Iterable[Any], exc: BaseException) -> None:
    """The records of `futures` will not be written: each future fails with `exc`."""
    for fut in futures:
        if fut.__class__ is _SentFuture:
            fut._exc = exc
            if fut._watch is not None:
                fut._run_watchers()
        elif fut.__class__ is BulkDelivery:
            fut._settle(1, exc)
        elif fut.__class__ is BulkShare:
            fut.delivery._settle(fut.count, exc)
        elif not fut.done():
            fut.set_exception(exc)
