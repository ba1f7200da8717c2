"""The metadata log: snapshots let it delete its prefix, a node that fell behind the deleted
prefix starts over from the snapshot, and everything survives restarting every node."""
import pytest
from clustertools import wait_for

pytestmark = pytest.mark.timeout(240)

SMALL = {"metadata.log.max.record.bytes.between.snapshots": 2048,
         "metadata.log.segment.bytes": 16384}


def first_offset(broker):
    """The base offset of the oldest segment of the node's metadata log."""
    segments = (broker.log_dir / "__cluster_metadata-0").glob("*.log")
    return min(int(s.name[:20]) for s in segments)


def test_snapshots_bound_the_log_and_bring_a_lagging_node_up_to_date(make_cluster):
    c = make_cluster(3, **SMALL)
    c.broker(3).kill()
    names = [f"topic-{i:02d}" for i in range(20)]
    for name in names:
        c.create_topic(name, partitions=1, rf=2)
    for node in (1, 2):  # a snapshot was committed and the log before it deleted
        wait_for(lambda: first_offset(c.broker(node)) > 0, f"node {node} to delete its prefix")
    c.broker(3).start()
    wait_for(lambda: set(names) <= set(c.metadata(3).topics), "node 3 to learn every topic")
    assert first_offset(c.broker(3)) > 0  # it started over from the snapshot
    c.stop()
    c.start()
    for node in (1, 2, 3):
        wait_for(lambda: set(names) <= set(c.metadata(node).topics),
                 f"node {node} to know every topic after a full restart")
