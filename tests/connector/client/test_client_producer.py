"""Our producer against real brokers, read back by confluent-kafka (a client we did not write)."""
import asyncio
import threading
import time

import confluent_kafka
import pytest
from clienttools import confluent_consume, make_topic, unique
from minilog.connector import batch as batch_format
from minilog.connector.client import (
    AsyncProducer,
    Consumer,
    KafkaConnectionError,
    KafkaError,
    Producer,
    TopicPartition,
)
from tcp import CLOSE_WAIT, ends
from waiting import wait_until

pytestmark = pytest.mark.timeout(120)
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def _records(n):
    out = []
    for i in range(n):
        key = None if i % 7 == 0 else f"key-{i % 13}".encode()
        value = None if i % 11 == 5 else (b"v" * (i % 50)) + str(i).encode()
        headers = [] if i % 3 else [("h1", f"x{i}".encode()), ("empty", b""), ("null", None)]
        out.append((key, value, headers, 1_700_000_000_000 + i))
    return out


def test_records_reach_confluent_consumer_identically(cluster):
    topic = make_topic(cluster.bootstrap, 3)
    sent = _records(300)
    with Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 2}) as p:
        futs = [p.send(topic, v, key=k, headers=h, timestamp=ts) for k, v, h, ts in sent]
        assert p.flush(30) == 0
        metas = [f.result(0) for f in futs]
    got = confluent_consume(cluster.bootstrap, topic, range(3), len(sent))
    by_pos = {(m.partition(), m.offset()): m for m in got}
    assert len(by_pos) == len(sent)
    for (key, value, headers, ts), md in zip(sent, metas):
        m = by_pos[(md.partition, md.offset)]
        assert (m.key(), m.value(), m.timestamp()[1]) == (key, value, ts)
        assert (m.headers() or []) == headers
        assert md.timestamp == ts and md.topic == topic


@pytest.mark.parametrize("codec", CODECS)
def test_every_codec_round_trips_with_confluent(cluster, codec):
    topic = make_topic(cluster.bootstrap, 1)
    values = [f"value {i} ".encode() * (1 + i % 20) for i in range(500)]
    with Producer({"bootstrap.servers": cluster.bootstrap, "compression.type": codec}) as p:
        for v in values:
            p.send(topic, v, key=b"k")
        assert p.flush(30) == 0
    got = confluent_consume(cluster.bootstrap, topic, [0], len(values))
    assert [m.value() for m in got] == values
    # and the other way: confluent-kafka compresses, our consumer decompresses
    cp = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap,
                                   "compression.type": codec, "linger.ms": 5})
    for v in values:
        cp.produce(topic, v, key=b"k")
    assert cp.flush(30) == 0
    with Consumer({"bootstrap.servers": cluster.bootstrap}) as c:
        c.assign([TopicPartition(topic, 0)])
        c.seek(TopicPartition(topic, 0), len(values))
        out, deadline = [], time.monotonic() + 30
        while len(out) < len(values) and time.monotonic() < deadline:
            out += c.poll(1.0)
    assert [r.value for r in out] == values


def test_delivery_callback_reports_every_record(cluster):
    topic = make_topic(cluster.bootstrap, 2)
    seen, done = [], threading.Event()

    def on_delivery(err, md):
        seen.append((err, md))
        if len(seen) == 100:
            done.set()
    with Producer({"bootstrap.servers": cluster.bootstrap}) as p:
        for i in range(100):
            p.send(topic, b"x", key=str(i), on_delivery=on_delivery)
        p.flush(30)
    assert done.wait(5)
    assert all(err is None for err, _ in seen)
    assert len({(md.partition, md.offset) for _, md in seen}) == 100


def test_errors_reach_the_future_not_silence(cluster):
    topic = make_topic(cluster.bootstrap, 2)
    with Producer({"bootstrap.servers": cluster.bootstrap, "max.request.size": 2048,
                   "allow.auto.create.topics": False, "max.block.ms": 1000}) as p:
        with pytest.raises(KafkaError) as bad_partition:
            p.send(topic, b"x", partition=7).result(10)
        assert bad_partition.value.name == "UNKNOWN_TOPIC_OR_PARTITION"
        with pytest.raises(KafkaError) as too_large:
            p.send(topic, b"x" * 4096).result(10)
        assert too_large.value.name == "MESSAGE_TOO_LARGE"
        with pytest.raises(KafkaError) as unknown:  # after max.block.ms, not a result timeout
            p.send(unique("missing"), b"x").result(60)
        assert unknown.value.name == "UNKNOWN_TOPIC_OR_PARTITION"
        with pytest.raises(TypeError):
            p.send(topic, 12345)


