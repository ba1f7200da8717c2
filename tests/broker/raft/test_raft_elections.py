"""Elections of the Raft core, in process (`raftsim.py`): one leader per epoch, one vote per
voter and epoch (kept across restarts), votes only for logs at least as up to date, pre-vote
keeping a rejoining voter from deposing a working leader, and the stranded-voter rule.

Every simulated run also checks, at each tick, that no epoch has two leaders and no voter
granted two candidates in one epoch (see `Sim.step`)."""
import pytest
from raftsim import MemoryLog, MemoryStore, Sim

from minilog.broker.raft.messages import VoteRequest
from minilog.broker.raft.quorum_state import QuorumState
from minilog.broker.raft.raft_client import RaftClient
from raftsim import Listener

SEEDS = [11, 23, 47]


@pytest.mark.parametrize("voters, drop", [(1, 0.0), (3, 0.0), (5, 0.0), (3, 0.2), (5, 0.3)])
@pytest.mark.parametrize("seed", SEEDS)
def test_the_voters_elect_one_leader_and_commit_through_it(voters, drop, seed):
    sim = Sim(voters=voters, seed=seed, drop=drop)
    assert sim.run(60, until=sim.agreed), f"seed {seed}: no leader agreed on"
    offset = sim.append("a", "b")
    assert sim.run(60, until=lambda: sim.committed_everywhere(offset)), \
        f"seed {seed}: offset {offset} not committed everywhere"


@pytest.mark.parametrize("seed", SEEDS)
def test_a_quorum_that_loses_its_leader_elects_a_successor_that_the_old_one_follows(seed):
    sim = Sim(voters=3, seed=seed)
    assert sim.run(30, until=sim.agreed)
    epoch, leader = sim.agreed()
    sim.crash(leader)
    assert sim.run(30, until=lambda: sim.agreed() and sim.agreed()[1] != leader), \
        f"seed {seed}: no successor of node {leader}"
    new_epoch, successor = sim.agreed()
    assert new_epoch > epoch
    sim.restart(leader)
    assert sim.run(30, until=lambda: sim.agreed() == (new_epoch, successor)), \
        f"seed {seed}: node {leader} did not follow node {successor} after its restart"


def _voter(entries=(), state=None, node_id=1, voters=(1, 2, 3, 4)):
    store = MemoryStore(state)
    return RaftClient(node_id, voters, MemoryLog(entries), store, Listener(), now=0.0), store


def _vote(candidate, epoch, last_epoch=0, last_offset=0, pre_vote=False):
    return VoteRequest(candidate, 1, epoch, candidate, last_epoch, last_offset, pre_vote)


def _granted(core, request, now=0.0):
    (response,) = core.handle(request, now)
    return response.vote_granted


def test_a_voter_grants_one_vote_per_epoch_and_remembers_it_across_a_restart():
    core, store = _voter()
    assert _granted(core, _vote(2, 5))
    assert not _granted(core, _vote(3, 5)), "a second candidate got a vote in epoch 5"
    assert _granted(core, _vote(2, 5)), "the same candidate asking again is granted again"
    restarted = RaftClient(1, (1, 2, 3, 4), MemoryLog(), store, Listener(), now=0.0)
    assert not _granted(restarted, _vote(3, 5)), "a restart forgot the vote of epoch 5"
    assert _granted(restarted, _vote(3, 6))
    assert store.state == QuorumState(6, 3, None)


# (the voter's log as [(epoch, value)], the candidate's last epoch and log end, granted)
UP_TO_DATE = [
    ([], 0, 0, True),
    ([(1, "a"), (1, "b")], 1, 2, True),    # the same log
    ([(1, "a"), (1, "b")], 1, 3, True),    # longer in the same epoch
    ([(1, "a"), (1, "b")], 1, 1, False),   # shorter in the same epoch
    ([(1, "a"), (1, "b")], 2, 1, True),    # a newer last epoch wins over length
    ([(1, "a"), (2, "b")], 1, 5, False),   # an older last epoch loses whatever its length
]


@pytest.mark.parametrize("pre_vote", [False, True])
@pytest.mark.parametrize("entries, last_epoch, last_offset, granted", UP_TO_DATE)
def test_votes_go_only_to_logs_at_least_as_up_to_date(entries, last_epoch, last_offset,
                                                      granted, pre_vote):
    core, _ = _voter(entries, QuorumState(3, None, None))
    assert _granted(core, _vote(2, 4, last_epoch, last_offset, pre_vote)) is granted


