"""The minilog client's transactional producer (confluent-kafka's method names) and its
read_committed consumer, against a real broker; confluent-kafka reads what it wrote."""
import pytest
from clienttools import make_topic, unique
from minilog.connector.client import Consumer, Producer, TopicPartition
from minilog.connector.client.transactions import TransactionError
from txntools import read_all

pytestmark = pytest.mark.timeout(180)


def _producer(bootstrap, txn_id):
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id})
    p.init_transactions(60)
    return p


def _write(p, topic, values, commit):
    p.begin_transaction()
    for v in values:
        p.send(topic, v)
    p.flush(60)
    p.commit_transaction(60) if commit else p.abort_transaction(60)


def _committed_and_aborted(broker):
    topic = make_topic(broker.bootstrap)
    p = _producer(broker.bootstrap, unique("txn"))
    try:
        _write(p, topic, [b"c%d" % i for i in range(5)], commit=True)
        _write(p, topic, [b"a%d" % i for i in range(5)], commit=False)
        _write(p, topic, [b"d%d" % i for i in range(5)], commit=True)
    finally:
        p.close()
    return topic, [b"c%d" % i for i in range(5)] + [b"d%d" % i for i in range(5)]


def test_commit_and_abort_as_a_read_committed_confluent_consumer_sees_them(broker):
    topic, committed = _committed_and_aborted(broker)
    assert read_all(broker.bootstrap, topic, "read_committed", 10) == committed
    assert len(read_all(broker.bootstrap, topic, "read_uncommitted", 15)) == 15


def test_read_committed_in_poll_and_fetch_range_arrow(broker):
    topic, committed = _committed_and_aborted(broker)
    with Consumer({"bootstrap.servers": broker.bootstrap,
                   "isolation.level": "read_committed"}) as c:
        c.assign([TopicPartition(topic, 0)])
        c.seek(TopicPartition(topic, 0), 0)
        got = []
        for _ in range(40):
            got += [r.value for r in c.poll(0.5)]
            if len(got) >= 10:
                break
        assert got == committed
        end = c.end_offsets([TopicPartition(topic, 0)])[TopicPartition(topic, 0)]
        rows = [v for b in c.fetch_range_arrow((topic, 0), 0, end)
                for v in b.column("value").to_pylist()]
        assert rows == committed


def test_a_new_instance_fences_the_old_producer(broker):
    topic, txn_id = make_topic(broker.bootstrap), unique("zombie")
    old = _producer(broker.bootstrap, txn_id)
    old.begin_transaction()
    old.send(topic, b"zombie")
    old.flush(60)
    new = _producer(broker.bootstrap, txn_id)
    try:
        _write(new, topic, [b"new"], commit=True)
        with pytest.raises(TransactionError) as e:
            old.commit_transaction(60)
        assert e.value.fatal
    finally:
        old.close()
        new.close()
    assert read_all(broker.bootstrap, topic, "read_committed", 1) == [b"new"]


def test_offsets_sent_to_the_transaction_are_committed_with_it(broker):
    topic, group = make_topic(broker.bootstrap), unique("group")
    with Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group}) as c:
        p = _producer(broker.bootstrap, unique("copier"))
        try:
            p.begin_transaction()
            p.send(topic, b"out")
            p.send_offsets_to_transaction({(topic, 0): 3}, c.consumer_group_metadata(), 60)
            p.commit_transaction(60)
        finally:
            p.close()
        assert c.committed([TopicPartition(topic, 0)])[TopicPartition(topic, 0)].offset == 3


def test_sending_outside_a_transaction_is_refused(broker):
    p = _producer(broker.bootstrap, unique("outside"))
    try:
        with pytest.raises(TransactionError, match="begin_transaction"):
            p.send(make_topic(broker.bootstrap), b"v")
    finally:
        p.close()


def test_a_read_committed_position_moves_past_an_aborted_transaction_at_the_end(broker):
    topic = make_topic(broker.bootstrap)
    p = _producer(broker.bootstrap, unique("tail"))
    try:
        _write(p, topic, [b"kept"], commit=True)
        _write(p, topic, [b"dropped-%d" % i for i in range(3)], commit=False)
    finally:
        p.close()
    tp = TopicPartition(topic, 0)
    with Consumer({"bootstrap.servers": broker.bootstrap,
                   "isolation.level": "read_committed"}) as c:
        c.assign([tp])
        c.seek(tp, 0)
        end = c.end_offsets([tp])[tp]
        assert end == 6  # kept, its marker, three aborted records, their marker
        got = []
        for _ in range(40):
            got += [r.value for r in c.poll(0.5)]
            if c.position(tp) >= end:
                break
        assert (got, c.position(tp)) == ([b"kept"], end)


def test_a_prepared_transaction_is_committed_by_another_process_holding_its_state(broker):
    """Two-phase commit: the producer prepares and goes away; an AdminClient (the driver of
    an exactly-once sink) commits with the prepared state; a second commit is answered done."""
    from minilog.connector.client import AdminClient, PreparedTxnState
    topic, txn_id = make_topic(broker.bootstrap), unique("prepared")
    p = _producer(broker.bootstrap, txn_id)
    p.begin_transaction()
    for i in range(5):
        p.send(topic, b"p%d" % i)
    state = p.prepare_transaction(60)
    p.close()
    assert read_all(broker.bootstrap, topic, "read_committed", 0, quiet_s=1.0) == []
    with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
        admin.complete_transaction(txn_id, PreparedTxnState.parse(str(state)), commit=True)
        admin.complete_transaction(txn_id, state, commit=True)  # a retry: already done
    assert read_all(broker.bootstrap, topic, "read_committed", 5) == [b"p%d" % i for i in range(5)]


def test_a_new_instance_aborts_what_a_fenced_producer_prepared(broker):
    """A task retried: the new producer's init aborts the old attempt's prepared transaction,
    and completing the old state is refused as fenced."""
    from minilog.connector.client import AdminClient, ErrorCode, KafkaError
    topic, txn_id = make_topic(broker.bootstrap), unique("prepared")
    old = _producer(broker.bootstrap, txn_id)
    old.begin_transaction()
    old.send(topic, b"zombie")
    state = old.prepare_transaction(60)
    new = _producer(broker.bootstrap, txn_id)
    new.begin_transaction()
    new.send(topic, b"retry")
    new.commit_transaction(60)
    with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
        with pytest.raises(KafkaError) as e:
            admin.complete_transaction(txn_id, state, commit=True)
    assert e.value.code == ErrorCode.PRODUCER_FENCED
    assert read_all(broker.bootstrap, topic, "read_committed", 1) == [b"retry"]
    old.close()
    new.close()
