"""KIP-939 two-phase commit, minilog's client against a broker with
transaction.two.phase.commit.enable=true: a transaction prepared by one producer instance is
kept by the next one (InitProducerId v6 KeepPreparedTxn) and completed by it, and a two-phase
transaction outlives transaction.timeout.ms."""
import time

import pytest
from brokers import MinilogBroker
from clienttools import make_topic, unique
from minilog.connector.client import AdminClient, ErrorCode, KafkaError, Producer
from txntools import SMALL, read_all

pytestmark = pytest.mark.timeout(180)
ABORT_CHECK_MS = 200  # the coordinator looks for timed-out transactions this often


@pytest.fixture(scope="module")
def tpc_broker():
    b = MinilogBroker(extra=SMALL + [
        "-o", "transaction.two.phase.commit.enable=true",
        "-o", f"transaction.abort.timed.out.transaction.cleanup.interval.ms={ABORT_CHECK_MS}"]
    ).start()
    yield b
    b.cleanup()


def producer(bootstrap, txn_id, keep=False, two_phase=True, **more):
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                  "transaction.two.phase.commit.enable": two_phase, **more})
    p.init_transactions(60, keep_prepared_txn=keep)
    return p


def prepare(bootstrap, topic, txn_id, values, **more):
    p = producer(bootstrap, txn_id, **more)
    p.begin_transaction()
    for v in values:
        p.send(topic, v)
    state = p.prepare_transaction(60)
    p.close()
    return state


def state_of(bootstrap, txn_id):
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        return admin.describe_transactions(txn_id)[txn_id].state


def test_the_next_instance_keeps_the_prepared_transaction_and_commits_it(tpc_broker):
    bs, topic, txn_id = tpc_broker.bootstrap, make_topic(tpc_broker.bootstrap), unique("2pc")
    state = prepare(bs, topic, txn_id, [b"a", b"b"])
    p = producer(bs, txn_id, keep=True)
    assert state_of(bs, txn_id) == "Ongoing"  # kept, not aborted
    p.complete_transaction(state, 60)
    assert read_all(bs, topic, "read_committed", 2) == [b"a", b"b"]
    p.begin_transaction()  # the producer goes on with transactions of its own
    p.send(topic, b"c")
    p.commit_transaction(60)
    p.close()
    assert read_all(bs, topic, "read_committed", 3) == [b"a", b"b", b"c"]


def test_a_state_that_is_not_the_kept_transactions_aborts_it(tpc_broker):
    bs, topic, txn_id = tpc_broker.bootstrap, make_topic(tpc_broker.bootstrap), unique("2pc")
    first = prepare(bs, topic, txn_id, [b"old"])
    prepare(bs, topic, txn_id, [b"new"])  # a newer attempt: its init aborted the first
    p = producer(bs, txn_id, keep=True)
    p.complete_transaction(first, 60)
    p.close()
    assert read_all(bs, topic, "read_committed", 0, quiet_s=1.0) == []
    assert len(read_all(bs, topic, "read_uncommitted", 2)) == 2  # both were written


@pytest.mark.parametrize("two_phase,survives", [(True, True), (False, False)])
def test_only_a_two_phase_transaction_outlives_its_timeout(tpc_broker, two_phase, survives):
    bs, topic, txn_id = tpc_broker.bootstrap, make_topic(tpc_broker.bootstrap), unique("2pc")
    prepare(bs, topic, txn_id, [b"x"], two_phase=two_phase, **{"transaction.timeout.ms": 500})
    time.sleep(2.0 + 5 * ABORT_CHECK_MS / 1000)  # four timeouts and several abort checks
    assert (state_of(bs, txn_id) == "Ongoing") == survives


def test_two_phase_commit_is_refused_where_the_broker_does_not_enable_it(broker):
    with pytest.raises(KafkaError) as e:
        producer(broker.bootstrap, unique("2pc"))
    assert e.value.code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
