"""Connectors through kill -9 of their worker, as Connect users rely on it: one `minilog connect`
worker process, a real broker, a file → topic → file pipeline (FileStreamSource and
FileStreamSink) and a topic → PostgreSQL one (the JDBC sink's settings, Debian's postgres,
psycopg) running side by side, the worker killed with -9 once under both at a seeded moment and
restarted; each output exactly the input. Also the JDBC sink's upserts and deletes by record key,
and its validation.

One worker and one kill for the module: a Spark worker's start and restart are most of what these
tests cost, and both pipelines are checked through the same one. Without a PostgreSQL server the
file pipeline is still killed and checked."""
import json
import os
import random
from concurrent.futures import ThreadPoolExecutor

import pytest
from connecttools import ConnectWorker, append_lines, lines_of, progress, task_state
from postgres import PostgresServer, available
from sparktools import consume_all, create_topic, produce, unique
from waiting import wait_until

pytestmark = pytest.mark.timeout(600)

SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"
JDBC = "io.confluent.connect.jdbc.JdbcSinkConnector"
DEADLINE = 480.0  # a connector's first records through Spark, on a loaded machine (minutes)
SCHEMA = {"type": "struct", "optional": False, "fields": [
    {"field": "id", "type": "int64", "optional": False},
    {"field": "name", "type": "string", "optional": True},
    {"field": "amount", "type": "float64", "optional": True}]}
needs_postgres = pytest.mark.skipif(not available(), reason="PostgreSQL's initdb/postgres missing")


def envelope(id_, name, amount):
    return json.dumps({"schema": SCHEMA,
                       "payload": {"id": id_, "name": name, "amount": amount}}).encode()


@pytest.fixture(scope="module")
def servers(broker, tmp_path_factory):
    """The module's worker, and its PostgreSQL server (None where there is none), started side
    by side: each is seconds of a busy machine's time."""
    with ThreadPoolExecutor(1) as pool:
        starting = pool.submit(lambda: PostgresServer().start()) if available() else None
        w = ConnectWorker(tmp_path_factory.mktemp("connect-kill9"), broker.bootstrap)
        try:
            w.start()
            pg = starting.result() if starting else None
        except BaseException:
            w.stop()
            if starting and starting.exception() is None:
                starting.result().cleanup()
            raise
    yield w, pg
    w.stop()
    if pg is not None:
        pg.cleanup()


@pytest.fixture(scope="module")
def worker(servers):
    return servers[0]


@pytest.fixture(scope="module")
def pg(servers):
    return servers[1]


def rows(pg, table):
    import psycopg
    try:
        return pg.query(f'SELECT id, name, amount FROM "{table}" ORDER BY id')
    except psycopg.errors.UndefinedTable:
        return []


@needs_postgres
def test_upsert_and_delete_by_record_key(worker, broker, pg):
    topic = create_topic(broker.bootstrap, unique("accounts"))
    produce(broker.bootstrap, topic, [
        (0, b"1", envelope(1, "alice", 10.0), None), (0, b"2", envelope(2, "bob", 20.0), None),
        (0, b"1", envelope(1, "alice", 15.5), None), (0, b"3", envelope(3, "carol", 1.0), None),
        (0, b"2", None, None)])  # a tombstone: bob's row goes
    status, body = worker.call("PUT", "/connectors/accounts-pg/config", {
        "connector.class": JDBC, "topics": topic, "connection.url": pg.url,
        "insert.mode": "upsert", "pk.mode": "record_key", "pk.fields": "id",
        "auto.create": "true", "delete.enabled": "true"})
    assert status == 201, body
    expected = [(1, "alice", 15.5), (3, "carol", 1.0)]
    wait_until(lambda: rows(pg, topic) == expected, DEADLINE, f"the table {expected}")
    assert pg.query('SELECT topic, partition, "offset" FROM __connect_offsets '
                    "WHERE connector = 'accounts-pg'") == [(topic, 0, 4)]
    assert worker.call("DELETE", "/connectors/accounts-pg")[0] == 204


@needs_postgres
def test_records_replayed_into_the_sink_are_not_written_twice(worker, broker, pg):
    """The sink keeps its offsets beside the rows, in their transaction, as Confluent's
    exactly-once sinks keep theirs in the destination: records the table already holds, here
    replayed by rewinding the connector's offsets (KIP-875; its query restarts from them
    without its checkpoint), are skipped. The same skip covers a crash between the database's
    commit and Spark's, which a kill lands in too rarely to test."""
    topic = create_topic(broker.bootstrap, unique("ledger"))
    produce(broker.bootstrap, topic, [(0, None, envelope(i, f"l{i}", i / 4), None)
                                      for i in range(20)])
    status, _ = worker.call("PUT", "/connectors/ledger-pg/config", {
        "connector.class": JDBC, "topics": topic, "connection.url": pg.url,
        "auto.create": "true", "pk.mode": "none"})
    assert status == 201
    wait_until(lambda: len(rows(pg, topic)) == 20, DEADLINE, "the first 20 rows")
    assert worker.call("PUT", "/connectors/ledger-pg/stop")[0] == 204
    wait_until(lambda: worker.call("GET", "/connectors/ledger-pg/status")[1]["connector"]
               ["state"] == "STOPPED", DEADLINE, "STOPPED")
    rewound = {"partition": {"kafka_topic": topic, "kafka_partition": 0},
               "offset": {"kafka_offset": 0}}
    assert worker.call("PATCH", "/connectors/ledger-pg/offsets", {"offsets": [rewound]})[0] == 200
    assert worker.call("PUT", "/connectors/ledger-pg/resume")[0] == 202
    produce(broker.bootstrap, topic, [(0, None, envelope(i, f"l{i}", i / 4), None)
                                      for i in range(20, 30)])
    done = {"partition": rewound["partition"], "offset": {"kafka_offset": 30}}
    wait_until(lambda: worker.call("GET", "/connectors/ledger-pg/offsets")[1] == {
        "offsets": [done]}, DEADLINE, "the sink's offsets past all 30 records")
    assert rows(pg, topic) == [(i, f"l{i}", i / 4) for i in range(30)]
    assert worker.call("DELETE", "/connectors/ledger-pg")[0] == 204


