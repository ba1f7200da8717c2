"""Raft over the `__cluster_metadata` log, as KRaft does it (KIP-595): the controller quorum's
asyncio driver around the pure core (`raft_client.py`, where the rules are written down).

The driver owns what the core must not: the clock, the sockets and the applying of committed
records. It calls `poll` on a timer and whenever something happened, sends each request the
core returns over the node's peer connections (`wire.py`) and feeds the answer back to
`handle`; the broker's request handlers hand it incoming Vote, BeginQuorumEpoch and
EndQuorumEpoch requests, and the Fetch handler asks it about each voter's fetch of the
metadata log (`quorum_partition.QuorumPartition`). After every step it copies the core's
role and high watermark into the partition, which the Fetch handler and the waiters on
commits read.

Only committed records are handed to the listeners (`handle_commit`, a stored batch at a time, as
Kafka's RaftClient hands its listeners batches), in order, on every node, the leader included (KRaft's rule: a broker acts on nothing the quorum may still lose). The active
controller learns its own uncommitted appends through `uncommitted()` and keeps them in a
working view of its own (see `quorum_store.py`). Should a node ever have applied records that a
truncation removes, it is `reset()` and replays the log from the start. A snapshot is an
ordinary record holding the whole image; once it is committed every node deletes the log before
it, and a follower asking for an offset that is gone starts over from the leader's log start,
snapshot first.
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Callable, Iterator, Optional, Protocol

from minilog.connector.batch import iter_batches
from minilog.connector.records import decode_batches, next_offset_after

from ..storage.file_region import FileRegion
from .epoch_state import LeaderState
from .messages import (BeginQuorumEpochRequest, EndQuorumEpochRequest, Message, Request,
                       RequestFailed, VoteRequest)
from .partition_log import PartitionLog
from .quorum_partition import QuorumPartition
from .quorum_state import QuorumState
from .raft_client import NotLeader, RaftClient
from .raft_log import FileQuorumStateStore, RecordSerde
from .wire import METADATA_TOPIC, send

__all__ = ["METADATA_TOPIC", "NotLeader", "RaftNode", "parse_voters"]

log = logging.getLogger("minilog.broker.raft")

Batch = list[tuple[int, dict[str, Any]]]  # [(offset, record)] of one stored batch


class RaftListener(Protocol):
    """The log's user, as Kafka's RaftClient.Listener: it hears of committed batches in log
    order (each what one append wrote, so one controller operation's records arrive together),
    of a reset before the log is replayed from its start or a snapshot, and of leadership."""

    def handle_commit(self, batch: Batch) -> object: ...  # what it returns is not used

    def handle_reset(self) -> None: ...

    def handle_leader_change(self, leading: bool) -> None: ...


POLL_S = 0.05  # the core's timers are this fine at most
IDLE_S = 1.0   # the only voter, leading, has no timer to keep: it waits for work (at most this)
STOP_S = 1.0   # how long a stopping leader waits for EndQuorumEpoch to be delivered


def parse_voters(spec: str) -> dict[int, tuple[str, int]]:
    """`controller.quorum.voters`: "1@host:port,2@host:port" -> {1: (host, port), ...}."""
    voters = {}
    for item in spec.split(","):
        node, _, address = item.strip().partition("@")
        host, _, port = address.rpartition(":")
        if not node.isdigit() or not host or not port.isdigit():
            raise ValueError(f"controller.quorum.voters: expected id@host:port, got {item!r}")
        voters[int(node)] = (host, int(port))
    return voters


async def _wait(event: asyncio.Event, timeout: float) -> None:
    """Until `event` is set or `timeout` passes (asyncio.wait, not wait_for: on 3.11 wait_for
    can swallow a cancellation that arrives as the wait completes)."""
    waiter = asyncio.ensure_future(event.wait())
    try:
        await asyncio.wait({waiter}, timeout=timeout)
    finally:
        waiter.cancel()


class RaftNode:
    def __init__(self, node_id: int, voters: dict[int, tuple[str, int]],
                 partition: QuorumPartition,
                 peers: Any, *, election_timeout_ms: int = 1000, fetch_timeout_ms: int = 2000,
                 listener: RaftListener, cluster_id: Optional[str] = None,
                 on_refused: Callable[[int], None] = lambda node_id: None,
                 serde: RecordSerde) -> None:
        """`listener`: the first of those handed what commits (`register` adds more; the
        metadata store registers its loader, then itself, as KRaft registers the
        MetadataLoader beside the controller's listener).
        `on_refused(node id)`: nothing listens at that voter's address. `serde`: how the
        records are written, given by the log's user (the metadata store gives the metadata
        records' module, as Kafka's RaftManager gives the client its MetadataRecordSerde)."""
        self.node_id, self.voters, self.peers = node_id, voters, peers
        self.partition, self.log = partition, partition.log
        self.dir = self.log.dir
        self.election_timeout = election_timeout_ms / 1000
        self.fetch_timeout = fetch_timeout_ms / 1000
        self.listeners: list[RaftListener] = [listener]
        self._on_refused = on_refused
        self.cluster_id = cluster_id
        self.serde = serde
        self.raft_log = PartitionLog(partition, self.serde)
        self.core = RaftClient(node_id, voters, self.raft_log, FileQuorumStateStore(self.dir),
                               self, now=time.monotonic(),
                               election_timeout=self.election_timeout,
                               fetch_timeout=self.fetch_timeout)
        partition.raft = self  # it asks `follower_fetched` about each fetch it serves
        self.applied = self.log.log_start_offset
        self._stopping = False
        self._task: Optional[asyncio.Task[None]] = None
        self._sending: set[asyncio.Future[None]] = set()
        self._wake = asyncio.Event()
        self._committed = asyncio.Event()  # set (and replaced) whenever the high watermark moves
        self._delete_before: Optional[int] = None  # a snapshot's offset, the log start once committed
        self.caught_up = asyncio.Event()  # applied what the leader had committed, once
        self._sync()

    # -- what the node is ------------------------------------------------------------------
    @property
    def is_voter(self) -> bool:
        return self.node_id in self.voters

    @property
    def epoch(self) -> int:
        return self.core.epoch

    @property
    def leader_id(self) -> Optional[int]:
        return self.core.leader_id

    @property
    def is_leader(self) -> bool:
        return self.core.is_leader

    @property
    def role(self) -> str:
        """The role's name, as Kafka's `EpochState.name`."""
        return self.core.state.name

    @property
    def state(self) -> QuorumState:
        """The election state (epoch, vote, leader) as persisted."""
        return self.core.state.election()

    @property
    def epoch_start(self) -> Optional[int]:
        s = self.core.state
        return s.epoch_start_offset if isinstance(s, LeaderState) else None

    @property
    def high_watermark(self) -> int:
        return int(self.partition.high_watermark)

    @property
    def bytes_since_snapshot(self) -> int:
        return self.raft_log.bytes_appended

    @bytes_since_snapshot.setter
    def bytes_since_snapshot(self, value: int) -> None:
        self.raft_log.bytes_appended = value

    def majority_heard(self) -> bool:
        """Leading, and a majority of voters fetched lately: a leader that was paused or cut off
        must not act on its old view (it resigns at its next poll)."""
        return self.core.majority_heard(time.monotonic())

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> RaftNode:
        self._task = asyncio.create_task(self._run())
        return self

    async def stop(self) -> None:
        """Stop; a leader first tells the other voters (EndQuorumEpoch) so they elect at once."""
        self._stopping = True
        ends = [asyncio.ensure_future(self._exchange(r)) for r in self.core.resign()]
        if ends:
            await asyncio.wait(ends, timeout=STOP_S)
        for task in [*self._sending, *ends] + ([self._task] if self._task else []):
            task.cancel()
        await asyncio.gather(*self._sending, *ends, *([self._task] if self._task else []),
                             return_exceptions=True)

    async def _run(self) -> None:
        while not self._stopping:
            try:
                self._dispatch(self.core.poll(time.monotonic()))
                self._after()
                await _wait(self._wake, IDLE_S if self._leads_alone() else POLL_S)
                self._wake.clear()
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - the quorum must outlive any single bug
                log.exception("raft node %d: unexpected error", self.node_id)
                await asyncio.sleep(0.5)

    def _leads_alone(self) -> bool:
        """A single broker's quorum: no follower to hear from or to start an epoch with, so
        nothing in `poll` is due until a write or a message wakes the loop (an idle broker
        otherwise woke 20 times a second)."""
        return self.core.is_leader and self.voters.keys() == {self.node_id}

    # -- driving the core --------------------------------------------------------------------
    def _dispatch(self, out: list[Request] | list[Message]) -> None:
        for request in out:
            if not self._stopping:
                task = asyncio.ensure_future(self._exchange(request))  # type: ignore[arg-type]
                self._sending.add(task)
                task.add_done_callback(self._sending.discard)

    async def _exchange(self, request: Request) -> None:
        """Send one request and hand its answer (or its failure) to the core."""
        address = self.voters.get(request.destination)
        answer: Message = RequestFailed(request) if address is None else await send(
            self.peers, address, request, self.cluster_id,
            election_timeout=self.election_timeout, fetch_timeout=self.fetch_timeout,
            on_refused=self._on_refused)
        if self._stopping:
            return
        try:
            self._step(answer)
        except Exception:  # noqa: BLE001 - logged; the next poll goes on
            log.exception("raft node %d: handling %s", self.node_id, type(answer).__name__)

    def _step(self, message: Message) -> list[Message]:
        """`handle` a message now; send what it calls for, return the answers to a request."""
        out = self.core.handle(message, time.monotonic())
        answers = [m for m in out if getattr(m, "request", None) is message]
        self._dispatch([m for m in out if getattr(m, "request", None) is not message])
        self._after()
        self._wake.set()
        return answers

    def _sync(self) -> None:
        """Hand the core's role and high watermark to the partition the handlers read."""
        core = self.core
        if self.partition.adopt(core.epoch, core.leader_id, core.is_leader,
                                core.high_watermark):
            self._committed.set()
            self._committed = asyncio.Event()

    def _after(self) -> None:
        self._sync()
        self._apply_committed()

    # -- requests from other nodes (broker/server/handlers) ---------------------------------------
    def handle_vote(self, epoch: int, candidate: int, last_epoch: int, last_offset: int,
                    pre_vote: bool = False) -> bool:
        """Whether to grant a Vote request (the answer carries our epoch and leader)."""
        answer, = self._step(VoteRequest(candidate, self.node_id, epoch, candidate, last_epoch,
                                         last_offset, pre_vote))
        return bool(answer.vote_granted)  # type: ignore[union-attr]

    def handle_begin_epoch(self, epoch: int, leader_id: int) -> int:
        """0, or FENCED_LEADER_EPOCH for an announcement from an older epoch."""
        answer, = self._step(BeginQuorumEpochRequest(leader_id, self.node_id, leader_id, epoch))
        return int(answer.error_code)  # type: ignore[union-attr]

    def handle_end_epoch(self, epoch: int, leader_id: int) -> int:
        """The leader of `epoch` resigned: elect a successor now instead of timing out."""
        answer, = self._step(EndQuorumEpochRequest(leader_id, self.node_id, leader_id, epoch))
        return int(answer.error_code)  # type: ignore[union-attr]

    def fetched_log(self, topic: str, index: int) -> Optional[QuorumPartition]:
        """The log a replica's fetch of `topic`-`index` reads when it is the quorum's own (the
        metadata log, served to voters and observers only), else None: the Raft layer serves
        its log's fetches, as Kafka's KafkaRaftClient handles FETCH for the metadata
        partition, so the Fetch handler never names it."""
        return self.partition if (topic, index) == (METADATA_TOPIC, 0) else None

    def follower_fetched(self, replica_id: int, fetch_offset: int,
                         last_fetched_epoch: int) -> Optional[tuple[int, int]]:
        """A voter's or observer's fetch reached us (the Fetch handler asks through the
        partition): (diverging epoch, its end offset) to answer instead of records, or None."""
        diverging = self.core.leader_fetched(replica_id, fetch_offset, last_fetched_epoch,
                                             time.monotonic())
        self._sync()
        self._wake.set()  # the run loop applies what this committed
        return None if diverging is None else (diverging.epoch, diverging.end_offset)

    def register(self, listener: RaftListener) -> None:
        """Hand `listener` too what commits, resets and leadership, after the listeners
        registered before it (Kafka's RaftClient.register); before the log is first replayed."""
        self.listeners.append(listener)

    def _reset_listeners(self) -> None:
        for listener in self.listeners:
            listener.handle_reset()

    # -- the core's listener ----------------------------------------------------------------------
    def on_leadership(self, leading: bool) -> None:
        self._sync()
        if leading:
            log.info("raft node %d: leader of epoch %d", self.node_id, self.epoch)
        else:
            log.info("raft node %d: no longer leader (epoch %d, leader %s)", self.node_id,
                     self.epoch, self.leader_id)
            if self.applied > self.high_watermark:  # our uncommitted tail may not survive
                self._replay_from_start()
        for listener in self.listeners:
            listener.handle_leader_change(leading)

    def on_truncated(self) -> None:
        self._sync()
        if self.applied > self.log.log_end_offset:
            self._replay_from_start()

    def on_start_over(self, offset: int) -> None:
        self._sync()
        self._reset_listeners()
        self.applied = offset

    # -- leading --------------------------------------------------------------------------------
    def append(self, recs: list[dict[str, Any]]) -> int:
        """Append records (dicts) as one batch; returns the last offset. They are applied, here
        as everywhere, once committed."""
        last = self.core.append(recs)
        self._sync()
        self._wake.set()
        return last

    def uncommitted(self) -> list[tuple[int, dict[str, Any]]]:
        """The records this node's log holds beyond what it applied: [(offset, record)]."""
        return list(self._records(self.applied, self.log.log_end_offset))

    async def wait_committed(self, offset: int, timeout: float) -> bool:
        """Whether `offset` is committed within `timeout` seconds (False if leadership is lost)."""
        deadline = time.monotonic() + timeout
        while self.partition.high_watermark <= offset:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not self.is_leader:
                return False
            await _wait(self._committed, min(remaining, 0.1))
        self._apply_committed()  # whoever is told "committed" reads it in the image at once
        return True

    # -- applying ---------------------------------------------------------------------------------
    def delete_before_when_committed(self, offset: int) -> None:
        """A snapshot at `offset` was applied: the log before it may go once it is committed."""
        self._delete_before = offset
        self._maybe_delete_prefix()

    def _maybe_delete_prefix(self) -> None:
        target = self._delete_before
        if target is not None and self.high_watermark > target and \
                target > self.log.log_start_offset:
            self.log.delete_records_before(target)
            self._delete_before = None

    def _apply_committed(self) -> None:
        self._apply_range(self.high_watermark)
        start = self.epoch_start
        if start is not None and self.applied > start:
            self.caught_up.set()  # our first record committed: the image holds all before it
        elif start is None and 0 <= self.core.leader_high_watermark <= self.applied:
            self.caught_up.set()  # applied what the leader had committed

    def _records(self, start: int, end: int) -> Iterator[tuple[int, dict[str, Any]]]:
        """(offset, record) for the metadata log's records in [start, end)."""
        for batch in self._batches(start, end):
            yield from batch

    def _batches(self, start: int, end: int) -> Iterator[Batch]:
        """The metadata log's records in [start, end), one list per stored batch."""
        while start < end:
            data = self.log.read(start, 1 << 20, upper_bound=end)
            if not data:
                return
            assert not isinstance(data, FileRegion)  # asked for no region: bytes
            recs = [r for r in decode_batches(data, start_offset=start) if r.offset < end]
            first = 0
            for _, header in iter_batches(data):
                last = first
                while last < len(recs) and recs[last].offset <= header.last_offset:
                    last += 1
                if last > first:
                    yield [(r.offset, self.serde.decode(r.value)) for r in recs[first:last]]
                first = last
            start = next_offset_after(data)

    def _apply_range(self, end: int) -> None:
        """Hand the committed batches in [applied, end) to the listener, in order."""
        self._maybe_delete_prefix()
        for batch in self._batches(self.applied, min(end, self.high_watermark)):
            for listener in self.listeners:
                listener.handle_commit(batch)
            self.applied = batch[-1][0] + 1

    def _replay_from_start(self) -> None:
        log.info("raft node %d: replaying the metadata log", self.node_id)
        self._reset_listeners()
        self.applied = self.log.log_start_offset
        self._apply_range(self.high_watermark)
