"""The controller in process, on a real one-voter quorum (its log in a temporary directory,
no process, no network): an operation returns its records and its response without writing
anything; the response comes out only once the records are committed and in the image; a
controller that stops leading fails what still waits; a request carrying a stale broker
epoch (BrokerHeartbeat, AllocateProducerIds) is refused with STALE_BROKER_EPOCH and writes
nothing."""
import asyncio

import pytest

from minilog.broker.metadata import records
from minilog.broker.metadata.controller import Controller
from minilog.broker.metadata.controller_result import NotController
from minilog.broker.metadata.producer_ids import BLOCK_SIZE, ProducerIdAllocator, \
    ProducerIdsUnavailable
from minilog.broker.server.broker import Broker
from minilog.broker.server.config import BrokerConfig
from minilog.connector.protocol import ErrorCode

from waiting import wait_until


@pytest.fixture
def controller(tmp_path):
    """(Controller, store) of a one-voter quorum that leads, stopped afterwards."""
    config = BrokerConfig.from_props({
        "log.dirs": str(tmp_path / "data"), "node.id": "1", "process.roles": "controller",
        "controller.quorum.voters": "1@127.0.0.1:1", "listeners": "CONTROLLER://127.0.0.1:0"})
    broker = Broker(config)
    loop = asyncio.new_event_loop()

    async def start():
        broker.quorum.raft.start()
        return Controller(broker, broker.quorum)

    def running(predicate):  # the loop runs while the one wait helper polls
        return lambda: loop.run_until_complete(asyncio.sleep(0.01)) or predicate()
    found = loop.run_until_complete(start())
    try:
        wait_until(running(lambda: found.active and broker.quorum.image.offset >= 0), 10,
                   "the one voter leads and has committed its first record")
        yield loop, found, broker.quorum
    finally:
        async def stop():
            await found.stop()
            await broker.quorum.raft.stop()
            broker.quorum.close()
            broker.peers.close()
        loop.run_until_complete(stop())
        loop.close()
        broker._locks.release()


def _register(loop, controller, store, node=2):
    result = controller.register(node, "h", 9092)
    return loop.run_until_complete(store.commit(result))


def test_an_operation_returns_records_and_a_response_and_writes_nothing(controller):
    loop, controller, store = controller
    end = store.next_offset
    result = controller.register(2, "h", 9092, listeners={"PLAINTEXT": ("h", 9092)})
    assert result.records == [records.broker_record(2, "h", 9092, None,
                                                    {"PLAINTEXT": ("h", 9092)})]
    assert result.response == end  # the broker epoch: the offset its record will get
    assert store.next_offset == end and 2 not in store.working.registered


def test_the_response_comes_once_the_records_are_committed(controller):
    loop, controller, store = controller

    async def run():
        answer = store.submit(controller.register(2, "h", 9092))
        assert store.working.broker_epochs[2] >= 0  # the controller's own view has it...
        assert not answer.done() and 2 not in store.image.registered  # ...nobody else yet
        epoch = await answer
        assert store.image.broker_epochs[2] == epoch  # in the committed image by then
        return epoch
    epoch = loop.run_until_complete(run())
    beat = controller.heartbeat(2, epoch, store.metadata_offset, want_fence=False)
    assert beat.response == (0, True, False)
    assert beat.records[0] == records.fence_record(2, False)
    assert loop.run_until_complete(store.commit(beat)) == (0, True, False)
    assert 2 in store.image.brokers


def test_losing_the_leadership_fails_what_waits(controller):
    loop, controller, store = controller

    async def run():
        answer = store.submit(controller.register(2, "h", 9092))
        store.handle_leader_change(False)  # as Raft tells it, before the record commits
        with pytest.raises(NotController):
            await answer
        assert 2 not in store.image.registered
    loop.run_until_complete(run())


def test_a_stale_broker_epoch_is_refused(controller):
    loop, controller, store = controller
    epoch = _register(loop, controller, store)
    stale = controller.heartbeat(2, epoch - 1, store.metadata_offset, want_fence=False)
    assert stale.records == [] and stale.response[0] == ErrorCode.STALE_BROKER_EPOCH
    allocator = ProducerIdAllocator(store)
    before = store.image.next_producer_id
    for wrong in (epoch - 1, -1):
        refused = allocator.decide(2, wrong)
        assert refused.records == [] and refused.response == ErrorCode.STALE_BROKER_EPOCH
        with pytest.raises(ProducerIdsUnavailable) as e:
            loop.run_until_complete(allocator.allocate(2, wrong))
        assert e.value.code == ErrorCode.STALE_BROKER_EPOCH
    with pytest.raises(ProducerIdsUnavailable):
        loop.run_until_complete(allocator.allocate(3, epoch))  # not registered at all
    assert store.image.next_producer_id == before
    block = loop.run_until_complete(allocator.allocate(2, epoch))
    assert (block.start, block.length) == (before, BLOCK_SIZE)
    assert store.image.next_producer_id == before + BLOCK_SIZE
