"""Controller elections: a voter that was paused or cut off does not depose a working leader
when it comes back (KIP-996 pre-vote), and a quorum that lost its leader still elects one."""
import time

import pytest
from clustertools import FAST, active_controller, wait_for
from minilog.broker.raft.quorum_state import QuorumState

pytestmark = pytest.mark.timeout(300)
PAUSE = 2.5 * FAST["controller.quorum.fetch.timeout.ms"] / 1000  # past the fetch timeout


def quorum_state(c, node_id):
    """The node's persisted election state (epoch, vote, leader)."""
    return QuorumState.load(c.broker(node_id).log_dir / "__cluster_metadata-0")


def test_a_resumed_voter_follows_the_leader_instead_of_deposing_it(make_cluster):
    """A voter paused past the fetch timeout wakes up believing its leader lost. Without
    pre-vote it starts an election in a new epoch at once and every other voter, the working
    leader included, steps into that epoch: a needless failover, during which no broker's
    heartbeat is answered. With pre-vote it first asks whether it could win; the others have
    heard from the leader within the fetch timeout and say no, naming the leader, and it
    follows that leader in the same epoch. Three pauses, each longer than the fetch timeout."""
    c = make_cluster(3)
    c.create_topic("steady", partitions=1, rf=3)
    leader = active_controller(c.bootstrap)
    epoch = quorum_state(c, leader).epoch
    for paused in [n for n in (1, 2, 3) if n != leader] * 2:
        c.pause(paused)
        try:
            time.sleep(PAUSE)  # the fault's length, not a wait for anything
        finally:
            c.resume(paused)
        wait_for(lambda: quorum_state(c, paused).leader_id is not None
                 and quorum_state(c, paused).epoch >= epoch,
                 f"node {paused} to know a leader again")
        wait_for(lambda: c.partitions("steady", paused), f"node {paused} to answer metadata")
        states = {n: quorum_state(c, n) for n in (1, 2, 3)}
        assert {n: (s.epoch, s.leader_id) for n, s in states.items()} == {
            n: (epoch, leader) for n in (1, 2, 3)}, (
            f"after node {paused} resumed the quorum moved from epoch {epoch} (leader "
            f"{leader}) to {states}")


def test_a_quorum_without_its_leader_elects_a_successor(make_cluster):
    """Pre-vote must not stop a real election: with the active controller paused, the two
    other voters have not heard from it within the fetch timeout, grant each other's
    pre-vote, and one of them becomes the leader of the next epoch."""
    c = make_cluster(3)
    leader = active_controller(c.bootstrap)
    epoch = quorum_state(c, leader).epoch
    rest = [n for n in (1, 2, 3) if n != leader]
    c.pause(leader)
    try:
        successor = wait_for(lambda: active_controller(c.bootstrap_of(*rest)) in rest
                             and active_controller(c.bootstrap_of(*rest)),
                             "a successor among the other voters")
        assert quorum_state(c, successor).epoch > epoch
    finally:
        c.resume(leader)
    wait_for(lambda: quorum_state(c, leader).leader_id == successor,
             f"node {leader} to follow node {successor}")


def test_a_voter_stranded_in_a_newer_epoch_is_not_shut_out(make_cluster):
    """A voter that entered a new epoch as a candidate and then lost touch before anyone
    heard its vote (here: its quorum-state says so when it restarts) can never follow the
    leader of the older epoch. The others must not refuse it a pre-vote for having a leader:
    it would stay a candidate for good and the quorum would run a voter short. Its election
    moves every voter to one newer epoch with one leader."""
    c = make_cluster(3)
    c.create_topic("steady", partitions=1, rf=3)
    leader = active_controller(c.bootstrap)
    epoch = quorum_state(c, leader).epoch
    stranded = next(n for n in (1, 2, 3) if n != leader)
    c.broker(stranded).kill()
    QuorumState(epoch + 1, stranded, None).save(
        c.broker(stranded).log_dir / "__cluster_metadata-0")
    c.broker(stranded).start()

    def one_leader():
        states = {n: quorum_state(c, n) for n in (1, 2, 3)}
        views = {(s.epoch, s.leader_id) for s in states.values()}
        return len(views) == 1 and None not in {s.leader_id for s in states.values()} and states
    states = wait_for(one_leader, "every voter to follow one leader in one epoch")
    assert states[stranded].epoch > epoch + 1
    wait_for(lambda: c.partitions("steady", stranded), f"node {stranded} to answer metadata")
