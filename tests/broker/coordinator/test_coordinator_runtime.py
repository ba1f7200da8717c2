"""The coordinator runtime in process: records are the only way a shard's state changes, on
write and on load; a write is replayed at once, answered only once acknowledged, reverted if
its append fails; a shard is fenced by the epoch it was loaded at."""
from __future__ import annotations

import asyncio

import pytest
from memory_partitions import MemoryPartitions

from minilog.broker.coordinator.runtime import CoordinatorError, CoordinatorRuntime, Producer
from minilog.connector.protocol import ErrorCode

TOPIC = "__test_state"


class KeyValueShard:
    """The smallest shard kind: the latest value of each key, and committed transactional
    values once their marker says so."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.state: dict[bytes, bytes] = {}
        self.pending: dict[int, dict[bytes, bytes]] = {}
        self.events: list[str] = []

    def replay(self, key: bytes, value: bytes | None, producer: Producer | None) -> None:
        if producer is not None:
            if value is None:
                self.pending.get(producer.producer_id, {}).pop(key, None)
            else:
                self.pending.setdefault(producer.producer_id, {})[key] = value
        elif value is None:
            self.state.pop(key, None)
        else:
            self.state[key] = value

    def replay_marker(self, producer_id: int, commit: bool) -> None:
        done = self.pending.pop(producer_id, {})
        if commit:
            self.state.update(done)

    def loaded(self) -> None:
        self.events.append("loaded")

    def unloaded(self) -> None:
        self.events.append("unloaded")


def put(key: bytes, value: bytes | None, response: str = "ok"):
    """An operation writing one record and answering `response`."""
    return lambda shard: ([(key, value)], response)


def runtime_at(epoch: int = 5) -> tuple[CoordinatorRuntime, MemoryPartitions]:
    partitions = MemoryPartitions()
    partitions.lead(TOPIC, 0, epoch)
    runtime = CoordinatorRuntime(partitions)
    runtime.register(TOPIC, KeyValueShard)
    runtime.load(TOPIC, 0, epoch)
    return runtime, partitions


def shard_state(runtime: CoordinatorRuntime) -> dict[bytes, bytes]:
    return runtime.shard(TOPIC, 0).state


def test_a_write_is_replayed_before_it_is_acknowledged_and_answered_after():
    async def scenario():
        runtime, partitions = runtime_at()
        partitions.hold_acks = True
        first = asyncio.ensure_future(runtime.write(TOPIC, 0, put(b"k", b"1", "first")))
        await asyncio.sleep(0)
        assert shard_state(runtime) == {b"k": b"1"}  # the next operation sees it
        seen = []
        second = asyncio.ensure_future(runtime.write(
            TOPIC, 0, lambda shard: (seen.append(dict(shard.state)) or [(b"j", b"2")], "second")))
        await asyncio.sleep(0.01)
        assert seen == [{b"k": b"1"}]
        assert not first.done() and not second.done()  # nothing answered before the acks
        partitions.release()
        assert await first == "first" and await second == "second"
        assert [b.records for b in partitions.batches(TOPIC, 0)] == [[(b"k", b"1")], [(b"j", b"2")]]
    asyncio.run(scenario())


def test_a_failed_append_reverts_the_state_to_the_operations_start():
    async def scenario():
        runtime, partitions = runtime_at()
        await runtime.write(TOPIC, 0, put(b"k", b"1"))
        partitions.fail_appends = ErrorCode.NOT_ENOUGH_REPLICAS
        with pytest.raises(CoordinatorError) as failed:
            await runtime.write(TOPIC, 0, lambda shard: ([(b"k", b"2"), (b"new", b"x"),
                                                          (b"k", None)], "never"))
        assert failed.value.code == ErrorCode.NOT_ENOUGH_REPLICAS
        assert shard_state(runtime) == {b"k": b"1"}
        await runtime.write(TOPIC, 0, put(b"k", b"3"))  # the view was reverted too
        partitions.fail_appends = ErrorCode.NOT_ENOUGH_REPLICAS
        with pytest.raises(CoordinatorError):
            await runtime.write(TOPIC, 0, put(b"k", None))
        assert shard_state(runtime) == {b"k": b"3"}
    asyncio.run(scenario())


def test_a_failed_acknowledgement_reverts_the_write_and_those_appended_after_it():
    async def scenario():
        runtime, partitions = runtime_at()
        await runtime.write(TOPIC, 0, put(b"a", b"0"))
        partitions.hold_acks = True
        first = asyncio.ensure_future(runtime.write(TOPIC, 0, put(b"a", b"1")))
        second = asyncio.ensure_future(runtime.write(TOPIC, 0, put(b"b", b"2")))
        await asyncio.sleep(0.01)
        assert shard_state(runtime) == {b"a": b"1", b"b": b"2"}
        partitions.release(ErrorCode.COORDINATOR_NOT_AVAILABLE, count=1)
        with pytest.raises(CoordinatorError) as failed:
            await first
        assert failed.value.code == ErrorCode.COORDINATOR_NOT_AVAILABLE
        assert shard_state(runtime) == {b"a": b"0"}
        partitions.release()
        with pytest.raises(CoordinatorError):
            await second
        assert shard_state(runtime) == {b"a": b"0"}
    asyncio.run(scenario())


def test_loading_replays_the_log_through_the_same_replay():
    async def scenario():
        runtime, partitions = runtime_at()
        await runtime.write(TOPIC, 0, lambda shard: ([(b"a", b"1"), (b"b", b"2")], None))
        await runtime.write(TOPIC, 0, put(b"a", None))
        await runtime.write(TOPIC, 0, put(b"t", b"txn"), producer=Producer(7, 0))
        await runtime.write(TOPIC, 0, put(b"u", b"aborted"), producer=Producer(8, 0))
        partitions.append_marker(TOPIC, 0, 7, commit=True)
        runtime.replay_marker(TOPIC, 0, 7, True)
        partitions.append_marker(TOPIC, 0, 8, commit=False)
        runtime.replay_marker(TOPIC, 0, 8, False)
        written = dict(shard_state(runtime))
        assert written == {b"b": b"2", b"t": b"txn"}
        fresh = CoordinatorRuntime(partitions)
        fresh.register(TOPIC, KeyValueShard)
        shard = fresh.load(TOPIC, 0, 5)
        assert shard.state == written and shard.pending == {}
        assert shard.events == ["loaded"]
    asyncio.run(scenario())


def test_unloading_fails_waiting_writes_with_not_coordinator():
    async def scenario():
        runtime, partitions = runtime_at()
        partitions.hold_acks = True
        waiting = asyncio.ensure_future(runtime.write(TOPIC, 0, put(b"k", b"1")))
        await asyncio.sleep(0.01)
        shard = runtime.shard(TOPIC, 0)
        runtime.unload(TOPIC, 0)
        partitions.release()
        with pytest.raises(CoordinatorError) as failed:
            await waiting
        assert failed.value.code == ErrorCode.NOT_COORDINATOR
        assert shard.events == ["loaded", "unloaded"]
        assert runtime.status(TOPIC, 0) == ErrorCode.NOT_COORDINATOR
        with pytest.raises(CoordinatorError):
            await runtime.write(TOPIC, 0, put(b"k", b"2"))
    asyncio.run(scenario())


def test_a_reload_at_a_newer_epoch_fences_the_old_shards_writes():
    async def scenario():
        runtime, partitions = runtime_at(epoch=5)
        partitions.hold_acks = True
        old = asyncio.ensure_future(runtime.write(TOPIC, 0, put(b"k", b"old")))
        await asyncio.sleep(0.01)
        partitions.lead(TOPIC, 0, 6)
        runtime.load(TOPIC, 0, 6)
        assert runtime.epoch(TOPIC, 0) == 6
        partitions.release()
        with pytest.raises(CoordinatorError) as failed:
            await old
        assert failed.value.code == ErrorCode.NOT_COORDINATOR
        assert shard_state(runtime) == {b"k": b"old"}  # what the log holds, loaded again
    asyncio.run(scenario())


def test_the_append_carries_the_epoch_the_operation_was_decided_under():
    async def scenario():
        runtime, partitions = runtime_at(epoch=5)
        partitions.lead(TOPIC, 0, 6)  # leadership moved; the shard has not heard yet
        with pytest.raises(CoordinatorError) as failed:
            await runtime.write(TOPIC, 0, put(b"k", b"late"))
        assert failed.value.code == ErrorCode.NOT_COORDINATOR
        assert shard_state(runtime) == {}
        assert partitions.batches(TOPIC, 0) == []
    asyncio.run(scenario())


def test_shard_kinds_are_registered_by_topic():
    partitions = MemoryPartitions()
    runtime = CoordinatorRuntime(partitions)
    runtime.register(TOPIC, KeyValueShard)
    runtime.register("__other_state", lambda index: KeyValueShard(index + 100))
    partitions.lead("__other_state", 3, 1)
    assert runtime.load("__other_state", 3, 1).index == 103
    assert runtime.status(TOPIC, 3) == ErrorCode.NOT_COORDINATOR
    with pytest.raises(KeyError):
        runtime.load("__unregistered", 0, 1)