def test_file_and_postgres_pipelines_are_exactly_once_through_kill9(worker, broker, pg, tmp_path):
    seed = int(os.environ.get("CONNECT_KILL_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    lines_topic = create_topic(broker.bootstrap, unique("lines"))
    source_file, sink_file = tmp_path / "in.txt", tmp_path / "out.txt"
    expected = append_lines(source_file, 0, 300)
    status, info = worker.call("POST", "/connectors", {"name": "file-source", "config": {
        "connector.class": "FileStreamSource", "file": str(source_file), "topic": lines_topic}})
    assert status == 201, info
    assert info == {"name": "file-source", "type": "source",
                    "tasks": [{"connector": "file-source", "task": 0}],
                    "config": {"connector.class": "FileStreamSource", "file": str(source_file),
                               "topic": lines_topic, "name": "file-source"}}
    status, info = worker.call("POST", "/connectors", {"name": "file-sink", "config": {
        "connector.class": SINK, "file": str(sink_file), "topics": lines_topic}})
    assert status == 201, info
    names = {"file-source", "file-sink"}

    total = 600
    if pg is not None:  # insert mode, two partitions, offsets in the table's transaction
        payments = create_topic(broker.bootstrap, unique("payments"), partitions=2)
        produce(broker.bootstrap, payments, [(i % 2, None, envelope(i, f"p{i}", i / 2), None)
                                             for i in range(total // 2)])
        status, _ = worker.call("PUT", "/connectors/payments-pg/config", {
            "connector.class": JDBC, "topics": payments, "connection.url": pg.url,
            "auto.create": "true", "pk.mode": "none"})
        assert status == 201
        names.add("payments-pg")
        kill_at = rng.randrange(1, total // 2)
        wait_until(lambda: len(rows(pg, payments)) >= kill_at, DEADLINE,
                   f"{kill_at} rows before the kill (seed {seed})")

    wait_until(lambda: lines_of(sink_file) == expected, DEADLINE, "the first lines in the sink")
    for name in names:
        assert task_state(worker, name) == "RUNNING"
    # each line counted once in each task's progress, however many batches and reports
    wait_until(lambda: (progress(worker, "file-source").get("records"),
                        progress(worker, "file-sink").get("records")) == (300, 300),
               DEADLINE, "300 records in each task's progress")
    assert "lag" not in progress(worker, "file-source")  # a file has no log end to lag behind

    expected += append_lines(source_file, 300, 300)
    if pg is not None:
        produce(broker.bootstrap, payments, [(i % 2, None, envelope(i, f"p{i}", i / 2), None)
                                             for i in range(total // 2, total)])
    worker.kill9()  # whatever the queries were doing with the new lines and records
    worker.start()
    status, listed = worker.call("GET", "/connectors")
    assert status == 200 and sorted(listed) == sorted(names)
    expected += append_lines(source_file, 600, 300)
    wait_until(lambda: len(lines_of(sink_file)) >= len(expected), DEADLINE,
               "every line in the sink after the restart")
    assert lines_of(sink_file) == expected
    records = consume_all(broker.bootstrap, lines_topic, 1, expect=len(expected))
    assert [value.decode() for _, _, _, value, _ in records] == expected
    if pg is not None:
        wait_until(lambda: len(rows(pg, payments)) >= total, DEADLINE,
                   f"{total} rows (seed {seed})")
        got = rows(pg, payments)
        assert got == [(i, f"p{i}", i / 2) for i in range(total)], f"seed {seed}"
    for name in names:
        assert task_state(worker, name) == "RUNNING"


@needs_postgres
def test_a_bad_url_is_refused_by_validation(worker):
    status, body = worker.call("PUT", "/connector-plugins/JdbcSinkConnector/config/validate", {
        "connector.class": "JdbcSinkConnector", "name": "x", "topics": "t",
        "connection.url": "jdbc:mysql://h/db", "delete.enabled": "true"})
    assert status == 200
    errors = {c["value"]["name"]: c["value"]["errors"] for c in body["configs"]}
    assert errors["connection.url"] and errors["delete.enabled"] == [
        "Deletes are only supported for pk.mode record_key"]
