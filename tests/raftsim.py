"""A simulated quorum for the Raft core's in-process tests: several `RaftClient`s, an in-memory
log and quorum-state store each, one simulated clock, and a network that delays, drops and
partitions messages. No processes, no sockets, no asyncio: a run is a loop of ticks, and the
same seed gives the same run (failure messages print it).

Invariants checked at every tick, whatever the test: at most one leader per epoch over the
whole run, and no voter granting its vote to two candidates in one epoch.
"""
import heapq
import json
import random
from dataclasses import dataclass, field

from minilog.broker.raft.epoch_state import LeaderState
from minilog.broker.raft.messages import RequestFailed, VoteResponse
from minilog.broker.raft.quorum_state import QuorumState
from minilog.broker.raft.raft_client import RaftClient


class MemoryLog:
    """`RaftLog` in memory: one entry (offset, epoch, value) per record, and where each epoch
    started, as the leader epoch cache keeps it."""

    def __init__(self, entries=(), start_offset=0):
        """`entries`: [(epoch, value)] from `start_offset`."""
        self.start_offset = start_offset
        self.entries, self.epochs = [], []
        for epoch, value in entries:
            self._add(epoch, value)
        self.truncations = []  # offsets a divergence truncated to
        self.started_over = []

    def _add(self, epoch, value):
        if not self.epochs or self.epochs[-1][0] != epoch:
            self.epochs.append((epoch, self.end_offset))
        self.entries.append((self.end_offset, epoch, value))

    @property
    def end_offset(self):
        return self.entries[-1][0] + 1 if self.entries else self.start_offset

    @property
    def latest_epoch(self):
        return self.epochs[-1][0] if self.epochs else -1

    def end_offset_for_epoch(self, epoch):
        if epoch < 0 or not self.epochs:
            return -1, -1
        if epoch == self.latest_epoch:
            return epoch, self.end_offset
        after = next((i for i, (e, _) in enumerate(self.epochs) if e > epoch), None)
        if after is None:
            return -1, -1
        if after == 0:
            return epoch, self.epochs[0][1]
        return self.epochs[after - 1][0], self.epochs[after][1]

    def append_as_leader(self, records, epoch):
        for r in records:
            self._add(epoch, r)
        return self.end_offset - 1

    def append_leader_change(self, leader_id, epoch):
        return self.append_as_leader([{"leader": leader_id}], epoch)

    def append_as_follower(self, data):
        for offset, epoch, value in json.loads(data):
            assert offset == self.end_offset, f"gap: {offset} after {self.end_offset}"
            self._add(epoch, value)

    def read(self, offset, max_bytes):
        return json.dumps([e for e in self.entries if e[0] >= offset]).encode()

    def truncate_to(self, offset):
        self.truncations.append(offset)
        self.entries = [e for e in self.entries if e[0] < offset]
        self.epochs = [(e, o) for e, o in self.epochs if o < offset]

    def truncate_fully_and_start_at(self, offset):
        self.started_over.append(offset)
        self.entries, self.epochs, self.start_offset = [], [], offset

    def delete_before(self, offset):
        """A snapshot at `offset` made the log before it unnecessary."""
        self.entries = [e for e in self.entries if e[0] >= offset]
        self.start_offset = offset

    def values(self, start=None):
        return [(o, e, v) for o, e, v in self.entries if start is None or o >= start]


class MemoryStore:
    def __init__(self, state=None):
        self.state = state or QuorumState()
        self.saves = 0

    def load(self):
        return QuorumState(self.state.epoch, self.state.voted_for, self.state.leader_id)

    def save(self, state):
        self.state = QuorumState(state.epoch, state.voted_for, state.leader_id)
        self.saves += 1


class Listener:
    def __init__(self):
        self.events = []

    def on_leadership(self, leading):
        self.events.append(("leading", leading))

    def on_truncated(self):
        self.events.append(("truncated",))

    def on_start_over(self, offset):
        self.events.append(("start_over", offset))


@dataclass
class Node:
    log: MemoryLog
    store: MemoryStore
    listener: Listener = field(default_factory=Listener)
    core: RaftClient = None
    up: bool = True