def test_send_arrow_writes_spark_sink_columns_as_send_would(cluster):
    """Rows of a RecordBatch with Spark's Kafka sink columns: keys (string here), values,
    headers, an explicit partition or the key's murmur2 partition, read back by
    confluent-kafka exactly as records sent one by one."""
    import pyarrow as pa
    topic = make_topic(cluster.bootstrap, 3)
    n = 500
    keys = [None if i % 5 == 0 else f"k{i % 17}" for i in range(n)]
    values = [None if i % 97 == 3 else b"value-%d" % i for i in range(n)]
    parts = [i % 3 if i % 4 == 0 else None for i in range(n)]
    headers = [[{"key": "h", "value": b"%d" % i}] if i % 2 else [] for i in range(n)]
    header_type = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
    batch = pa.record_batch([pa.array(keys, pa.string()), pa.array(values, pa.binary()),
                             pa.array(parts, pa.int32()), pa.array(headers, header_type)],
                            names=["key", "value", "partition", "headers"])
    with Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 2}) as p:
        fut = p.send_arrow(batch, topic=topic)
        assert fut.result(30) == n
        one = p.send(topic, b"one by one", key=b"k3").result(10)
    got = confluent_consume(cluster.bootstrap, topic, range(3), n + 1)
    assert len(got) == n + 1
    seen = {m.value(): m for m in got}
    for i in range(n):
        if values[i] is None:
            continue
        m = seen[values[i]]
        assert m.key() == (keys[i].encode() if keys[i] is not None else None)
        assert (m.headers() or []) == [(h["key"], h["value"]) for h in headers[i]]
        if parts[i] is not None:
            assert m.partition() == parts[i]
        elif keys[i] == "k3":
            assert m.partition() == one.partition  # same key, same partition as send()
    assert sum(1 for m in got if m.value() is None) == sum(v is None for v in values)


def test_send_arrow_large_values_from_a_sliced_batch_with_nulls(cluster):
    """Values over 1 KB are sent from views of the Arrow buffer: offsets of a sliced batch,
    nulls and large_string columns must still give exactly the rows."""
    import pyarrow as pa
    topic = make_topic(cluster.bootstrap, 1)
    rows = [None if i % 9 == 4 else f"{i:04d}" * (300 + i) for i in range(60)]
    whole = pa.record_batch([pa.array(rows, pa.large_string())], names=["value"])
    with Producer({"bootstrap.servers": cluster.bootstrap}) as p:
        assert p.send_arrow(whole.slice(7, 40), topic=topic).result(30) == 40
    got = confluent_consume(cluster.bootstrap, topic, [0], 40)
    assert [m.value() for m in got] == [r.encode() if r is not None else None
                                        for r in rows[7:47]]


