"""The active controller: broker liveness and partition leadership, decided on the quorum leader.

Brokers register (BrokerRegistration) and heartbeat (BrokerHeartbeat). A registered broker
starts fenced and is unfenced once its metadata has caught up with its own registration (and
with the record that last fenced it: a broker fenced while paused knows what moved); a
broker silent for `broker.session.timeout.ms` is fenced, or sooner, two heartbeat intervals (at
least 1 s) after every connection it had to this node closed: its process is gone (see
`peer_connections.py`). Every partition a fenced broker led gets a new leader from its ISR (the
first live ISR member in replica order, leader epoch + 1); it leaves the ISRs it was in. A
partition whose whole ISR is fenced keeps its last ISR member and has no leader until that
member returns, unless `unclean.leader.election.enable` (broker default, or the topic's config)
lets a live replica outside the ISR lead, losing what it lacks. Partition leaders change their
ISR with AlterPartition, checked against the leader and partition epochs. With
`auto.leader.rebalance.enable` every `leader.imbalance.check.interval.seconds` leadership
returns to each partition's preferred replica (the first) once it is live and in the ISR, so
failovers do not leave a few brokers leading everything. Beside dedicated controllers the
brokers are quorum observers, who need up to `controller.quorum.fetch.timeout.ms` to find a new
controller: a new one waits that much longer before fencing them. Each decision is metadata
records appended through the quorum (see `quorum_store.py`), decided against the controller's
working view (its own pending decisions included); no broker acts on them before they commit.
The operations a request asks for return a `ControllerResult` (records plus the response),
which the handler commits through the store: the response goes out once the records commit.
Every request carrying a broker epoch (BrokerHeartbeat, AlterPartition, AllocateProducerIds)
has it checked in one place, `broker_epoch_error`, as Kafka's ClusterControlManager does.
"""
from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from minilog.connector.client.connection import wait_set
from minilog.connector.protocol import ErrorCode

from . import reassignment, records
from .controller_metrics import ControllerMetrics
from .controller_result import ControllerResult
from .image import MetadataImage, PartitionState, TopicState
from .internal_topics import OFFSETS, ensure_internal_topic
from .records import Record

log = logging.getLogger("minilog.broker.controller")

# Decisions wait for their deadlines, except while this node cannot tell whether it still
# controls (no majority heard lately) or `_tick` failed: then it looks again this often.
RETRY_S = 0.1
DEADLINE_SLACK_S = 0.001  # a deadline is passed (fencing needs `now > deadline`) once woken

# (error, is_caught_up, is_fenced): BrokerHeartbeat's answer
Heartbeat = tuple[int, bool, bool]
# (error, the partition's state or None): one partition's AlterPartition answer
Altered = tuple[int, PartitionState | None]
# {topic: [(partition, error, message)]}: ElectLeaders' answer
Elected = dict[str, list[tuple[int, int, str | None]]]
PREFERRED, UNCLEAN = 0, 1  # ElectLeaders' election types (Kafka's ElectionType)
_ELECTION_FAILED = {PREFERRED: (ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
                                "The preferred leader was not available."),
                    UNCLEAN: (ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
                              "Eligible topic partition leaders are not available.")}


def broker_epoch_error(image: MetadataImage, broker_id: int, broker_epoch: int) -> int:
    """STALE_BROKER_EPOCH unless `broker_epoch` is the current registration of `broker_id`
    (Kafka's checkBrokerEpoch), else 0."""
    if image.broker_epochs.get(broker_id, -2) != broker_epoch:
        return int(ErrorCode.STALE_BROKER_EPOCH)
    return 0


