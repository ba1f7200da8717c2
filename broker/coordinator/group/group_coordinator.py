"""The group coordinator: the groups of the `__consumer_offsets` partitions led here, on the
broker's event loop (Kafka's GroupCoordinatorService with its GroupMetadataManager).

It owns what every kind of group shares: loading and unloading partitions as this broker is
elected or resigns, validating a request against the partition's state, and writing records.
Everything runs on the event loop, so no locks are needed; each change that must survive a
restart is one record batch in `__consumer_offsets`, written through the coordinator runtime
(`runtime.py`; one `GroupShard` per partition led here holds its groups) before the request is
answered. The protocols are composed, one concept each: a classic group's JoinGroup, SyncGroup,
Heartbeat and LeaveGroup in `classic_group_protocol.py`, KIP-848's ConsumerGroupHeartbeat in
`consumer_group_coordinator.py`, a consumer group's classic members in
`consumer_group_classic.py`, offsets and administration in `group_offsets.py`.
"""
from __future__ import annotations

import asyncio
from collections.abc import Awaitable

from minilog.connector.protocol import ErrorCode

from . import group as g
from .classic_group_protocol import ClassicGroupProtocol
from .consumer_group import ConsumerGroup
from .consumer_group_classic import ClassicMembers
from .consumer_group_coordinator import ConsumerGroupProtocol
from .group import Group, JoinResult, SyncResult
from .group_metrics import GroupMetrics
from .group_offsets import GroupOffsets
from .group_shard import GroupShard
from .group_store import OFFSETS_TOPIC, OffsetsTopic
from .txn_offsets import PendingTxnOffsets
from ..broker_view import GroupBroker
from ..partition_writer import TOO_LARGE, LogPartitionWriter, now_ms, sized
from ..runtime import CoordinatorRuntime, Producer, Record
from ..shard_view import ShardStateView


