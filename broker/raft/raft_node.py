"""Raft over the `__cluster_metadata` log, as KRaft does it (KIP-595): the controller quorum.

Voters elect a leader with Vote (randomized election timeouts, a vote per epoch kept in
`quorum-state`, votes only for logs at least as up to date). An election starts with a pre-vote
(KIP-996): the voter asks, without entering a new epoch, whether the others would elect it, and
they say no while they have heard from a leader within the fetch timeout. So a voter that was
paused or cut off, and wakes up believing its leader lost, learns who leads and follows it in
the same epoch instead of deposing a working leader with a needless election. The winner announces itself with
BeginQuorumEpoch and appends a leader-change record, committed with everything before it.
Followers pull with the ordinary Fetch request (replica id, last fetched epoch), exactly as
partition followers do: the leader answers a divergent follower with `diverging_epoch` and the
follower truncates, and the high watermark is the offset a majority of voters has. A follower
that hears nothing from its leader for `controller.quorum.fetch.timeout.ms` starts an election,
or at once when the leader's address refuses connections (its process is gone); a leader that
hears from no majority for as long resigns. A node that is not a voter (a broker beside
dedicated controllers) is an observer: it fetches like a follower but never votes or campaigns,
and finds the leader by asking a voter. A leader stepping down cleanly sends EndQuorumEpoch so
the others elect a successor at once.

Only committed records are handed to `apply(offset, record)`, in order, on every node, the
leader included (KRaft's rule: a broker acts on nothing the quorum may still lose). The active
controller learns its own uncommitted appends through `uncommitted()` and keeps them in a
working view of its own (see `quorum_store.py`). Should a node ever have applied records that a
truncation removes, it is `reset()` and replays the log from the start. A snapshot is an ordinary record holding the
whole image; once it is committed every node deletes the log before it, and a follower asking
for an offset that is gone starts over from the leader's log start, snapshot first.
"""
import asyncio
import logging
import random
import time

from minilog.connector.batch import split_batches
from minilog.connector.client.types import KafkaConnectionError
from minilog.connector.protocol import ApiKey, ErrorCode, KafkaError, request
from minilog.connector.protocol.primitives import ZERO_UUID
from minilog.connector.records import decode_batches, encode_batch, next_offset_after

from ..metadata import records
from ..replication.follower_tracker import FollowerTracker, now_ms
from ..replication.partition import wait_for_any
from .quorum_state import QuorumState

log = logging.getLogger("minilog.broker.raft")

METADATA_TOPIC = "__cluster_metadata"
FOLLOWER, CANDIDATE, LEADER = "follower", "candidate", "leader"
FETCH_VERSION = 12  # topic names, last_fetched_epoch and diverging_epoch
_FETCH, _VOTE = request(ApiKey.FETCH), request(ApiKey.VOTE)
_BEGIN, _END = request(ApiKey.BEGIN_QUORUM_EPOCH), request(ApiKey.END_QUORUM_EPOCH)


class NotLeader(Exception):
    """Only the quorum leader (the active controller) can append to the metadata log."""


def parse_voters(spec):
    """`controller.quorum.voters`: "1@host:port,2@host:port" -> {1: (host, port), ...}."""
    voters = {}
    for item in spec.split(","):
        node, _, address = item.strip().partition("@")
        host, _, port = address.rpartition(":")
        if not node.isdigit() or not host or not port.isdigit():
            raise ValueError(f"controller.quorum.voters: expected id@host:port, got {item!r}")
        voters[int(node)] = (host, int(port))
    return voters


