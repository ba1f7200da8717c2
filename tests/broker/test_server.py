"""The broker process as an operator runs it: config files, flags, signals, long polls, load."""
import socket
import subprocess
import sys
import time

from brokers import MinilogBroker, free_port
from confluent_kafka.admin import AdminClient, NewTopic
from minilog.connector.protocol import (
    ApiKey,
    RequestHeader,
    decode_response,
    encode_request,
    request,
)
from minilog.connector.records import encode_batch
from tcp import unread_by_server
from waiting import kafka_python_to_end, wait_until
from wire import RawConnection


def _fetch_body(topic, offset, max_wait_ms, min_bytes=1):
    req = request(ApiKey.FETCH)
    return req.cls(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=1 << 20,
                   isolation_level=0, topics=[req.make("topics", topic=topic, partitions=[
                       req.make("topics", "partitions", partition=0, fetch_offset=offset,
                                partition_max_bytes=1 << 20)])])


def _produce_body(topic, records):
    req = request(ApiKey.PRODUCE)
    return req.cls(acks=1, timeout_ms=5000, topic_data=[req.make(
        "topic_data", name=topic, partition_data=[req.make("topic_data", "partition_data",
                                                           index=0, records=records)])])


def test_fetch_long_poll_waits_for_max_wait_then_wakes_on_produce(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("poll", 1, 1)])["poll"].result(10)
    conn = RawConnection(broker.bootstrap)
    conn.sock.settimeout(60)  # an answer that never comes fails the test, however slow it is
    started = time.monotonic()
    resp = conn.call(ApiKey.FETCH, 11, _fetch_body("poll", 0, 600))
    assert time.monotonic() - started >= 0.5  # waited for data, then answered empty
    assert resp.responses[0].partitions[0].records == b""

    # A fetch that may wait 10 minutes, parked at the broker; then a record arrives.
    conn.send_raw(b"".join(encode_request(RequestHeader(ApiKey.FETCH, 11, 99, "raw"),
                                          _fetch_body("poll", 0, 600_000))))
    wait_until(lambda: unread_by_server(broker.port, conn.sock) == 0, what="the fetch read")
    other = RawConnection(broker.bootstrap)
    other.call(ApiKey.PRODUCE, 9, _produce_body("poll", encode_batch([(1, None, b"hi", [])])))
    other.close()
    resp = decode_response(ApiKey.FETCH, 11, conn.recv_frame())  # woken long before 10 min
    assert resp.responses[0].partitions[0].records
    conn.close()


def test_many_concurrent_connections_are_served(broker):
    conns = [RawConnection(broker.bootstrap) for _ in range(200)]
    body = request(ApiKey.API_VERSIONS).cls(client_software_name="t", client_software_version="1")
    frame = b"".join(encode_request(RequestHeader(ApiKey.API_VERSIONS, 3, 1, "many"), body))
    for c in conns:
        c.send_raw(frame)
    for c in conns:
        assert c.recv_frame()
        c.close()


def test_sigterm_stops_cleanly_and_next_start_skips_recovery(tmp_path):
    b = MinilogBroker(data_dir=tmp_path).start()
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic("t", 1, 1)])["t"].result(10)
        assert b.stop() == 0
        assert (tmp_path / "data" / ".kafka_cleanshutdown").exists()
        b.start()
        # the port answers before the broker has loaded its data and said how it found it
        wait_until(lambda: "data in" in b.log(), what="the broker's data summary")
        assert "last shutdown was clean" in b.log()
    finally:
        b.cleanup()


def test_properties_file_and_flags(tmp_path):
    port = free_port()
    props = tmp_path / "server.properties"
    props.write_text(f"# a Kafka-style file\nnode.id=7\nlisteners=PLAINTEXT://127.0.0.1:{port}\n"
                     f"log.dirs={tmp_path / 'logs'}\nnum.partitions=4\n")
    proc = subprocess.Popen([sys.executable, "-m", "minilog.broker", "start", str(props),
                             "-o", "auto.create.topics.enable=false"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), 0.5).close()
                break
            except OSError:
                time.sleep(0.1)
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
        admin.create_topics([NewTopic("four", -1, -1)])["four"].result(10)
        md = admin.list_topics(timeout=10)
        assert len(md.topics["four"].partitions) == 4
        assert list(md.brokers) == [7]
        assert (tmp_path / "logs" / "four-3").is_dir()
    finally:
        proc.terminate()
        assert proc.wait(15) == 0


def test_bad_configuration_is_one_line_and_nonzero_exit(tmp_path):
    for args, needle in [(["-o", "no.such.key=1"], "unknown broker setting"),
                         (["-o", "num.partitions=many"], "num.partitions"),
                         (["--listen", "nonsense"], "listeners"),
                         ([str(tmp_path / "missing.properties")], "cannot read")]:
        r = subprocess.run([sys.executable, "-m", "minilog.broker", "start",
                            "--data-dir", str(tmp_path / "d"), *args],
                           check=False, capture_output=True, text=True, timeout=30)
        assert r.returncode != 0
        assert needle in r.stderr and "Traceback" not in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_large_fetches_are_whole_stored_batches_sent_from_the_file(broker):
    """Fetches over 64 KiB go by sendfile: same bytes, cut at whole batches, readable by
    confluent-kafka and kafka-python."""
    import confluent_kafka
    import kafka
    from minilog.connector.records import decode_batches

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("large", 1, 1)])["large"].result(10)
    conn = RawConnection(broker.bootstrap)
    values = [[b"%d-%04d-" % (b, i) + bytes(300) for i in range(1000)] for b in range(6)]
    for vals in values:  # six batches of ~310 KB, stored as sent
        resp = conn.call(ApiKey.PRODUCE, 9, _produce_body(
            "large", encode_batch([(1000 + i, None, v, []) for i, v in enumerate(vals)])))
        assert resp.responses[0].partition_responses[0].error_code == 0
    want = [v for vals in values for v in vals]

    records = conn.call(ApiKey.FETCH, 11, _fetch_body("large", 0, 0)).responses[0] \
        .partitions[0].records
    got = decode_batches(bytes(records))
    assert len(records) < 1 << 20 and [r.value for r in got] == want[:3000]  # 3 whole batches
    body = _fetch_body("large", 2500, 0)
    body.topics[0].partitions[0].partition_max_bytes = 100_000       # less than one batch
    records = conn.call(ApiKey.FETCH, 11, body).responses[0].partitions[0].records
    assert [r.value for r in decode_batches(bytes(records))] == want[2000:3000]  # min one
    conn.close()

    c = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "large",
                                  "enable.auto.commit": False})
    c.assign([confluent_kafka.TopicPartition("large", 0, 0)])
    seen, deadline = [], time.monotonic() + 30
    while len(seen) < len(want) and time.monotonic() < deadline:
        seen += [m.value() for m in c.consume(1000, 0.5) if not m.error()]
    c.close()
    assert seen == want
    k = kafka.KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False)
    k.assign([kafka.TopicPartition("large", 0)])
    k.seek(kafka.TopicPartition("large", 0), 0)
    seen = [m.value for m in kafka_python_to_end(k)]
    k.close()
    assert seen == want