def test_send_arrow_of_values_alone_queues_batches_of_rows_in_order(cluster):
    """A value column alone, to one topic, goes as batches of rows (no tuple per record):
    records sent before and after keep their order, a table's chunks, nulls and a value
    larger than batch.size all arrive, cut into batches of about batch.size, committed with
    a transaction, read back by confluent-kafka."""
    import pyarrow as pa
    topic = make_topic(cluster.bootstrap, 1)
    rows = [None if i % 50 == 7 else f"line {i:05d} " + "x" * (i % 90) for i in range(3000)]
    rows[1234] = "y" * 20_000  # larger than batch.size: a batch of its own
    table = pa.Table.from_batches([
        pa.record_batch([pa.array(rows[:1000])], names=["value"]),
        pa.record_batch([pa.array(rows[1000:])], names=["value"])])
    with Producer({"bootstrap.servers": cluster.bootstrap, "batch.size": 8192,
                   "linger.ms": 50, "transactional.id": unique("columns")}) as p:
        p.init_transactions()
        p.begin_transaction()
        p.send(topic, b"before")
        fut = p.send_arrow(table, topic=topic)
        p.send(topic, b"after")
        p.commit_transaction(30)
        assert fut.result(0) == 3000
    got = confluent_consume(cluster.bootstrap, topic, [0], 3002)
    assert [m.value() for m in got] == \
        [b"before"] + [r.encode() if r is not None else None for r in rows] + [b"after"]
    assert all(m.key() is None and not m.headers() for m in got)
    batches = {}  # base offset -> records, as the log holds them
    with Consumer({"bootstrap.servers": cluster.bootstrap}) as c:
        from minilog.connector.client.fetcher import fetch_single

        async def raw(offset):
            pd = await fetch_single(c._core._cluster, c.config, TopicPartition(topic, 0),
                                    offset, time.monotonic() + 10)
            return pd.records
        offset = 0
        while offset < 3003:  # the records and the commit marker
            for _, h in batch_format.iter_batches(c._loop.run(raw(offset))):
                if not h.is_control:
                    batches[h.base_offset] = h.record_count
                offset = h.base_offset + h.last_offset_delta + 1
    # 8 KiB batches of ~80 B rows: about 100 rows each; the 20 KB row alone
    assert 1 in batches.values() and max(batches.values()) <= 8192 // 24
    assert sum(batches.values()) == 3002 and len(batches) >= 3000 * 60 // 8192


def test_send_arrow_reports_errors_and_bad_columns(cluster):
    import pyarrow as pa
    topic = make_topic(cluster.bootstrap, 1)
    with Producer({"bootstrap.servers": cluster.bootstrap, "max.block.ms": 1000}) as p:
        bad = pa.record_batch([pa.array([b"a", b"b"]), pa.array([0, 5], pa.int32())],
                              names=["value", "partition"])
        with pytest.raises(KafkaError) as e:
            p.send_arrow(bad, topic=topic).result(10)   # partition 5 does not exist
        assert e.value.name == "UNKNOWN_TOPIC_OR_PARTITION"
        with pytest.raises(ValueError, match="value"):
            p.send_arrow(pa.record_batch([pa.array([b"k"])], names=["key"]), topic=topic)
        with pytest.raises(ValueError, match="topic"):
            p.send_arrow(pa.record_batch([pa.array([b"v"])], names=["value"]))
        with pytest.raises(TypeError, match="binary or string"):
            p.send_arrow(pa.record_batch([pa.array([1])], names=["value"]), topic=topic)
        by_column = pa.record_batch([pa.array([topic, topic]), pa.array(["x", "y"])],
                                    names=["topic", "value"])
        assert p.send_arrow(by_column).result(10) == 2


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_acks_levels_deliver(cluster, acks):
    topic = make_topic(cluster.bootstrap, 1)
    with Producer({"bootstrap.servers": cluster.bootstrap, "acks": acks}) as p:
        futs = [p.send(topic, str(i)) for i in range(50)]
        assert p.flush(30) == 0
    offsets = [f.result(0).offset for f in futs]
    assert offsets == ([-1] * 50 if acks == "0" else list(range(50)))
    assert [m.value() for m in confluent_consume(cluster.bootstrap, topic, [0], 50)] == \
        [str(i).encode() for i in range(50)]


def test_idempotent_batches_carry_producer_id_and_sequences(broker):
    topic = make_topic(broker.bootstrap, 1)
    with Producer({"bootstrap.servers": broker.bootstrap, "batch.size": 1000,
                   "linger.ms": 0}) as p:
        assert p.config["enable.idempotence"] is True
        for i in range(300):
            p.send(topic, b"%05d" % i)
        assert p.flush(30) == 0
    with Consumer({"bootstrap.servers": broker.bootstrap}) as c:
        # the raw batches, as stored: read them through the range reader's fetch
        from minilog.connector.client.fetcher import fetch_single

        async def raw():
            cl = c._core._cluster
            pd = await fetch_single(cl, c.config, TopicPartition(topic, 0), 0,
                                    time.monotonic() + 10)
            return pd.records
        data = c._loop.run(raw())
    headers = [h for _, h in batch_format.iter_batches(data)]
    assert len(headers) > 1
    assert all(h.producer_id >= 0 and h.producer_id == headers[0].producer_id for h in headers)
    assert [h.base_sequence for h in headers] == [h.base_offset for h in headers]