class RaftNode:
    def __init__(self, node_id, voters, partition, peers, *, election_timeout_ms=1000,
                 fetch_timeout_ms=2000, apply, reset, on_role_change, cluster_id=None,
                 on_refused=lambda node_id: None):
        self.node_id, self.voters, self.peers = node_id, voters, peers
        self.partition, self.log = partition, partition.log
        self.dir = self.log.dir
        self.election_timeout = election_timeout_ms / 1000
        self.fetch_timeout = fetch_timeout_ms / 1000
        self._apply, self._reset, self._on_role_change = apply, reset, on_role_change
        self._on_refused = on_refused  # fn(node id): nothing listens at that voter's address
        self.cluster_id = cluster_id
        self.state = QuorumState.load(self.dir)
        if self.state.leader_id == node_id:  # a leader that restarted must be elected again
            self.state.leader_id = None
        self.role = FOLLOWER
        self.applied = self.log.log_start_offset
        self.epoch_start = None
        partition.high_watermark = self.log.log_start_offset  # learned from the leader
        self._set_partition_role(False)
        self._last_contact = time.monotonic()
        self._stopping = False
        self._began = set()  # voters that acknowledged this leader's BeginQuorumEpoch
        self._task = None
        self.bytes_since_snapshot = 0
        self._delete_before = None  # a snapshot's offset, to become the log start once committed
        self.caught_up = asyncio.Event()  # applied what the leader had committed, once
        self._abandoned = None  # an observer's (epoch, leader) not heard from: not that again

    # -- lifecycle -------------------------------------------------------------------------
    @property
    def is_voter(self):
        return self.node_id in self.voters

    @property
    def epoch(self):
        return self.state.epoch

    @property
    def leader_id(self):
        return self.state.leader_id

    @property
    def is_leader(self):
        return self.role == LEADER

    @property
    def high_watermark(self):
        return self.partition.high_watermark

    def start(self):
        self._task = asyncio.create_task(self._run())
        return self

    async def stop(self):
        """Stop; a leader first tells the other voters (EndQuorumEpoch) so they elect at once."""
        self._stopping = True
        if self.role == LEADER and len(self.voters) > 1:
            await asyncio.wait([asyncio.ensure_future(self._send_end_epoch(v))
                                for v in self.voters if v != self.node_id], timeout=1.0)
        if self._task:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self):
        while not self._stopping:
            try:
                if self.role == LEADER:
                    await self._lead_once()
                elif self.role == CANDIDATE or (self.is_voter and self._leader_lost()):
                    await self._campaign()
                elif not self.is_voter and (self.state.leader_id is None or self._leader_lost()):
                    await self._discover_leader()
                elif self.state.leader_id is not None:
                    await self._fetch_once()
                else:
                    await asyncio.sleep(0.05)
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - the quorum must outlive any single bug
                log.exception("raft node %d: unexpected error", self.node_id)
                await asyncio.sleep(0.5)

    def _leader_lost(self):
        timeout = self.fetch_timeout if self.state.leader_id is not None else self.election_timeout
        return time.monotonic() - self._last_contact > timeout

    # -- transitions -------------------------------------------------------------------------
    def _set_partition_role(self, leading):
        p = self.partition
        p.leader_epoch, p.leader_id, p.is_leader = self.epoch, self.state.leader_id, leading
        if leading:
            p.followers = FollowerTracker([v for v in self.voters if v != self.node_id],
                                          p.log_end_offset)
            p.hw_rule = self._majority_offset
        else:
            p.followers = p.hw_rule = None

    def _save(self, state):
        state.save(self.dir)
        self.state = state

    def become_follower(self, epoch, leader_id):
        """Enter `epoch` (a newer one, or the current one with its leader now known)."""
        was_leader = self.role == LEADER
        if epoch > self.epoch:
            self._save(QuorumState(epoch, None, leader_id))
        elif leader_id != self.state.leader_id:
            self._save(QuorumState(epoch, self.state.voted_for, leader_id))
        self.role = FOLLOWER
        self._set_partition_role(False)
        self._last_contact = time.monotonic()
        if was_leader:
            log.info("raft node %d: no longer leader (epoch %d, leader %s)", self.node_id,
                     epoch, leader_id)
            if self.applied > self.high_watermark:  # our uncommitted tail may not survive
                self._replay_from_start()
            self._on_role_change(False)

    def _become_leader(self):
        self.role = LEADER
        self._save(QuorumState(self.epoch, self.node_id, self.node_id))
        self._set_partition_role(True)
        self._began = {self.node_id}
        # Our whole log commits with the first record of our epoch; until then it is ours only.
        self.epoch_start = self.log.log_end_offset
        self.append([records.leader_change_record(self.node_id, self.epoch)])
        log.info("raft node %d: leader of epoch %d", self.node_id, self.epoch)
        self._on_role_change(True)

    def _majority_offset(self, p):
        offsets = sorted([p.log_end_offset] + [p.followers.end_offset(v) for v in self.voters
                                               if v != self.node_id], reverse=True)
        candidate = offsets[len(self.voters) // 2]
        return candidate if candidate > self.epoch_start else p.high_watermark

    # -- elections ----------------------------------------------------------------------------
    async def _campaign(self):
        await asyncio.sleep(random.uniform(0, self.election_timeout / 2))
        if self.role == FOLLOWER and not self._leader_lost():
            return  # someone else won meanwhile
        if not await self._ballot(pre_vote=True):
            return
        self.role = CANDIDATE
        self._save(QuorumState(self.epoch + 1, self.node_id, None))
        self._set_partition_role(False)
        log.info("raft node %d: candidate in epoch %d", self.node_id, self.epoch)
        if await self._ballot(pre_vote=False) and self.role == CANDIDATE:
            self._become_leader()

    async def _ballot(self, pre_vote):
        """Ask every other voter for its vote in our epoch (a pre-vote: whether it would vote
        for us in the next one, nothing persisted anywhere); whether a majority granted it. A
        lost ballot waits out its randomized deadline, so that split votes do not repeat in
        lockstep.

        A lost pre-vote still counts as won when a voter answered from an older epoch than
        ours: having entered a newer epoch (then lost touch), we can never follow that
        epoch's leader, and only an election moves the quorum past it."""
        epoch, role = self.epoch, self.role
        granted, behind = {self.node_id}, False
        tasks = {asyncio.ensure_future(self._request_vote(v, epoch, pre_vote)): v
                 for v in self.voters if v != self.node_id}
        deadline = time.monotonic() + self.election_timeout * random.uniform(1, 2)
        try:
            while len(granted) * 2 <= len(self.voters) and tasks:
                done, _ = await asyncio.wait(tasks, timeout=max(0, deadline - time.monotonic()),
                                             return_when=asyncio.FIRST_COMPLETED)
                if not done or self.role != role or self.epoch != epoch:
                    break
                for t in done:
                    voter = tasks.pop(t)
                    yes, their_epoch = t.result()
                    if yes:
                        granted.add(voter)
                    behind |= 0 <= their_epoch < epoch
        finally:
            for t in tasks:
                t.cancel()
        still = self.role == role and self.epoch == epoch  # no leader or epoch learnt meanwhile
        won = still and (len(granted) * 2 > len(self.voters) or (pre_vote and behind))
        if not won and still and (role == CANDIDATE or self._leader_lost()):
            await asyncio.sleep(max(0, deadline - time.monotonic()))
        return won

    async def _request_vote(self, voter, epoch, pre_vote=False):
        """(whether the voter granted its vote or pre-vote, its epoch; -1 without an answer)."""
        body = _VOTE.cls(cluster_id=self.cluster_id, voter_id=voter, topics=[_VOTE.make(
            "topics", topic_name=METADATA_TOPIC, partitions=[_VOTE.make(
                "topics", "partitions", partition_index=0, candidate_epoch=epoch,
                candidate_id=self.node_id, candidate_directory_id=ZERO_UUID,
                voter_directory_id=ZERO_UUID,
                last_offset_epoch=self.partition.epoch_cache.latest_epoch,
                last_offset=self.log.log_end_offset, pre_vote=pre_vote)])])
        try:
            resp = await self.peers.send(self.voters[voter], ApiKey.VOTE, body,
                                         timeout=self.election_timeout, purpose="vote")
        except (KafkaError, KafkaConnectionError, OSError):
            return False, -1
        if resp.error_code or not resp.topics:
            return False, -1
        p = resp.topics[0].partitions[0]
        if pre_vote and p.vote_granted:
            return True, p.leader_epoch
        if p.leader_epoch > self.epoch or (p.leader_epoch == self.epoch and p.leader_id >= 0
                                           and p.leader_id != self.node_id):
            # A newer epoch, or ours already has a leader (a node back from a restart campaigns
            # without knowing it): follow it, rather than campaign again in a higher epoch and
            # depose a working leader, as KRaft's candidates do.
            self.become_follower(p.leader_epoch, p.leader_id if p.leader_id >= 0 else None)
            return False, p.leader_epoch
        return bool(p.vote_granted), p.leader_epoch

    def handle_vote(self, epoch, candidate, last_epoch, last_offset, pre_vote=False):
        """Whether to grant a Vote request (the answer carries our epoch and leader).

        A pre-vote changes nothing here: it is granted to a log at least as up to date as ours
        unless, in the same epoch, we lead or follow a leader we heard from within the fetch
        timeout. A candidate already in a newer epoch (it entered one, then lost touch) can
        never follow our leader again: it gets the pre-vote, and its election moves everyone on.
        """
        if candidate not in self.voters or epoch < self.epoch:
            return False
        if pre_vote:
            if epoch == self.epoch and (self.role == LEADER or (
                    self.state.leader_id is not None and not self._leader_lost())):
                return False
            mine = (self.partition.epoch_cache.latest_epoch, self.log.log_end_offset)
            return (last_epoch, last_offset) >= mine
        if epoch > self.epoch:
            self.become_follower(epoch, None)
        if self.role == LEADER or self.state.leader_id not in (None, candidate) or \
                self.state.voted_for not in (None, candidate):
            return False
        mine = (self.partition.epoch_cache.latest_epoch, self.log.log_end_offset)
        if (last_epoch, last_offset) < mine:
            return False
        self._save(QuorumState(epoch, candidate, None))
        self._last_contact = time.monotonic()
        return True

    def handle_begin_epoch(self, epoch, leader_id):
        """0, or FENCED_LEADER_EPOCH for an announcement from an older epoch."""
        if epoch < self.epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        if leader_id != self.node_id and (epoch > self.epoch or self.state.leader_id != leader_id
                                          or self.role != FOLLOWER):
            self.become_follower(epoch, leader_id)
        return 0

    def handle_end_epoch(self, epoch, leader_id):
        """The leader of `epoch` resigned: elect a successor now instead of timing out."""
        if epoch == self.epoch and self.state.leader_id == leader_id and leader_id != self.node_id:
            self._last_contact = 0
        return 0

    async def _send_end_epoch(self, voter):
        body = _END.cls(cluster_id=self.cluster_id, topics=[_END.make(
            "topics", topic_name=METADATA_TOPIC, partitions=[_END.make(
                "topics", "partitions", partition_index=0, leader_id=self.node_id,
                leader_epoch=self.epoch, preferred_successors=[])])])
        try:
            await self.peers.send(self.voters[voter], ApiKey.END_QUORUM_EPOCH, body, timeout=1.0,
                                  purpose="vote")
        except (KafkaError, KafkaConnectionError, OSError):
            pass

    # -- leading --------------------------------------------------------------------------------
    def append(self, recs):
        """Append records (dicts) as one batch; returns the last offset. They are applied, here
        as everywhere, once committed."""
        if self.role != LEADER:
            raise NotLeader(f"node {self.node_id} is not the metadata quorum leader")
        data = encode_batch([(None, None, records.encode(r), ()) for r in recs])
        (_, header), = split_batches(data)
        result = self.partition.append_as_leader([(data, header)])
        self.bytes_since_snapshot += len(data)
        return result.last_offset

    def uncommitted(self):
        """The records this node's log holds beyond what it applied: [(offset, record)]."""
        return list(self._records(self.applied, self.log.log_end_offset))

    async def wait_committed(self, offset, timeout):
        """Whether `offset` is committed within `timeout` seconds (False if leadership is lost)."""
        deadline = time.monotonic() + timeout
        while self.partition.high_watermark <= offset:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self.role != LEADER:
                return False
            await wait_for_any([self.partition], min(remaining, 0.1))
        self._apply_committed()  # whoever is told "committed" reads it in the image at once
        return True

    async def _lead_once(self):
        await wait_for_any([self.partition], 0.2)
        if self.role != LEADER:
            return
        self._apply_committed()
        followers = self.partition.followers.state
        if not self.majority_heard():
            log.warning("raft node %d: no majority fetched in epoch %d; resigning",
                        self.node_id, self.epoch)
            self.become_follower(self.epoch, None)
            self._last_contact = 0
            return
        for v in self.voters:
            if v not in self._began and (v not in followers or followers[v][0] < 0):
                asyncio.ensure_future(self._send_begin_epoch(v))

    def majority_heard(self):
        """Leading, and a majority of voters fetched lately: a leader that was paused or cut off
        must not act on its old view (it resigns at its next check)."""
        if self.role != LEADER:
            return False
        t = now_ms()
        heard = 1 + sum(1 for v, st in self.partition.followers.state.items()
                        if v in self.voters and t - st[3] < self.fetch_timeout * 1000)
        return heard * 2 > len(self.voters)

    async def _send_begin_epoch(self, voter):
        body = _BEGIN.cls(cluster_id=self.cluster_id, topics=[_BEGIN.make(
            "topics", topic_name=METADATA_TOPIC, partitions=[_BEGIN.make(
                "topics", "partitions", partition_index=0, leader_id=self.node_id,
                leader_epoch=self.epoch)])])
        epoch = self.epoch
        try:
            resp = await self.peers.send(self.voters[voter], ApiKey.BEGIN_QUORUM_EPOCH, body,
                                         timeout=1.0, purpose="vote")
        except (KafkaError, KafkaConnectionError, OSError):
            return
        if not resp.error_code and self.epoch == epoch:
            self._began.add(voter)

    # -- following ------------------------------------------------------------------------------
    async def _discover_leader(self):
        """An observer (a broker that is not a voter) with no leader, or none heard from lately:
        it fetches from a voter picked at random, which answers with the leader it knows (or,
        being the leader, with records), as KRaft's observers find the quorum."""
        if self.state.leader_id is not None:  # not heard from: forget it, ask around
            self._abandoned = (self.epoch, self.state.leader_id)
            self.become_follower(self.epoch, None)
        await self._fetch_once(random.choice(sorted(self.voters)))
        if self.state.leader_id is None or self._leader_lost():
            await asyncio.sleep(0.1)

    async def _fetch_once(self, asked=None):
        """Fetch from the leader, or (`asked`) from a voter that may be it."""
        leader = self.state.leader_id if asked is None else asked
        address = self.voters.get(leader)
        if address is None:
            await asyncio.sleep(0.1)
            return
        body = _FETCH.cls(replica_id=self.node_id, max_wait_ms=500, min_bytes=1,
                          max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=-1,
                          topics=[_FETCH.make("topics", topic=METADATA_TOPIC, partitions=[
                              _FETCH.make("topics", "partitions", partition=0,
                                          current_leader_epoch=self.epoch,
                                          fetch_offset=self.log.log_end_offset,
                                          last_fetched_epoch=self.partition.epoch_cache.latest_epoch,
                                          log_start_offset=-1, partition_max_bytes=1 << 20)])],
                          forgotten_topics_data=[], rack_id="")
        try:
            resp = await self.peers.send(address, ApiKey.FETCH, body, FETCH_VERSION,
                                         timeout=self.fetch_timeout, purpose="raft")
        except (KafkaError, KafkaConnectionError, OSError) as e:
            if getattr(e, "refused", False):
                self._on_refused(leader)
            if asked is None and getattr(e, "refused", False) and self.is_voter:
                # Nothing listens where the leader was: its process is gone, and waiting out
                # the fetch timeout would only delay the election (Raft's safety does not
                # rest on timing; a needless election costs one epoch).
                self._last_contact = min(self._last_contact,
                                         time.monotonic() - self.fetch_timeout)
            await asyncio.sleep(0.1)
            return
        if self.role != FOLLOWER or not resp.responses or \
                self.state.leader_id not in (leader, None if asked else leader):
            return
        p = resp.responses[0].partitions[0]
        current = p.current_leader
        if current is not None and (current.leader_epoch > self.epoch or (
                asked is not None and current.leader_epoch == self.epoch and current.leader_id
                >= 0 and (current.leader_epoch, current.leader_id) != self._abandoned)):
            self.become_follower(current.leader_epoch,
                                 current.leader_id if current.leader_id >= 0 else None)
            return
        if asked is not None and not p.error_code and self.state.leader_id != asked:
            self.become_follower(self.epoch, asked)  # the voter asked leads this epoch
        if p.error_code == ErrorCode.OFFSET_OUT_OF_RANGE and \
                self.log.log_end_offset < p.log_start_offset:
            self._start_over_at(p.log_start_offset)
            return
        if p.error_code:
            if p.error_code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH):
                await asyncio.sleep(0.1)
            else:
                await asyncio.sleep(0.2)
            return
        self._last_contact = time.monotonic()
        if p.diverging_epoch is not None:
            self.partition.truncate_for_divergence(p.diverging_epoch.epoch,
                                                   p.diverging_epoch.end_offset)
            if self.applied > self.log.log_end_offset:
                self._replay_from_start()
            return
        if p.records:
            self.partition.append_as_follower(p.records)
        self.partition.follower_high_watermark(p.high_watermark)
        self._apply_range(self.high_watermark)
        if self.applied >= p.high_watermark:
            self.caught_up.set()

    # -- applying ---------------------------------------------------------------------------------
    def delete_before_when_committed(self, offset):
        """A snapshot at `offset` was applied: the log before it may go once it is committed."""
        self._delete_before = offset
        self._maybe_delete_prefix()

    def _maybe_delete_prefix(self):
        target = self._delete_before
        if target is not None and self.high_watermark > target and \
                target > self.log.log_start_offset:
            self.log.delete_records_before(target)
            self._delete_before = None

    def _start_over_at(self, offset):
        """Our log ends before the leader's starts: take the leader's, snapshot first."""
        log.info("raft node %d: restarting the metadata log at %d", self.node_id, offset)
        self.log.truncate_fully_and_start_at(offset)
        self.partition.epoch_cache.clear()
        self.partition.high_watermark = offset
        self._reset()
        self.applied = offset

    def _apply_committed(self):
        self._apply_range(self.high_watermark)
        if self.role == LEADER and self.applied > self.epoch_start:
            self.caught_up.set()  # our first record committed: the image holds all before it

    def _records(self, start, end):
        """(offset, record) for the metadata log's records in [start, end)."""
        while start < end:
            data = self.log.read(start, 1 << 20, upper_bound=end)
            if not data:
                return
            for rec in decode_batches(data, start_offset=start):
                if rec.offset < end:
                    yield rec.offset, records.decode(rec.value)
            start = next_offset_after(data)

    def _apply_range(self, end):
        """Hand committed records [applied, end) to `apply`, in order."""
        self._maybe_delete_prefix()
        for offset, rec in self._records(self.applied, min(end, self.high_watermark)):
            self._apply(offset, rec)
            self.applied = offset + 1

    def _replay_from_start(self):
        log.info("raft node %d: replaying the metadata log", self.node_id)
        self._reset()
        self.applied = self.log.log_start_offset
        self._apply_range(self.high_watermark)
