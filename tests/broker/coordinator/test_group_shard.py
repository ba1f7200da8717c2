"""The group coordinator's shard kind in process: `__consumer_offsets` records -> groups.

A consumer group (KIP-848) changes only by replaying the records its heartbeat produced: what a
heartbeat leaves in memory is what loading its records gives, a heartbeat whose append fails
leaves the group as it was, and the answer waits for the acknowledgement. Classic group
metadata, committed offsets and transactional offsets load through the same replay."""
from __future__ import annotations

import asyncio

from coordinator_standins import StandInBroker, run, serving
from memory_partitions import MemoryPartitions

from minilog.broker.coordinator.group.consumer_group import ConsumerGroup
from minilog.broker.coordinator.group.consumer_group_coordinator import HeartbeatRequest
from minilog.broker.coordinator.group.group import Group
from minilog.broker.coordinator.group.group_coordinator import GroupCoordinator
from minilog.broker.coordinator.group.group_records import (
    GroupRecord,
    MemberRecord,
    OffsetAndMetadata,
    group_key,
    group_value,
    offset_key,
    offset_value,
)
from minilog.broker.coordinator.runtime import LoggedBatch, Marker, Producer
from minilog.connector.protocol import ErrorCode
from minilog.connector.protocol.consumer_protocol import Subscription, encode_subscription

OFFSETS = "__consumer_offsets"


def coordinator_on(partitions: MemoryPartitions, epoch: int = 3) -> GroupCoordinator:
    """A group coordinator leading the single `__consumer_offsets` partition (needs a loop)."""
    broker = StandInBroker(partitions, {"t": 4, "u": 2}, offsets_topic_num_partitions=1)
    return serving(GroupCoordinator, broker, OFFSETS, epoch)


def join(member_id: str, topics: tuple[str, ...] = ("t",), epoch: int = 0,
         owned: dict | None = None, group: str = "g") -> HeartbeatRequest:
    return HeartbeatRequest(group, member_id, epoch, None, None, 30000 if epoch == 0 else -1,
                            list(topics) if epoch == 0 else None, None, None, owned,
                            "client", "/127.0.0.1", 1)


def snapshot(group: ConsumerGroup) -> tuple:
    """What the records say of a consumer group (nothing of timers)."""
    return (group.group_epoch, group.assignment_epoch, sorted(group.static_members.items()),
            {mid: (m.member_epoch, m.previous_member_epoch, m.state, m.assigned,
                   m.pending_revocation, m.subscribed_topic_names, m.client_id,
                   m.rebalance_timeout_ms) for mid, m in group.members.items()},
            group.target, dict(group.owners), group.topics)


def reloaded(partitions: MemoryPartitions) -> GroupCoordinator:
    """A second coordinator loading the same partition, as a new leader would."""
    return coordinator_on(partitions, epoch=partitions.leader_epochs[(OFFSETS, 0)] + 1)


def test_what_a_heartbeat_leaves_in_memory_is_what_its_records_load_to():
    async def scenario():
        partitions = MemoryPartitions()
        coordinator = coordinator_on(partitions)
        first = await coordinator.consumer.heartbeat(join("m1"))
        assert first.error == 0 and first.member_epoch == 1
        second = await coordinator.consumer.heartbeat(join("m2", ("t", "u")))
        assert second.error == 0
        again = await coordinator.consumer.heartbeat(join("m1", epoch=1, owned=first.assignment))
        assert again.error == 0
        live = coordinator.groups["g"]
        assert len(live.members) == 2 and live.group_epoch == 2
        loaded = reloaded(partitions).groups["g"]
        assert snapshot(loaded) == snapshot(live)
    run(scenario)