class Controller:
    def __init__(self, broker: Any, store: Any) -> None:
        self.broker, self.store = broker, store
        cfg = broker.config
        self.session_timeout = cfg["broker.session.timeout.ms"] / 1000
        # A live broker whose connection broke opens another with its next heartbeat.
        self.lost_grace = min(self.session_timeout,
                              max(1.0, 2 * cfg["broker.heartbeat.interval.ms"] / 1000))
        self._since = 0.0  # when this node became the active controller
        self.offsets_rf = cfg["offsets.topic.replication.factor"]
        self.rebalance = cfg["auto.leader.rebalance.enable"]
        self.rebalance_every = cfg["leader.imbalance.check.interval.seconds"]
        self.unclean = cfg["unclean.leader.election.enable"]
        self._next_rebalance = 0.0
        self.last_heartbeat: dict[int, float] = {}
        self._task: asyncio.Future[None] | None = None
        self._changed = asyncio.Event()  # `wake`: look before the next deadline
        broker.peer_connections.lost_listeners.append(lambda node_id: self.wake())
        store.role_listeners.append(self._role_changed)
        broker.metrics.register(ControllerMetrics(
            lambda: self.store.raft.is_leader and self.active, lambda: self.image))

    @property
    def image(self) -> MetadataImage:
        """The working view: what the quorum committed plus what this controller appended."""
        return self.store.working  # type: ignore[no-any-return]

    @property
    def active(self) -> bool:
        """Leading the quorum, and followed by a majority lately: a controller cut off from
        the quorum answers NOT_CONTROLLER instead of deciding what will never commit."""
        return bool(self.store.raft.majority_heard())

    def _role_changed(self, leading: bool) -> None:
        if leading:
            now = time.monotonic()
            if not self.broker.is_broker:  # observers need a fetch timeout to find us
                now += self.store.raft.fetch_timeout
            self.last_heartbeat = {b: now for b in self.image.registered}
            self._since = now
            self._task = asyncio.ensure_future(self._tick_forever())
        elif self._task:
            self._task.cancel()
            self._task = None

    async def stop(self) -> None:
        if self._task:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    # -- brokers ------------------------------------------------------------------------------------
    def register(self, broker_id: int, host: str, port: int, rack: str | None = None,
                 listeners: Mapping[str, tuple[str, int]] | None = None) -> ControllerResult[int]:
        """The registration, whose offset is the broker epoch (the response). The broker
        starts fenced."""
        self.last_heartbeat[broker_id] = time.monotonic()
        recs = []
        if broker_id in self.image.brokers:  # a restart nobody noticed: lead elsewhere first
            recs = self._fence_records(broker_id)
        recs.append(records.broker_record(broker_id, host, port, rack, listeners))
        self.wake()
        return ControllerResult.of(self.store.next_offset + len(recs) - 1, recs)

    def heartbeat(self, broker_id: int, broker_epoch: int, metadata_offset: int,
                  want_fence: bool) -> ControllerResult[Heartbeat]:
        """(error, is_caught_up, is_fenced), answered once the records that changed it commit,
        as Kafka's controller answers only then, or a broker could act on a decision a
        failover forgets."""
        error = broker_epoch_error(self.image, broker_id, broker_epoch)
        if error:
            return ControllerResult.of((error, False, True))
        self.last_heartbeat[broker_id] = time.monotonic()
        # Caught up with its registration and with its last fencing: a broker fenced while
        # paused serves again only once it knows what moved away from it meanwhile.
        caught_up = metadata_offset >= max(broker_epoch, self.image.fenced_at.get(broker_id, -1))
        fenced = broker_id in self.image.fenced
        recs: list[Record] = []
        if fenced and caught_up and not want_fence:
            recs = [records.fence_record(broker_id, False)] + self._elect_records(broker_id)
            fenced = False
            self.wake()  # one more live broker: the offsets topic may be due
        elif not fenced and want_fence:
            recs = self._fence_records(broker_id)
            fenced = True
        return ControllerResult.of((0, caught_up, fenced), recs)

    def wake(self) -> None:
        """Something a decision of `_tick` depends on changed before its deadline: a broker
        registered or was unfenced (the offsets topic may be due), or lost its connections."""
        self._changed.set()

    async def _tick_forever(self) -> None:
        """Decide at each deadline (a session's end, a lost broker's grace, the next leader
        rebalance) or when woken, instead of polling: an idle controller sleeps for seconds
        (Kafka schedules each broker's session expiry as a deadline too)."""
        while True:
            try:
                delay = self._tick()
            except Exception:  # noqa: BLE001 - a controller bug must not stop fencing
                log.exception("controller tick failed")
                delay = RETRY_S
            await wait_set(self._changed, delay)
            self._changed.clear()

    def _tick(self) -> float:
        """Fence the brokers due, create the offsets topic if due, move leaderships back to
        their preferred replicas if due: the seconds until the next thing falls due."""
        if not self.store.raft.majority_heard() or self.broker.stopping:
            return RETRY_S  # not (or no longer surely) the controller, or closing
        now = time.monotonic()
        # A session that starts later ends later than this: it is the longest sleep.
        due: float = now + self.session_timeout
        for b in list(self.image.brokers):
            deadline, why = self._fence_deadline(b)
            if now > deadline:
                log.info("broker %d %s: fencing it", b, why)
                self.store.append(self._fence_records(b))
            else:
                due = min(due, deadline)
        self.ensure_offsets_topic()
        if self.rebalance:
            if now >= self._next_rebalance:
                self._next_rebalance = now + self.rebalance_every
                recs = self._changes(self._preferred)
                if recs:
                    log.info("moving %d leadership(s) back to preferred replicas", len(recs))
                    self.store.append(recs)
            due = min(due, self._next_rebalance)
        return due - now + DEADLINE_SLACK_S

    def _fence_deadline(self, broker_id: int) -> tuple[float, str]:
        """When a live broker is to be fenced, and why: its session times out, or every
        connection it had here closed (or its address refused one) a grace ago and it has not
        been heard of since (nor since this node took over: a new controller gives each a
        grace). Past the deadline it is fenced."""
        deadline, why = float("inf"), ""
        heard = self.last_heartbeat.get(broker_id)
        if heard is not None:
            deadline, why = heard + self.session_timeout, "missed its session timeout"
        lost = self.broker.peer_connections.lost_since(broker_id)
        if lost is not None and max(lost, self._since) + self.lost_grace < deadline:
            deadline = max(lost, self._since) + self.lost_grace
            why = "closed every connection (or refuses them) and is silent"
        return deadline, why

    def ensure_offsets_topic(self) -> None:
        """Create `__consumer_offsets` once enough brokers are up (Kafka does it on first use):
        offsets.topic.replication.factor of them, at most the voters where every voter is a
        broker (combined mode), so a small cluster's groups work with the default of 3."""
        if OFFSETS.name in self.image.topics:
            return
        wanted = self.offsets_rf
        if self.broker.is_broker:
            wanted = min(wanted, len(self.store.raft.voters))
        if len(self.image.brokers) >= wanted:
            ensure_internal_topic(self.broker, OFFSETS, OFFSETS.num_partitions(self.broker.config),
                                  wanted)

    # -- leadership ------------------------------------------------------------------------------------
    def _changes(self, fn: Callable[[PartitionState, TopicState], PartitionState | None]
                 ) -> list[Record]:
        """Partition records for every partition whose state `fn(state)` changes (returns a new one)."""
        recs = []
        for ts in self.image.topics.values():
            for index, p in ts.partitions.items():
                new = fn(p, ts)
                if new is not None:
                    new = dataclasses.replace(new, partition_epoch=p.partition_epoch + 1)
                    recs.append(records.partition_record(ts.name, index, new))
        return recs

    def _fence_records(self, broker_id: int) -> list[Record]:
        live = set(self.image.brokers) - {broker_id}

        def without(p: PartitionState, ts: TopicState) -> PartitionState | None:
            if broker_id not in p.replicas:
                return None
            isr = [r for r in p.isr if r != broker_id] or list(p.isr)  # keep the last one
            if p.leader == broker_id or p.leader not in live:
                leader = next((r for r in p.replicas if r in isr and r in live), -1)
                if leader < 0 and self._unclean_allowed(ts):
                    leader = next((r for r in p.replicas if r in live), -1)
                    isr = [leader] if leader >= 0 else isr
                return dataclasses.replace(p, leader=leader, leader_epoch=p.leader_epoch + 1,
                                           isr=tuple(isr))
            if tuple(isr) == p.isr:
                return None
            return dataclasses.replace(p, isr=tuple(isr))
        # The fence record last: a broker has seen its leaderships move once it has seen it.
        return self._changes(without) + [records.fence_record(broker_id, True)]

    def _unclean_allowed(self, ts: TopicState) -> bool:
        value = ts.configs.get("unclean.leader.election.enable")
        return bool(self.unclean) if value is None else str(value).lower() == "true"

    def _preferred(self, p: PartitionState, ts: TopicState) -> PartitionState | None:
        """The partition led by its first replica, when that one is live and in sync."""
        first = p.replicas[0]
        if p.leader == first or first not in p.isr or first not in self.image.brokers:
            return None
        return dataclasses.replace(p, leader=first, leader_epoch=p.leader_epoch + 1)

    def elect_leaders(self, election_type: int, wanted: Mapping[str, Sequence[int]] | None
                      ) -> ControllerResult[Elected]:
        """ElectLeaders (KIP-183, KIP-460), as `kafka-leader-election.sh` asks for it: PREFERRED
        makes each partition's first replica its leader where it is live and in the ISR;
        UNCLEAN gives a partition without a leader one, from its ISR if a member is live, else
        any live replica (which may lack acknowledged records). `wanted`: {topic: partitions},
        None for every partition, whose answer then leaves out those that needed no election
        (Kafka's controller does the same)."""
        recs: list[Record] = []
        out: Elected = {}
        if wanted is None:
            for name, ts in self.image.topics.items():
                results = [(i, *self._elect(name, i, election_type, recs)) for i in ts.partitions]
                out[name] = [r for r in results if r[1] != ErrorCode.ELECTION_NOT_NEEDED]
        else:
            for name, indexes in wanted.items():
                out[name] = [(i, *self._elect(name, i, election_type, recs)) for i in indexes]
        return ControllerResult.of(out, recs)

    def _partition(self, topic: str, index: int) -> tuple[TopicState | None,
                                                           PartitionState | None]:
        """The topic and its partition `index` in the working view (None where unknown)."""
        ts = self.image.topics.get(topic)
        return ts, ts.partitions.get(index) if ts is not None else None

    def _elect(self, topic: str, index: int, election_type: int, recs: list[Record]
               ) -> tuple[int, str | None]:
        ts, p = self._partition(topic, index)
        if ts is None or p is None:
            return (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    f"No such topic as {topic}" if ts is None else
                    f"No such partition as {topic}-{index}")
        needed = p.leader != p.replicas[0] if election_type == PREFERRED else p.leader < 0
        if not needed:
            return ErrorCode.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition."
        new = self._preferred(p, ts) if election_type == PREFERRED else self._unclean(p)
        if new is None:
            return _ELECTION_FAILED[election_type]
        new = dataclasses.replace(new, partition_epoch=p.partition_epoch + 1)
        recs.append(records.partition_record(topic, index, new))
        return 0, None

    def _unclean(self, p: PartitionState) -> PartitionState | None:
        """A partition without a leader led by a live ISR member, else by any live replica
        (the ISR then that replica alone)."""
        live = self.image.brokers
        leader = next((r for r in p.replicas if r in p.isr and r in live),
                      next((r for r in p.replicas if r in live), -1))
        if leader < 0:
            return None
        isr = p.isr if leader in p.isr else (leader,)
        return dataclasses.replace(p, leader=leader, leader_epoch=p.leader_epoch + 1, isr=isr)

    def alter_reassignments(self, wanted: Mapping[str, Mapping[int, Sequence[int] | None]]
                            ) -> ControllerResult[Elected]:
        """AlterPartitionReassignments (KIP-455, see `reassignment.py`): {topic: {partition:
        target replicas, or None to cancel}}; answered {topic: [(partition, error, message)]}."""
        recs: list[Record] = []
        out: Elected = {}
        for name, targets in wanted.items():
            out[name] = [(i, *self._reassign(name, i, target, recs))
                         for i, target in targets.items()]
        return ControllerResult.of(out, recs)

    def _reassign(self, topic: str, index: int, target: Sequence[int] | None,
                  recs: list[Record]) -> tuple[int, str | None]:
        ts, p = self._partition(topic, index)
        if ts is None or p is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find partition {topic}:{index}."
        live = self.image.brokers
        if target is None:
            if not p.reassigning:
                return (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
                        f"No ongoing reassignment for {topic}:{index}.")
            new = reassignment.reverted(p, live)
            why = "it would leave the partition without an in-sync replica"
        else:
            invalid = reassignment.invalid_target(target, self.image.registered)
            if invalid:
                return ErrorCode.INVALID_REPLICA_ASSIGNMENT, invalid
            new = reassignment.started(p, target, live)
            why = "the replicas left would hold no in-sync copy"
        if new is None:
            return (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"Unable to {'cancel' if target is None else 'reassign'} {topic}:{index}: "
                    f"{why}.")
        if new != p:
            new = dataclasses.replace(new, partition_epoch=p.partition_epoch + 1)
            recs.append(records.partition_record(topic, index, new))
        return 0, None

    def list_reassignments(self, wanted: Mapping[str, Sequence[int]] | None
                           ) -> dict[str, list[tuple[int, PartitionState]]]:
        """ListPartitionReassignments: {topic: [(partition, state)]} of the committed
        partitions with a reassignment under way, of `wanted` ({topic: partitions}; None:
        all); unknown topics and partitions are left out, as Kafka leaves them."""
        topics = self.store.image.topics
        out: dict[str, list[tuple[int, PartitionState]]] = {}
        for name in (topics if wanted is None else wanted):
            ts = topics.get(name)
            if ts is None:
                continue
            indexes = ts.partitions if wanted is None else wanted[name]
            found = [(i, ts.partitions[i]) for i in indexes
                     if i in ts.partitions and ts.partitions[i].reassigning]
            if found:
                out[name] = found
        return out

    def _elect_records(self, broker_id: int) -> list[Record]:
        """Partitions without a leader whose ISR holds `broker_id` (coming back) get it, as do
        those whose other replicas are all down when unclean election is allowed."""
        def elect(p: PartitionState, ts: TopicState) -> PartitionState | None:
            if p.leader >= 0 or broker_id not in p.replicas:
                return None
            if broker_id in p.isr:
                return dataclasses.replace(p, leader=broker_id, leader_epoch=p.leader_epoch + 1)
            if self._unclean_allowed(ts) and not any(r in self.image.brokers for r in p.isr):
                return dataclasses.replace(p, leader=broker_id, leader_epoch=p.leader_epoch + 1,
                                           isr=(broker_id,))
            return None
        return self._changes(elect)

    def alter_partition(self, broker_id: int, topic: str | None, index: int, leader_epoch: int,
                        partition_epoch: int, new_isr: list[int],
                        epochs: Mapping[int, int] | None = None) -> ControllerResult[Altered]:
        """(error, PartitionState or None): a leader's ISR change, as Kafka's AlterPartition.
        `epochs` (v3, KIP-903): member -> the broker epoch the leader saw it fetch with (-1:
        unknown); a member whose registration has changed since is INELIGIBLE_REPLICA, as a
        broker restarted since that fetch may not hold what it claimed."""
        ts = self.image.topics.get(topic) if topic is not None else None
        p = ts.partitions.get(index) if ts else None
        if p is None:
            return ControllerResult.of((ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None))
        error = self._alter_error(p, broker_id, leader_epoch, partition_epoch, new_isr, epochs)
        if error:
            return ControllerResult.of((error, p))
        new = dataclasses.replace(p, isr=tuple(new_isr), partition_epoch=p.partition_epoch + 1)
        # The last replica a reassignment adds has joined the ISR: the reassignment completes
        # in the same change, as KRaft's controller completes it.
        new = reassignment.completed(new, self.image.brokers) or new
        assert topic is not None
        return ControllerResult.of((0, new), [records.partition_record(topic, index, new)])

    def _alter_error(self, p: PartitionState, broker_id: int, leader_epoch: int,
                     partition_epoch: int, new_isr: list[int],
                     epochs: Mapping[int, int] | None) -> int:
        if p.leader != broker_id:
            return int(ErrorCode.INVALID_REQUEST)
        if leader_epoch != p.leader_epoch:
            return int(ErrorCode.FENCED_LEADER_EPOCH)
        if partition_epoch != p.partition_epoch:
            return int(ErrorCode.INVALID_UPDATE_VERSION)
        if broker_id not in new_isr or any(r not in p.replicas for r in new_isr):
            return int(ErrorCode.INVALID_REQUEST)
        if any(r not in p.isr and r not in self.image.brokers for r in new_isr):
            return int(ErrorCode.INELIGIBLE_REPLICA)
        registered = self.image.broker_epochs
        if any(e != -1 and registered.get(r) != e for r, e in (epochs or {}).items()):
            return int(ErrorCode.INELIGIBLE_REPLICA)
        return 0
