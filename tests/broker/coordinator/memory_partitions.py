"""Coordinator partitions in memory, for testing the coordinator runtime and its shards in
process: the runtime's `PartitionWriter` with a log per partition, a leader epoch per
partition, appends that can be made to fail, and acknowledgements held until released."""
from __future__ import annotations

import asyncio
from collections.abc import Iterator

from minilog.broker.coordinator.runtime import LoggedBatch, Marker, Producer, Record
from minilog.connector.protocol import ErrorCode


class MemoryPartitions:
    def __init__(self) -> None:
        self.logs: dict[tuple[str, int], list[LoggedBatch | Marker]] = {}
        self.leader_epochs: dict[tuple[str, int], int] = {}
        self.fail_appends = 0          # the error code the next append answers (once)
        self.hold_acks = False         # acknowledgements wait for `release`
        self._held: list[tuple[int, asyncio.Future[int]]] = []

    def lead(self, topic: str, index: int, epoch: int) -> None:
        self.leader_epochs[(topic, index)] = epoch
        self.logs.setdefault((topic, index), [])

    def batches(self, topic: str, index: int) -> list[LoggedBatch]:
        return [b for b in self.logs.get((topic, index), []) if isinstance(b, LoggedBatch)]

    def append_marker(self, topic: str, index: int, producer_id: int, commit: bool) -> None:
        self.logs[(topic, index)].append(Marker(producer_id, commit))

    # -- PartitionWriter ------------------------------------------------------------------------
    def append(self, topic: str, index: int, epoch: int, records: list[Record],
               producer: Producer | None) -> tuple[int, int]:
        if self.fail_appends:
            code, self.fail_appends = self.fail_appends, 0
            return code, -1
        if self.leader_epochs.get((topic, index)) != epoch:
            return ErrorCode.NOT_COORDINATOR, -1
        log = self.logs[(topic, index)]
        log.append(LoggedBatch(list(records), producer))
        return 0, len(log) - 1

    async def wait_for_acks(self, topic: str, index: int, offset: int) -> int:
        if not self.hold_acks:
            return 0
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._held.append((offset, future))
        return await future

    def release(self, code: int = 0, count: int | None = None) -> None:
        """Acknowledge (or fail with `code`) the oldest `count` held writes, all by default."""
        held, self._held = self._held[:count], self._held[len(self._held[:count]):]
        for _, future in held:
            if not future.done():
                future.set_result(code)

    def read(self, topic: str, index: int) -> Iterator[LoggedBatch | Marker]:
        yield from list(self.logs.get((topic, index), []))
