"""The synchronous consumer: `AsyncConsumer`'s methods, blocking, for scripts.

Apart from `consumer.py` because it holds no consumer logic of its own: it runs the asyncio
core on a background loop thread (`LoopThread`) and waits for each call, except where the
calling thread must take part: rebalance callbacks run in it (`polling`, `run_serving`), and
it decodes the fetched records (`poll`, `fetch_range_arrow`), so that decoding runs beside the
loop's thread receiving and decrypting the next fetch instead of after it.
"""
from collections.abc import Iterator, Mapping
from typing import Any, Self

from .config import Config
from .connection import LoopThread, add_blocking_methods
from .consumer import AsyncConsumer
from .consumer_group import polling, run_serving
from .fetcher import PartitionData, Records, decode_arrow
from .types import TopicPartition


class Consumer:
    """Synchronous consumer for scripts; the same methods as AsyncConsumer, blocking.

    `poll(timeout=1.0, max_records=None)` -> list of ConsumerRecord (empty on timeout);
    `poll_arrow(...)` -> list of pyarrow.RecordBatch; `fetch_range_arrow(tp, start, end)` ->
    iterator of RecordBatch.
    """

    def __init__(self, config: Mapping[str, Any] | None = None, **overrides: Any) -> None:
        self._core = AsyncConsumer(config, **overrides)
        self._core.group_face, self._core.group_defer_callbacks = self, True
        self._core.decode_in_caller = True
        self._loop = LoopThread("minilog-consumer")
        try:
            self._loop.run(self._core.start())
        except BaseException:
            self._loop.stop()
            raise

    @property
    def config(self) -> Config:
        return self._core.config

    def poll(self, timeout: float = 1.0, max_records: int | None = None) -> Records:
        """Records decoded in the calling thread, while the loop's thread fetches more."""
        return polling(self, lambda left: self._core.poll(left, max_records), timeout,
                       self._core.predecode)

    def poll_arrow(self, timeout: float = 1.0, max_records: int | None = None,
                   include_headers: bool = True) -> list[Any]:  # of pyarrow RecordBatch
        return polling(self, lambda left: self._core.poll_arrow(left, max_records,
                                                                include_headers), timeout)

    def unsubscribe(self) -> None:
        """Leave the group (rebalance callbacks run here, in the calling thread)."""
        run_serving(self, self._core.unsubscribe())

    def fetch_range_arrow(self, tp: tuple[str, int], start: int, end: int,
                          timeout: float | None = None, include_headers: bool = True
                          ) -> Iterator[Any]:  # of pyarrow RecordBatch
        """Iterator of RecordBatches with the records of `tp` in [start, end), decoded in the
        calling thread while the loop's thread fetches (and decrypts) the next answer."""
        part = TopicPartition(*tp)
        agen = self._core.fetch_range(part, start, end, timeout)
        check = self.config["check.crcs"]

        async def step() -> tuple[PartitionData, int]:
            return await agen.__anext__()
        try:
            while True:
                try:
                    pd, first = self._loop.run(step())
                except StopAsyncIteration:
                    return
                batch = decode_arrow(pd.records, part, first, end, include_headers, check,
                                     pd.skip)
                if batch.num_rows:
                    yield batch
        finally:
            if not self._loop.loop.is_closed():
                self._loop.run(agen.aclose())

    def close(self, timeout: float | None = None) -> None:
        """Leave the group and stop, within `timeout` seconds (default 30)."""
        if not self._loop.loop.is_closed():
            try:
                run_serving(self, self._core.close(timeout))  # on_revoke runs in this thread
            finally:
                self._loop.stop()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


add_blocking_methods(Consumer, AsyncConsumer, (
    "assign", "unassign", "assignment", "seek", "seek_to_beginning", "seek_to_end", "position",
    "pause", "resume", "paused", "offsets_for_times", "beginning_offsets", "end_offsets",
    "partitions_for", "subscribe", "commit", "committed", "memberid", "lag", "watermarks",
    "consumer_group_metadata"))