class GroupCoordinator:
    def __init__(self, broker: GroupBroker, runtime: CoordinatorRuntime | None = None) -> None:
        cfg = broker.config
        self.broker = broker
        self.store = OffsetsTopic(broker)
        self.runtime = runtime or CoordinatorRuntime(
            LogPartitionWriter(broker, cfg["offsets.commit.timeout.ms"]))
        self.runtime.register(OFFSETS_TOPIC, lambda index: GroupShard(self, index))
        self.groups = ShardStateView(self.runtime, OFFSETS_TOPIC, self.store.partition_for, "groups")
        self.min_session_ms = cfg["group.min.session.timeout.ms"]
        self.max_session_ms = cfg["group.max.session.timeout.ms"]
        self.retention_ms = cfg["offsets.retention.minutes"] * 60000
        self.retention_check_ms = cfg["offsets.retention.check.interval.ms"]
        self.txn_offsets = PendingTxnOffsets()  # TxnOffsetCommits awaiting their marker
        self.classic = ClassicGroupProtocol(self, cfg["group.initial.rebalance.delay.ms"])
        self.consumer = ConsumerGroupProtocol(self, cfg)  # KIP-848 groups, in `groups` too
        self.classic_members = ClassicMembers(self, cfg["group.consumer.migration.policy"])
        self.offsets = GroupOffsets(self)  # offsets and administration (Kafka's OffsetMetadataManager)
        self._active = False
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        broker.metrics.register(GroupMetrics(self.groups, broker.partition))

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self) -> GroupCoordinator:
        """Create `__consumer_offsets` if needed and serve; its partitions are loaded as the
        metadata elects this broker their leader (`on_election`)."""
        self.store.ensure()
        return self.serve([])

    def serve(self, partitions: list[int]) -> GroupCoordinator:
        """Load `partitions` (led here) and start serving requests and expiring offsets."""
        self._loop = asyncio.get_running_loop()
        for index in partitions:
            self.load_partition(index)
        self._active = True
        self._task = asyncio.create_task(self.offsets.expire_periodically())
        return self

    async def stop(self) -> None:
        self._active = False
        if self._task:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        self.runtime.unload_all()

    @property
    def active(self) -> bool:
        return self._active

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The event loop it serves on, from `serve` on (requests and timers come after)."""
        if self._loop is None:
            raise RuntimeError("the group coordinator is not serving yet")
        return self._loop

    def load_partition(self, index: int) -> None:
        """Coordinate the groups of `__consumer_offsets` partition `index`, now led here: its
        records replayed into a new shard, fenced by the partition's leader epoch."""
        partition = self.broker.partition(OFFSETS_TOPIC, index)
        self.runtime.load(OFFSETS_TOPIC, index, partition.leader_epoch if partition else -1)

    def on_election(self, index: int, epoch: int) -> None:
        """This broker leads `__consumer_offsets` partition `index` at leader `epoch` (Kafka's
        onElection, from the metadata publisher): its groups are loaded, unless already at
        that epoch or a newer one."""
        self.runtime.on_election(OFFSETS_TOPIC, index, epoch)

    def on_resignation(self, index: int, epoch: int | None) -> None:
        """...and no longer leads it, whose leader epoch is now `epoch` (Kafka's
        onResignation): its groups are unloaded unless they were loaded at that epoch or a
        newer one."""
        self.runtime.on_resignation(OFFSETS_TOPIC, index, epoch)

    def unload_partition(self, index: int) -> None:
        """This broker stops coordinating the groups of partition `index` (Kafka's
        onResignation): their parked requests get NOT_COORDINATOR and clients look again."""
        self.runtime.unload(OFFSETS_TOPIC, index)

    def write_records(self, group_id: str, entries: list[Record], replay: bool = True,
                      producer: Producer | None = None,
                      for_commit: bool = False) -> Awaitable[int]:
        """Records of `group_id` through the runtime (replayed unless the caller changed the
        state itself): an awaitable of 0 once acknowledged, or the error code to answer."""
        _, acked = self.runtime.append(OFFSETS_TOPIC, self.store.partition_for(group_id),
                                       entries, producer, replay)
        return sized(acked, ErrorCode.INVALID_COMMIT_OFFSET_SIZE if for_commit
                      else ErrorCode.UNKNOWN_SERVER_ERROR)

    def write_now(self, group_id: str, entries: list[Record]) -> int:
        """`write_records` answered once appended (expiry's and deletion's tombstones)."""
        code, acked = self.runtime.append(OFFSETS_TOPIC, self.store.partition_for(group_id),
                                          entries)
        asyncio.ensure_future(acked)
        return ErrorCode.UNKNOWN_SERVER_ERROR if code in TOO_LARGE else code

    def on_partitions_deleted(self, partitions: list[tuple[str, int]]) -> int:
        """Kafka's onPartitionsDeleted (the replica manager and the topic manager call it)."""
        return self.offsets.on_partitions_deleted(partitions)

    def txn_marker_written(self, index: int, producer_id: int, commit: bool) -> None:
        """A commit or abort marker landed in `__consumer_offsets` partition `index`."""
        self.runtime.replay_marker(OFFSETS_TOPIC, index, producer_id, commit)

    def retire(self, group: Group | ConsumerGroup) -> None:
        """Kafka's onGroupUnloaded: parked requests learn it is no longer coordinated here."""
        if isinstance(group, ConsumerGroup):
            group.transition(g.DEAD, now_ms())
            self.consumer.unload(group)
            return
        g.stop_classic(group, ErrorCode.NOT_COORDINATOR)

    def validate(self, group_id: str | None, allow_empty: bool = False, offsets: bool = False) -> int:
        """Kafka's validateGroupStatus: 0, or why this broker cannot serve the group now.

        With `offsets` (OffsetCommit, OffsetFetch) also COORDINATOR_LOAD_IN_PROGRESS while this
        broker may have been fenced unawares (`BrokerLifecycle.serving`): paused past its
        session, it may have been replaced, and the offsets it has are older than its
        successor's. Not NOT_COORDINATOR: the lease also lapses on every controller failover,
        and librdkafka answers NOT_COORDINATOR by dropping the coordinator and its heartbeats
        with it, so repeated failovers time its session out and the group rebalances without
        end; a loading coordinator is retried in place. Once this broker learns it was deposed,
        its shard is unloaded and the answer is NOT_COORDINATOR."""
        if group_id is None or (not allow_empty and group_id == ""):
            return ErrorCode.INVALID_GROUP_ID
        if not self._active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = self.runtime.status(OFFSETS_TOPIC, self.store.partition_for(group_id))
        if error:
            return error
        lifecycle = getattr(self.broker, "lifecycle", None)
        if offsets and lifecycle is not None and not lifecycle.serving:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return 0

    def _classic_group(self, group_id: str) -> Group | ConsumerGroup | None:
        """The group for a classic request: an empty consumer group becomes a classic one
        (keeping its offsets), as Kafka 4 converts it; a live one stays what it is."""
        group = self.groups.get(group_id)
        if isinstance(group, ConsumerGroup) and not group.members:
            classic = self.add_group(group_id)
            classic.offsets, classic.offsets_written_at = group.offsets, group.offsets_written_at
            classic.persisted = group.persisted
            return classic
        return group

    def add_group(self, group_id: str) -> Group:
        group = self.groups[group_id] = Group(group_id, now_ms())
        return group

    # -- the classic group APIs, routed by the kind of group ---------------------------------------
    async def join_group(self, group_id: str, member_id: str, instance_id: str | None,
                         client_id: str, client_host: str, rebalance_timeout_ms: int,
                         session_timeout_ms: int, protocol_type: str,
                         protocols: list[tuple[str, bytes]], require_known_member_id: bool,
                         supports_skip_assignment: bool) -> JoinResult:
        error = self.validate(group_id)
        if error:
            return JoinResult(error, member_id)
        if not self.min_session_ms <= session_timeout_ms <= self.max_session_ms:
            return JoinResult(ErrorCode.INVALID_SESSION_TIMEOUT, member_id)
        group = self._classic_group(group_id)
        if isinstance(group, ConsumerGroup):
            return await self.classic_members.join(
                group, member_id, instance_id, client_id, client_host, rebalance_timeout_ms,
                session_timeout_ms, protocol_type, protocols, require_known_member_id)
        return await self.classic.join(
            group, group_id, member_id, instance_id, client_id, client_host,
            rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols,
            require_known_member_id, supports_skip_assignment)

    async def sync_group(self, group_id: str, generation_id: int, member_id: str,
                         instance_id: str | None, protocol_type: str | None,
                         protocol_name: str | None, assignments: dict[str, bytes]) -> SyncResult:
        error = self.validate(group_id)
        if error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            return SyncResult(ErrorCode.REBALANCE_IN_PROGRESS)  # the rebalance must restart
        if error:
            return SyncResult(error)
        group: Group | ConsumerGroup | None = self.groups.get(group_id)
        if isinstance(group, ConsumerGroup):
            return self.classic_members.sync(group, generation_id, member_id, instance_id,
                                             protocol_type, protocol_name)
        return await self.classic.sync(group, generation_id, member_id, instance_id,
                                       protocol_type, protocol_name, assignments)

    def heartbeat(self, group_id: str, generation_id: int, member_id: str,
                  instance_id: str | None) -> int:
        error = self.validate(group_id)
        if error:
            return 0 if error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS else error
        group: Group | ConsumerGroup | None = self.groups.get(group_id)
        if isinstance(group, ConsumerGroup):
            return self.classic_members.heartbeat(group, generation_id, member_id, instance_id)
        return self.classic.heartbeat(group, generation_id, member_id, instance_id)

    async def leave_group(self, group_id: str,
                          leaving: list[tuple[str, str | None]]) -> tuple[int, list[int]]:
        """`leaving` is [(member id, group instance id)]; returns (error, [per-member error])."""
        error = self.validate(group_id)
        if error:
            return error, []
        if self.groups.get(group_id) is None:
            return 0, [ErrorCode.UNKNOWN_MEMBER_ID] * len(leaving)
        errors: list[int] = []
        for member_id, instance_id in leaving:
            group: Group | ConsumerGroup | None = self.groups.get(group_id)  # may turn classic
            if isinstance(group, ConsumerGroup):
                errors.append(await self.classic_members.leave(group, member_id, instance_id))
            elif group is None or group.state == g.DEAD:  # (None: unloaded while one left)
                return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
            else:
                errors.append(self.classic.leave(group, member_id, instance_id))
        return 0, errors

