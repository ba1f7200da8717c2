"""The leader's side of the Raft core, in process (`raftsim.py`): every request that acts on a
view of who leads carries its epoch and is checked against the receiver's, a leader no
majority fetched from within the fetch timeout resigns, the high watermark counts a majority
only once it holds the start of the leader's own epoch, and a leader's EndQuorumEpoch has the
others elect its successor at once."""
import random

import pytest
from raftsim import Listener, MemoryLog, MemoryStore, Sim

from minilog.broker.raft.epoch_state import LeaderState
from minilog.broker.raft.messages import (
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    FetchRequest,
    VoteRequest,
    VoteResponse,
)
from minilog.broker.raft.quorum_state import QuorumState
from minilog.broker.raft.raft_client import RaftClient
from minilog.connector.protocol import ErrorCode

SEEDS = [7, 29, 61]


def _settled(seed):
    """A three-voter quorum that elected a leader and committed a record everywhere; the
    simulation is not stepped again, so each test's message is the only thing that happens."""
    sim = Sim(voters=3, seed=seed)
    assert sim.run(30, until=sim.agreed), f"seed {seed}: no leader"
    offset = sim.append("settled")
    assert sim.run(30, until=lambda: sim.committed_everywhere(offset)), f"seed {seed}"
    return sim


# (who receives it, the request, its epoch against the receiver's, the error it is answered
#  with, whom the receiver follows afterwards). The sender is a follower for the leader, the
#  third voter for a follower.
FENCING = [
    ("leader", "Fetch", 0, 0, "its leader"),
    ("leader", "Fetch", -1, ErrorCode.FENCED_LEADER_EPOCH, "its leader"),
    ("leader", "Fetch", +1, ErrorCode.UNKNOWN_LEADER_EPOCH, "its leader"),
    ("follower", "Fetch", 0, ErrorCode.NOT_LEADER_OR_FOLLOWER, "its leader"),
    # a deposed leader's BeginQuorumEpoch, late: refused and ignored
    ("follower", "BeginQuorumEpoch", -1, ErrorCode.FENCED_LEADER_EPOCH, "its leader"),
    ("follower", "BeginQuorumEpoch", +1, 0, "the sender"),  # a newer epoch's leader
]


@pytest.mark.parametrize("receiver, kind, delta, error, follows", FENCING)
@pytest.mark.parametrize("seed", SEEDS[:2])
def test_a_request_is_checked_against_the_receivers_epoch(receiver, kind, delta, error, follows,
                                                          seed):
    sim = _settled(seed)
    epoch, leader = sim.agreed()
    follower, other = sorted(n for n in sim.nodes if n != leader)
    to, sender = (leader, follower) if receiver == "leader" else (follower, other)
    if kind == "Fetch":
        log = sim.nodes[sender].log
        request = FetchRequest(sender, to, epoch + delta, log.end_offset, log.latest_epoch)
    else:
        request = BeginQuorumEpochRequest(sender, to, sender, epoch + delta)
    core = sim.nodes[to].core
    (answer,) = core.handle(request, sim.now)
    assert answer.error_code == error, (f"seed {seed}: {request} answered "
                                        f"{ErrorCode(answer.error_code).name}")
    expected = (epoch, leader) if follows == "its leader" else (epoch + delta, sender)
    assert (core.epoch, core.leader_id) == expected, f"seed {seed}"


@pytest.mark.parametrize("seed", SEEDS)
def test_a_leader_no_majority_fetches_from_resigns_within_the_fetch_timeout(seed):
    """Kafka's check-quorum: a leader cut off from the other voters stops leading (it cannot
    commit, and a successor may already lead a newer epoch) instead of answering as leader."""
    sim = _settled(seed)
    epoch, leader = sim.agreed()
    sim.isolate(leader)
    old = sim.nodes[leader].core
    assert sim.run(2 * sim.fetch_timeout, until=lambda: not old.is_leader), \
        f"seed {seed}: node {leader}, cut off, still leads epoch {epoch}"
    assert not old.majority_heard(sim.now)


@pytest.mark.parametrize("seed", SEEDS)
def test_a_leaders_end_quorum_epoch_has_the_others_elect_at_once(seed):
    """A leader stopping sends EndQuorumEpoch (`resign`): its followers campaign without
    waiting out the fetch timeout."""
    sim = _settled(seed)
    epoch, leader = sim.agreed()
    ends = sim.nodes[leader].core.resign()
    assert sorted(r.destination for r in ends) == sorted(n for n in sim.nodes if n != leader)
    sim.crash(leader)
    for request in ends:
        sim.nodes[request.destination].core.handle(request, sim.now)
    assert sim.run(sim.fetch_timeout * 0.9,
                   until=lambda: sim.agreed() is not None and sim.agreed()[0] > epoch), \
        f"seed {seed}: no successor of node {leader} before the fetch timeout"


@pytest.mark.parametrize("seed", SEEDS)
def test_an_end_quorum_epoch_of_an_older_epoch_changes_nothing(seed):
    """A late EndQuorumEpoch, from an epoch the same node led before: the follower keeps
    following, and campaigns only once its leader goes silent."""
    sim = _settled(seed)
    epoch, leader = sim.agreed()
    follower = next(n for n in sim.nodes if n != leader)
    core = sim.nodes[follower].core
    core.handle(EndQuorumEpochRequest(leader, follower, leader, epoch - 1), sim.now)
    for later in (0.1, sim.election_timeout):  # the first poll of a campaign schedules it
        assert core.poll(sim.now + later) == [], \
            f"seed {seed}: a stale EndQuorumEpoch made node {follower} campaign"


def _elected(core, now):
    """Drive `core` through a pre-vote and a vote that every other voter grants."""
    pending = []
    while not pending:
        now += 0.1
        pending = core.poll(now)
    while not core.is_leader:
        assert pending, core.state
        request = pending.pop(0)
        if isinstance(request, VoteRequest):
            pending += core.handle(VoteResponse(request, 0, -1, request.candidate_epoch, True),
                                   now)
    return now


def test_the_high_watermark_counts_a_majority_only_from_the_leaders_own_epoch():
    """Raft's rule for entries of older epochs (its Figure 8): a majority holding them does
    not commit them, since a later leader may still overwrite them; they commit with the
    first record of the leader's own epoch (its leader-change record) once a majority has it."""
    log = MemoryLog([(1, "a"), (2, "uncommitted")])
    core = RaftClient(1, (1, 2, 3), log, MemoryStore(QuorumState(2, None, None)), Listener(),
                      now=0.0, rng=random.Random(1))
    now = _elected(core, 1.0)
    state = core.state
    assert isinstance(state, LeaderState) and state.epoch_start_offset == 2, state
    committed = core.high_watermark
    assert committed <= 1, "the log of older epochs committed before anyone fetched"
    core.handle(FetchRequest(2, 1, state.epoch, 2, 2), now)  # has both, not the leader change
    assert core.high_watermark == committed, \
        "a majority holding only older epochs' records committed them"
    core.handle(FetchRequest(2, 1, state.epoch, 3, state.epoch), now)
    assert core.high_watermark == 3, "the leader's own first record held by a majority"