def test_a_heartbeat_whose_append_fails_leaves_the_group_as_it_was():
    async def scenario():
        partitions = MemoryPartitions()
        coordinator = coordinator_on(partitions)
        assert (await coordinator.consumer.heartbeat(join("m1"))).error == 0
        before = snapshot(coordinator.groups["g"])
        partitions.fail_appends = ErrorCode.COORDINATOR_NOT_AVAILABLE
        refused = await coordinator.consumer.heartbeat(join("m2"))
        assert refused.error == ErrorCode.COORDINATOR_NOT_AVAILABLE
        assert snapshot(coordinator.groups["g"]) == before
        partitions.fail_appends = ErrorCode.COORDINATOR_NOT_AVAILABLE
        refused = await coordinator.consumer.heartbeat(join("m1", group="new"))
        assert refused.error == ErrorCode.COORDINATOR_NOT_AVAILABLE
        assert "new" not in coordinator.groups
    run(scenario)


def test_a_heartbeat_is_answered_once_its_records_are_acknowledged():
    async def scenario():
        partitions = MemoryPartitions()
        coordinator = coordinator_on(partitions)
        partitions.hold_acks = True
        answer = asyncio.ensure_future(coordinator.consumer.heartbeat(join("m1")))
        await asyncio.sleep(0.05)
        assert not answer.done()
        assert "m1" in coordinator.groups["g"].members  # replayed at once
        partitions.release()
        assert (await answer).error == 0
    run(scenario)


def test_a_leave_tombstones_the_member_and_a_reload_forgets_it():
    async def scenario():
        partitions = MemoryPartitions()
        coordinator = coordinator_on(partitions)
        await coordinator.consumer.heartbeat(join("m1"))
        await coordinator.consumer.heartbeat(join("m2"))
        left = await coordinator.consumer.heartbeat(join("m2", epoch=-1))
        assert left.error == 0
        live = coordinator.groups["g"]
        assert list(live.members) == ["m1"]
        assert snapshot(reloaded(partitions).groups["g"]) == snapshot(live)
    run(scenario)


def test_unloading_the_partition_answers_a_waiting_heartbeat_not_coordinator():
    async def scenario():
        partitions = MemoryPartitions()
        coordinator = coordinator_on(partitions)
        partitions.hold_acks = True
        answer = asyncio.ensure_future(coordinator.consumer.heartbeat(join("m1")))
        await asyncio.sleep(0.05)
        coordinator.unload_partition(0)
        partitions.release()
        assert (await answer).error == ErrorCode.NOT_COORDINATOR
        assert coordinator.validate("g") == ErrorCode.NOT_COORDINATOR
    run(scenario)


def test_classic_group_metadata_and_offsets_load_through_replay():
    async def scenario():
        partitions = MemoryPartitions()
        partitions.lead(OFFSETS, 0, 3)
        member = MemberRecord("c1", None, "client", "/h", 30000, 10000, b"sub", b"asg")
        record = GroupRecord("consumer", 4, "range", "c1", 1000, [member])
        offset = OffsetAndMetadata(42, 1, "meta", 1000)
        partitions.logs[(OFFSETS, 0)] += [
            LoggedBatch([(group_key("classic"), group_value(record))], None),
            LoggedBatch([(offset_key("classic", "t", 0), offset_value(offset)),
                         (offset_key("gone", "t", 0), offset_value(offset))], None),
            LoggedBatch([(offset_key("gone", "t", 0), None)], None)]
        coordinator = coordinator_on(partitions)
        classic = coordinator.groups["classic"]
        assert isinstance(classic, Group) and classic.state == "Stable"
        assert (classic.generation_id, classic.leader_id, list(classic.members)) == (4, "c1", ["c1"])
        assert classic.members["c1"].assignment == b"asg"
        assert classic.offsets == {("t", 0): offset}
        assert "gone" not in coordinator.groups  # its only offset was deleted
        partitions.logs[(OFFSETS, 0)].append(LoggedBatch([(group_key("classic"), None)], None))
        emptied = reloaded(partitions).groups["classic"]
        assert not emptied.members and emptied.offsets == {("t", 0): offset}
    run(scenario)


