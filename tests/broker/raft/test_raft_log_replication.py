"""The Raft core's log replication, in process (`raftsim.py`): the high watermark waits for a
majority, a divergent follower truncates to the diverging
epoch's end offset the leader names, and a follower behind the leader's log start starts over
there, snapshot first."""
import pytest
from raftsim import MemoryLog, Sim

from minilog.broker.raft.quorum_state import QuorumState

SEEDS = [5, 17]

# (the leader-to-be's log, the divergent follower's log, the offsets the follower truncates to)
DIVERGENCE = [
    # an uncommitted tail of epoch 3 the next leader never had: cut where epoch 2 ends here
    ([(1, "a"), (1, "b"), (2, "c"), (2, "d"), (4, "e")],
     [(1, "a"), (1, "b"), (2, "c"), (3, "x"), (3, "y"), (3, "z")], [3]),
    # longer in an older epoch: cut where the leader's epoch 1 ended
    ([(1, "a"), (1, "b"), (3, "c")], [(1, "a"), (1, "b"), (1, "x"), (1, "y"), (1, "z")], [2]),
    # an epoch the leader never had, after one it had: cut where epoch 1 ends on both
    ([(1, "a"), (3, "b")], [(1, "a"), (2, "x"), (2, "y")], [1]),
    # a prefix of the leader's log: nothing to cut
    ([(1, "a"), (1, "b"), (2, "c")], [(1, "a"), (1, "b")], []),
]


@pytest.mark.parametrize("leader_log, follower_log, truncations", DIVERGENCE)
@pytest.mark.parametrize("seed", SEEDS)
def test_a_divergent_follower_truncates_to_the_diverging_epochs_end(leader_log, follower_log,
                                                                      truncations, seed):
    last = max(e for e, _ in leader_log)
    sim = Sim(voters=3, seed=seed,
              logs={1: MemoryLog(leader_log), 2: MemoryLog(leader_log),
                    3: MemoryLog(follower_log)},
              states={n: QuorumState(last, None, None) for n in (1, 2, 3)})
    assert sim.run(30, until=sim.agreed), f"seed {seed}: no leader"
    assert sim.agreed()[1] in (1, 2), "the follower's older log won an election"
    offset = sim.append("after")
    assert sim.run(30, until=lambda: sim.committed_everywhere(offset)), f"seed {seed}"
    follower = sim.nodes[3].log
    assert follower.truncations == truncations, f"seed {seed}"
    assert follower.values() == sim.nodes[sim.leader()].log.values(), f"seed {seed}"


# (where the leader's log starts after its snapshot, the follower's log, whether it starts over)
BEHIND = [
    (10, [(1, "a"), (1, "b"), (1, "c")], True),    # ends before the leader's log starts
    (0, [(1, "snapshot"), (2, "r0")], False),      # the leader still has everything
]


@pytest.mark.parametrize("log_start, follower_log, starts_over", BEHIND)
@pytest.mark.parametrize("seed", SEEDS)
def test_a_follower_behind_the_log_start_fetches_the_snapshot_first(log_start, follower_log,
                                                                     starts_over, seed):
    def leader_log():
        return MemoryLog([(1, "snapshot")] + [(2, f"r{i}") for i in range(5)],
                         start_offset=log_start)
    sim = Sim(voters=3, seed=seed, logs={1: leader_log(), 2: leader_log(),
                                         3: MemoryLog(follower_log)},
              states={n: QuorumState(2, None, None) for n in (1, 2, 3)})
    assert sim.run(30, until=sim.agreed), f"seed {seed}: no leader"
    offset = sim.append("after")
    assert sim.run(30, until=lambda: sim.committed_everywhere(offset)), f"seed {seed}"
    follower = sim.nodes[3]
    if starts_over:
        assert follower.log.started_over == [log_start]
        assert ("start_over", log_start) in follower.listener.events
        assert follower.log.values()[0] == (log_start, 1, "snapshot")
    else:
        assert follower.log.started_over == []
    assert follower.log.values(log_start) == sim.nodes[sim.leader()].log.values(log_start)


def test_the_high_watermark_waits_for_a_majority():
    """Raft's commit rule: a record only a minority holds is not committed; once a majority
    has it, it is."""
    sim = Sim(voters=3, seed=3)
    assert sim.run(30, until=sim.agreed)
    epoch, leader = sim.agreed()
    followers = [n for n in sim.nodes if n != leader]
    sim.run(1)
    committed = sim.nodes[leader].core.high_watermark
    for n in followers:
        sim.crash(n)
    offset = sim.append("alone")
    sim.run(sim.fetch_timeout / 2)
    assert sim.nodes[leader].core.high_watermark == committed <= offset, \
        "a record only the leader has was committed"
    sim.restart(followers[0])
    assert sim.run(10, until=lambda: sim.nodes[leader].core.high_watermark > offset), \
        "a record the leader and one of two followers have was not committed"