def test_sends_keep_order_across_a_broker_restart(make_broker):
    b = make_broker()
    topic = make_topic(b.bootstrap, 1)
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 1, "retry.backoff.ms": 50,
                  "delivery.timeout.ms": 60000})
    futs = []
    try:
        for i in range(400):
            futs.append(p.send(topic, b"%05d" % i))
            if i == 200:
                p.flush(30)
                b.restart()
            time.sleep(0.001)
        assert p.flush(60) == 0
        errors = {i: f.exception(0) for i, f in enumerate(futs) if f.exception(0)}
        assert not errors, (list(errors.items())[:5], b.log()[-3000:])
        assert [f.result(0).offset for f in futs] == list(range(400))
    finally:
        p.close(10)
    got = confluent_consume(b.bootstrap, topic, [0], 400)
    assert [m.value() for m in got] == [b"%05d" % i for i in range(400)]


def test_a_batch_sent_while_the_leader_reconnects_keeps_its_place(make_broker):
    """After a broker restart, the first batch opens the new connection; a batch made just
    as that connection becomes ready must not reach the broker ahead of it.

    The broker is paused (SIGSTOP) so the reconnect waits for its ApiVersions answer; the
    test then lets the answer arrive while its own code blocks the event loop and queues the
    next record in that same moment, so the client sees both in one loop iteration. A client
    that fixes a batch's sequence before its connection is ready then writes the second batch
    first, and the broker rejects it as OUT_OF_ORDER_SEQUENCE_NUMBER. Each step waits for
    what the kernel shows of the connections (tcp.py), not for time to pass.
    """
    b = make_broker()
    topic = make_topic(b.bootstrap, 1)

    async def until(predicate, what):
        deadline = time.monotonic() + 60
        while not predicate():
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            await asyncio.sleep(0.01)

    async def main():
        async with AsyncProducer({"bootstrap.servers": b.bootstrap, "linger.ms": 0}) as p:
            first = await p.send_and_wait(topic, b"0")
            await asyncio.to_thread(b.restart)
            with b.paused():
                await until(lambda: not ends(b.port, CLOSE_WAIT), "the old connection closed")
                a = await p.send(topic, b"1")  # reconnects; the broker cannot answer yet
                await until(lambda: any(theirs and theirs.unread for _, theirs in ends(b.port)),
                            "ApiVersions waiting at the paused broker")
            # Blocks the loop on purpose until the broker's answer waits in the client's socket.
            wait_until(lambda: any(mine.unread for mine, _ in ends(b.port)),
                       what="the ApiVersions answer")
            assert not a.done()  # the race is staged: "1" waits for the answer just arrived
            c = await p.send(topic, b"2")  # no await inside: queued in this same step
            done = await asyncio.gather(a, c, return_exceptions=True)
            return [first, *done]
    got = asyncio.run(asyncio.wait_for(main(), 120))
    assert [getattr(m, "offset", m) for m in got] == [0, 1, 2]
    assert [m.value() for m in confluent_consume(b.bootstrap, topic, [0], 3)] == [b"0", b"1", b"2"]


def test_async_producer_for_asyncio_code(cluster):
    topic = make_topic(cluster.bootstrap, 1)

    async def main():
        async with AsyncProducer({"bootstrap.servers": cluster.bootstrap}) as p:
            first = await p.send_and_wait(topic, b"a", key=b"k")
            futs = [await p.send(topic, b"b%d" % i) for i in range(10)]
            await p.flush(10)
            return first, [f.result() for f in futs]
    first, rest = asyncio.run(asyncio.wait_for(main(), 30))
    assert first.offset == 0 and [m.offset for m in rest] == list(range(1, 11))


def test_unreachable_cluster_fails_at_once():
    with pytest.raises(KafkaConnectionError, match="Connection refused"):  # the module's
        Producer({"bootstrap.servers": "127.0.0.1:1", "max.block.ms": 600_000,  # timeout is
                  "socket.connection.setup.timeout.ms": 600_000})  # far below these
