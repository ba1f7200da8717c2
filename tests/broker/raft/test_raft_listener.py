"""What the Raft node hands its listener (Kafka's RaftClient.Listener), in process on a one-voter
quorum over a real metadata log: each committed batch whole (one append's records together, so
the metadata loader makes one delta of one controller operation), in log order, once, and
nothing before it is committed."""
import asyncio

from minilog.broker.raft.raft_node import RaftNode
from test_quorum_partition import JsonSerde, _metadata_log

from waiting import wait_until


class Recorder:
    def __init__(self):
        self.batches, self.resets, self.leading = [], 0, []

    def handle_commit(self, batch):
        self.batches.append(batch)

    def handle_reset(self):
        self.resets += 1

    def handle_leader_change(self, leading):
        self.leading.append(leading)


def test_each_committed_batch_reaches_the_listener_whole_in_order_and_once(tmp_path):
    partition, _ = _metadata_log(tmp_path)
    heard = Recorder()
    loop = asyncio.new_event_loop()

    def running(predicate):  # the loop runs while the one wait helper polls
        return lambda: loop.run_until_complete(asyncio.sleep(0.01)) or predicate()

    async def start():
        return RaftNode(1, {1: ("127.0.0.1", 1)}, partition, None, listener=heard,
                        serde=JsonSerde()).start()
    node = loop.run_until_complete(start())
    try:
        wait_until(running(lambda: node.is_leader), 10, "the one voter to lead")
        before = len(heard.batches)
        last = node.append([{"n": 1}, {"n": 2}])
        node.append([{"n": 3}])
        assert len(heard.batches) == before, "handed over before it was committed"
        wait_until(running(lambda: node.applied > last + 1), 10, "both appends committed")
        got = [[(offset - last, rec) for offset, rec in batch] for batch in heard.batches[before:]]
        assert got == [[(-1, {"n": 1}), (0, {"n": 2})], [(1, {"n": 3})]]
        offsets = [offset for batch in heard.batches for offset, _ in batch]
        assert offsets == sorted(set(offsets)), "a record handed twice or out of order"
        assert heard.leading == [True] and heard.resets == 0
    finally:
        loop.run_until_complete(node.stop())
        partition.log.close()
        loop.close()