# (what the voter knows in epoch 3, the candidate's epoch, seconds since it heard from its
#  leader, whether it grants a pre-vote)
PRE_VOTE = [
    (QuorumState(3, None, 2), 3, 0.5, False),  # its leader is alive
    (QuorumState(3, None, 2), 3, 5.0, True),   # its leader went silent past the fetch timeout
    (QuorumState(3, None, None), 3, 0.5, True),  # no leader known
    (QuorumState(3, None, 2), 4, 0.5, True),   # the candidate is stranded in a newer epoch
    (QuorumState(3, None, 2), 2, 5.0, False),  # an older epoch never gets anything
]


@pytest.mark.parametrize("state, epoch, silence, granted", PRE_VOTE)
def test_a_pre_vote_is_refused_while_the_leader_is_heard_from(state, epoch, silence, granted):
    core, store = _voter(state=state)
    assert _granted(core, _vote(4, epoch, pre_vote=True), now=silence) is granted
    assert store.saves == 0, "a pre-vote changed the persisted election state"


# (how the rejoining voter was cut off: isolated, or from the leader only)
@pytest.mark.parametrize("cut", ["isolated", "from the leader"])
@pytest.mark.parametrize("seed", SEEDS)
def test_a_voter_rejoining_after_a_partition_does_not_depose_the_leader(cut, seed):
    sim = Sim(voters=3, seed=seed)
    assert sim.run(30, until=sim.agreed)
    before = sim.agreed()
    offset = sim.append("settled")
    assert sim.run(30, until=lambda: sim.committed_everywhere(offset))
    voter = next(n for n in sim.nodes if n != before[1])
    if cut == "isolated":
        sim.isolate(voter)
    else:
        sim.cut(voter, before[1])
    sim.run(10 * sim.fetch_timeout)
    sim.heal()
    assert sim.run(30, until=lambda: sim.agreed() is not None)
    sim.run(3 * sim.fetch_timeout)
    assert sim.agreed() == before, (f"seed {seed}: node {voter} cut off {cut} moved the "
                                    f"quorum from {before} to {sim.agreed()}")


@pytest.mark.parametrize("seed", SEEDS)
def test_a_voter_stranded_in_a_newer_epoch_is_not_shut_out(seed):
    """A voter that entered a new epoch as a candidate and lost touch before anyone heard its
    vote, while the leader went on committing without it: its log is behind, so every pre-vote
    it asks is refused, and it can never follow the older epoch's leader. Its pre-vote counts
    as won because the others answered from an older epoch; its election moves every voter to
    one newer epoch with one leader."""
    sim = Sim(voters=3, seed=seed)
    assert sim.run(30, until=sim.agreed)
    epoch, leader = sim.agreed()
    stranded = next(n for n in sim.nodes if n != leader)
    sim.crash(stranded)
    offset = sim.append("while it was away")
    assert sim.run(30, until=lambda: sim.committed_everywhere(offset))
    sim.restart(stranded, QuorumState(epoch + 1, stranded, None))
    assert sim.run(60, until=lambda: sim.agreed() is not None and stranded in sim.nodes), \
        f"seed {seed}: node {stranded} stranded in epoch {epoch + 1} stayed out"
    assert sim.agreed()[0] > epoch + 1
    assert sim.run(30, until=lambda: sim.committed_everywhere(offset))


@pytest.mark.parametrize("seed", SEEDS)
def test_an_observer_finds_each_leader_by_asking_the_voters_and_never_campaigns(seed):
    """A node that is not a voter (a broker beside dedicated controllers) fetches from a voter
    picked at random, which answers with the leader it knows; once its leader goes silent it
    forgets it and asks around again."""
    sim = Sim(voters=3, observers=1, seed=seed)
    observer = sim.nodes[4]

    def following():
        return sim.agreed() is not None and observer.core.leader_id == sim.leader()
    assert sim.run(30, until=following), f"seed {seed}: the observer found no leader"
    offset = sim.append("seen")
    assert sim.run(30, until=lambda: sim.committed_everywhere(offset)), f"seed {seed}"
    old = sim.leader()
    sim.crash(old)
    assert sim.run(60, until=lambda: following() and sim.leader() != old), \
        f"seed {seed}: the observer did not find the successor of node {old}"
    assert all(4 not in candidates for candidates in sim.votes.values()), \
        "the observer campaigned"


def test_the_only_voter_leads_at_its_first_poll_and_commits_its_own_appends():
    """A single broker's quorum: nobody to wait for, so no election timeout is waited out
    (Kafka's `isOnlyVoter`), and a record is committed as soon as it is appended."""
    core, store = _voter(voters=(1,))
    assert core.poll(0.0) == [] and core.is_leader, core.state
    assert store.load().epoch == 1 and store.load().voted_for == 1
    last = core.append(["a"])
    assert core.high_watermark == last + 1
