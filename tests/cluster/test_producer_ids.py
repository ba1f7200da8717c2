"""Producer ids in a replicated cluster: only from blocks the controller committed, answered by
every broker, never the same id twice (an isolated controller included), KIP-360 bumps too."""
import pytest
from confluent_kafka import Producer
from minilog.connector.protocol import ApiKey, ErrorCode, request
from wire import RawConnection
from clustertools import active_controller, wait_for

pytestmark = pytest.mark.timeout(300)

_INIT = request(ApiKey.INIT_PRODUCER_ID)


def _init_producer_id(bootstrap, producer_id=-1, epoch=-1, timeout=60.0):
    """(error code, producer id, epoch) of one raw InitProducerId v4, without transactional id."""
    conn = RawConnection(bootstrap)
    conn.sock.settimeout(timeout)
    try:
        resp = conn.call(ApiKey.INIT_PRODUCER_ID, 4, _INIT.cls(
            transactional_id=None, transaction_timeout_ms=60000, producer_id=producer_id,
            producer_epoch=epoch))
    finally:
        conn.close()
    return resp.error_code, resp.producer_id, resp.producer_epoch


def _ids_from(c, node_ids, per_node=3):
    got = []
    for node in node_ids:
        for _ in range(per_node):
            code, pid, epoch = _init_producer_id(c.broker(node).bootstrap)
            assert (code, epoch) == (0, 0), f"broker {node} answered {ErrorCode(code).name}"
            got.append(pid)
    return got


def test_every_broker_answers_init_producer_id_and_no_id_is_given_twice(make_cluster):
    c = make_cluster(3)
    first = _ids_from(c, (1, 2, 3))
    assert len(set(first)) == len(first)
    old = active_controller(c.bootstrap)
    c.broker(old).kill()
    rest = [n for n in (1, 2, 3) if n != old]
    wait_for(lambda: active_controller(c.bootstrap_of(*rest)) not in (-1, old),
             "a new controller")
    c.broker(old).start()
    c.wait_for_brokers(3)
    # the restarted broker's block is new; the others go on with theirs
    later = _ids_from(c, (1, 2, 3))
    assert len(set(first + later)) == len(first + later)


def test_kip360_epoch_bump_is_answered_by_a_broker_that_is_not_the_controller(make_cluster):
    c = make_cluster(3)
    controller = active_controller(c.bootstrap)
    other = next(n for n in (1, 2, 3) if n != controller)
    code, pid, _ = _init_producer_id(c.broker(other).bootstrap)
    assert code == 0
    # librdkafka's KIP-360 bump sends its id and epoch; without a transactional id Kafka
    # answers with a new id (bumping the one sent would let any client fence any producer)
    code, bumped, epoch = _init_producer_id(c.broker(other).bootstrap, pid, 0)
    assert (code, epoch) == (0, 0) and bumped != pid


def test_idempotent_confluent_producer_through_a_broker_that_is_not_the_controller(make_cluster):
    c = make_cluster(3)
    c.create_topic("pids", partitions=1, rf=3)
    controller = active_controller(c.bootstrap)
    other = next(n for n in (1, 2, 3) if n != controller)
    p = Producer({"bootstrap.servers": c.broker(other).bootstrap, "enable.idempotence": True,
                  "acks": "all"})
    errors = []
    for i in range(20):
        p.produce("pids", b"v%d" % i, on_delivery=lambda err, _: err and errors.append(err))
    assert p.flush(60) == 0 and errors == []


def test_isolated_controller_gives_out_no_producer_id(make_cluster):
    c = make_cluster(3)
    controller = active_controller(c.bootstrap)
    others = [n for n in (1, 2, 3) if n != controller]
    for n in others:
        c.pause(n)
    try:
        # the controller still believes it leads for a while: it must not answer with an id
        # whose allocation no majority has stored
        code, pid, _ = _init_producer_id(c.broker(controller).bootstrap)
        assert code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, (code, pid)
    finally:
        for n in others:
            c.resume(n)
    c.broker(controller).kill()
    new = wait_for(lambda: (lambda cid: cid if cid not in (-1, controller) else None)(
        active_controller(c.bootstrap_of(*others))), "a new controller")
    assert new in others
    code, pid, _ = _init_producer_id(c.broker(others[0]).bootstrap)
    assert code == 0