def test_transactional_offsets_count_once_their_commit_marker_is_replayed():
    async def scenario():
        partitions = MemoryPartitions()
        partitions.lead(OFFSETS, 0, 3)
        committed, aborted = OffsetAndMetadata(7), OffsetAndMetadata(9)
        partitions.logs[(OFFSETS, 0)] += [
            LoggedBatch([(offset_key("txn", "t", 0), offset_value(committed))], Producer(5, 0)),
            LoggedBatch([(offset_key("txn", "t", 1), offset_value(aborted))], Producer(6, 0)),
            LoggedBatch([(offset_key("open", "t", 2), offset_value(aborted))], Producer(8, 0)),
            Marker(5, True), Marker(6, False)]
        coordinator = coordinator_on(partitions)
        assert coordinator.groups["txn"].offsets == {("t", 0): committed}
        assert coordinator.txn_offsets.is_pending("open", ("t", 2))
        assert "open" not in coordinator.groups
    run(scenario)


def test_an_offset_commit_is_replayed_at_once_but_fetched_only_once_acknowledged():
    async def scenario():
        partitions = MemoryPartitions()
        coordinator = coordinator_on(partitions)
        offsets = coordinator.offsets
        assert await offsets.commit_offsets("o", "", None, -1, {("t", 0): OffsetAndMetadata(5)}) \
            == {("t", 0): 0}
        partitions.hold_acks = True
        commit = asyncio.ensure_future(offsets.commit_offsets(
            "o", "", None, -1, {("t", 0): OffsetAndMetadata(6), ("t", 1): OffsetAndMetadata(1)}))
        await asyncio.sleep(0.05)
        assert coordinator.groups["o"].offsets[("t", 0)].offset == 6  # replayed
        assert offsets.fetch_offsets("o") == (0, [(("t", 0), OffsetAndMetadata(5))])
        partitions.release()
        assert await commit == {("t", 0): 0, ("t", 1): 0}
        assert [om.offset for _, om in offsets.fetch_offsets("o")[1]] == [6, 1]
    run(scenario)


def test_an_offset_commit_whose_append_fails_is_reverted_and_a_new_group_not_created():
    async def scenario():
        partitions = MemoryPartitions()
        coordinator = coordinator_on(partitions)
        offsets = coordinator.offsets
        await offsets.commit_offsets("o", "", None, -1, {("t", 0): OffsetAndMetadata(5)})
        partitions.fail_appends = ErrorCode.COORDINATOR_NOT_AVAILABLE
        assert await offsets.commit_offsets("o", "", None, -1, {("t", 0): OffsetAndMetadata(6)}) \
            == {("t", 0): ErrorCode.COORDINATOR_NOT_AVAILABLE}
        assert coordinator.groups["o"].offsets == {("t", 0): OffsetAndMetadata(5)}
        partitions.fail_appends = ErrorCode.COORDINATOR_NOT_AVAILABLE
        await offsets.commit_offsets("fresh", "", None, -1, {("t", 0): OffsetAndMetadata(1)})
        assert "fresh" not in coordinator.groups
        assert offsets.delete_groups(["o"]) == {"o": 0}
        assert "o" not in coordinator.groups
        assert "o" not in reloaded(partitions).groups
    run(scenario)


def test_a_leave_of_several_members_answers_not_available_once_the_partition_is_unloaded():
    """LeaveGroup takes its members one at a time; a classic member leaving a consumer group
    waits for its tombstones, during which the partition may move: the next member finds no
    group here and the request is answered COORDINATOR_NOT_AVAILABLE, as for a dead group."""
    async def scenario():
        partitions = MemoryPartitions()
        coordinator = coordinator_on(partitions)
        await coordinator.consumer.heartbeat(join("m1"))
        subscription = encode_subscription(Subscription(("t",)))
        joined = await coordinator.join_group("g", "", None, "client", "/127.0.0.1", 30000,
                                              30000, "consumer", [("range", subscription)],
                                              False, True)
        assert joined.error == 0, joined
        partitions.hold_acks = True
        answer = asyncio.ensure_future(coordinator.leave_group(
            "g", [(joined.member_id, None), ("m1", None)]))
        await asyncio.sleep(0.05)
        coordinator.unload_partition(0)
        partitions.release()
        assert await answer == (ErrorCode.COORDINATOR_NOT_AVAILABLE, [])
    run(scenario)
