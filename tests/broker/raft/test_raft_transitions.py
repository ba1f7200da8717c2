"""The Raft roles' checked transitions (`quorum.py`): what Raft forbids raises, and every
allowed move persists the election state it implies before the node acts on it."""
import pytest
from raftsim import MemoryStore

from minilog.broker.raft.epoch_state import Ballot, LeaderState
from minilog.broker.raft.quorum import IllegalTransition, Quorum
from minilog.broker.raft.quorum_state import QuorumState

VOTERS = (1, 2, 3)


def _quorum(state=QuorumState(4, None, None), node_id=1):
    return Quorum(node_id, VOTERS, MemoryStore(state), now=0.0)


def _won(q):
    b = Ballot(q.node_id, deadline=1.0)
    b.granted |= set(VOTERS)
    return b


def _candidate(ballot):
    q = _quorum()
    q.transition_to_prospective(_won(q))
    q.transition_to_candidate(ballot)
    return q


def _leader(q):
    q.transition_to_prospective(_won(q))
    q.transition_to_candidate(_won(q))
    q.transition_to_leader(0, now=0.0)
    return q


ILLEGAL = [
    ("a follower in an older epoch", _quorum, lambda q: q.transition_to_follower(3, 2, 0.0)),
    ("a second leader in one epoch", lambda: _quorum(QuorumState(4, None, 2)),
     lambda q: q.transition_to_follower(4, 3, 0.0)),
    ("a leader following in its own epoch", lambda: _leader(_quorum()),
     lambda q: q.transition_to_follower(5, 2, 0.0)),
    ("following itself", _quorum, lambda q: q.transition_to_follower(5, 1, 0.0)),
    ("a candidate without a pre-vote", _quorum, lambda q: q.transition_to_candidate(_won(q))),
    ("a leader without a majority", lambda: _candidate(Ballot(1, 1.0)),
     lambda q: q.transition_to_leader(0, 0.0)),
    ("an observer campaigning", lambda: _quorum(node_id=9),
     lambda q: q.transition_to_prospective(_won(q))),
    ("a second vote in one epoch", lambda: _quorum(QuorumState(4, 2, None)),
     lambda q: q.transition_to_unattached(4, 0.0, voted_for=3)),
    ("resigning without leading", _quorum, lambda q: q.transition_to_resigned()),
]


@pytest.mark.parametrize("name, make, move", ILLEGAL, ids=[i[0] for i in ILLEGAL])
def test_an_illegal_transition_raises_and_changes_nothing(name, make, move):
    q = make()
    before, saved = q.state, q.store.saves
    with pytest.raises(IllegalTransition):
        move(q)
    assert q.state is before and q.store.saves == saved


def test_each_step_of_an_election_is_persisted_before_it_is_entered():
    q = _quorum()
    q.transition_to_prospective(_won(q))
    assert q.store.saves == 0, "a pre-vote persisted something"
    q.transition_to_candidate(_won(q))
    assert q.store.state == QuorumState(5, 1, None)
    assert isinstance(q.transition_to_leader(7, now=0.0), LeaderState)
    assert q.store.state == QuorumState(5, 1, 1)


def test_a_restarted_leader_must_be_elected_again():
    q = _quorum(QuorumState(5, 1, 1))
    assert q.leader_id is None and q.state.voted_for == 1 and q.epoch == 5