class Sim:
    def __init__(self, voters=3, observers=0, seed=0, election_timeout=1.0, fetch_timeout=2.0,
                 latency=0.005, drop=0.0, logs=None, states=None):
        """`logs`, `states`: node id -> the MemoryLog / QuorumState it starts with."""
        self.seed, self.rng = seed, random.Random(seed)
        self.now, self.latency, self.drop = 0.0, latency, drop
        self.election_timeout, self.fetch_timeout = election_timeout, fetch_timeout
        self.voter_ids = list(range(1, voters + 1))
        ids = self.voter_ids + list(range(voters + 1, voters + observers + 1))
        logs, states = logs or {}, states or {}
        self.nodes = {}
        for n in ids:
            self.nodes[n] = Node(logs.get(n) or MemoryLog(), MemoryStore(states.get(n)))
            self._start(n)
        self.queue, self.seq = [], 0
        self.blocked = set()  # (from, to) pairs whose messages are lost
        self.leaders_by_epoch = {}  # epoch -> node ids that led it
        self.votes = {}  # (voter, epoch) -> candidates granted

    def _start(self, n):
        node = self.nodes[n]
        node.core = RaftClient(n, self.voter_ids, node.log, node.store, node.listener,
                               now=self.now, election_timeout=self.election_timeout,
                               fetch_timeout=self.fetch_timeout,
                               rng=random.Random(self.rng.random()))
        node.up = True

    def crash(self, n):
        self.nodes[n].up = False

    def restart(self, n, state=None):
        """Start node `n` again from its log and store (`state`: what its store says now)."""
        if state is not None:
            self.nodes[n].store.state = state
        self._start(n)

    def isolate(self, n):
        for m in self.nodes:
            if m != n:
                self.blocked |= {(n, m), (m, n)}

    def cut(self, a, b):
        self.blocked |= {(a, b), (b, a)}

    def heal(self):
        self.blocked.clear()

    # -- the network ----------------------------------------------------------------------------
    def _send(self, message, to):
        sender = message.request.destination if hasattr(message, "request") else message.source
        if (sender, to) in self.blocked or (self.drop and self.rng.random() < self.drop):
            return
        self.seq += 1
        heapq.heappush(self.queue, (self.now + self.latency * (1 + self.rng.random()),
                                    self.seq, message, to))

    def _route(self, n, messages):
        for m in messages:
            if hasattr(m, "request") and not isinstance(m, RequestFailed):
                self._record(m)
                self._send(m, m.request.source)
            elif not self.nodes[m.destination].up:
                self.seq += 1  # refused: nothing listens there
                heapq.heappush(self.queue, (self.now + self.latency, self.seq,
                                            RequestFailed(m, refused=True), n))
            else:
                self._send(m, m.destination)

    def _record(self, response):
        if isinstance(response, VoteResponse) and response.vote_granted and \
                not response.request.pre_vote:
            r = response.request
            granted = self.votes.setdefault((r.destination, r.candidate_epoch), set())
            granted.add(r.candidate_id)
            assert len(granted) == 1, (f"seed {self.seed}: voter {r.destination} voted for "
                                       f"{granted} in epoch {r.candidate_epoch}")

    def step(self, tick=0.01):
        self.now += tick
        while self.queue and self.queue[0][0] <= self.now:
            _, _, message, to = heapq.heappop(self.queue)
            if self.nodes[to].up:
                self._route(to, self.nodes[to].core.handle(message, self.now))
        for n, node in self.nodes.items():
            if node.up:
                self._route(n, node.core.poll(self.now))
        for n, node in self.nodes.items():
            s = node.core.state
            if node.up and isinstance(s, LeaderState):
                leaders = self.leaders_by_epoch.setdefault(s.epoch, set())
                leaders.add(n)
                assert len(leaders) == 1, f"seed {self.seed}: epoch {s.epoch} led by {leaders}"

    def run(self, seconds, until=None, tick=0.01):
        """Run for `seconds` of simulated time, or until `until()` holds; whether it held."""
        end = self.now + seconds
        while self.now < end:
            self.step(tick)
            if until is not None and until():
                return True
        return until is None

    # -- views ----------------------------------------------------------------------------------
    def leader(self):
        """The one node leading now among those up, or None."""
        leading = [n for n, node in self.nodes.items()
                   if node.up and isinstance(node.core.state, LeaderState)]
        return leading[0] if len(leading) == 1 else None

    def agreed(self, nodes=None):
        """(epoch, leader) every given node (default: every node up) follows, or None."""
        nodes = nodes or [n for n, node in self.nodes.items() if node.up]
        views = {(self.nodes[n].core.epoch, self.nodes[n].core.leader_id) for n in nodes}
        if len(views) != 1:
            return None
        view = views.pop()
        return view if view[1] is not None else None

    def committed_everywhere(self, offset):
        return all(node.core.high_watermark > offset for node in self.nodes.values() if node.up)

    def append(self, *values):
        """Append through the leader; the last offset."""
        return self.nodes[self.leader()].core.append(list(values))
