"""The JDBC sink's settings into a real PostgreSQL server (Debian's postgres, psycopg), fed by a
real broker, run by a `minilog connect` worker process: upserts and deletes by record key, and
insert mode exactly once through kill -9 of the worker at a seeded moment."""
import json
import os
import random

import pytest
from connecttools import ConnectWorker
from postgres import PostgresServer, available
from sparktools import create_topic, produce, unique
from waiting import wait_until

pytestmark = [pytest.mark.timeout(600),
              pytest.mark.skipif(not available(), reason="PostgreSQL's initdb/postgres missing")]
psycopg = pytest.importorskip("psycopg")

JDBC = "io.confluent.connect.jdbc.JdbcSinkConnector"
DEADLINE = 240.0
SCHEMA = {"type": "struct", "optional": False, "fields": [
    {"field": "id", "type": "int64", "optional": False},
    {"field": "name", "type": "string", "optional": True},
    {"field": "amount", "type": "float64", "optional": True}]}


def envelope(id_, name, amount):
    return json.dumps({"schema": SCHEMA,
                       "payload": {"id": id_, "name": name, "amount": amount}}).encode()


@pytest.fixture(scope="module")
def pg():
    server = PostgresServer().start()
    yield server
    server.cleanup()


@pytest.fixture(scope="module")
def worker(broker, tmp_path_factory):
    w = ConnectWorker(tmp_path_factory.mktemp("connect-pg"), broker.bootstrap).start()
    yield w
    w.stop()


def rows(pg, table):
    try:
        return pg.query(f'SELECT id, name, amount FROM "{table}" ORDER BY id')
    except psycopg.errors.UndefinedTable:
        return []


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


def test_insert_mode_is_exactly_once_through_kill9(worker, broker, pg):
    seed = int(os.environ.get("CONNECT_KILL_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    topic = create_topic(broker.bootstrap, unique("payments"), partitions=2)
    total = 600
    produce(broker.bootstrap, topic, [(i % 2, None, envelope(i, f"p{i}", i / 2), None)
                                      for i in range(total // 2)])
    status, _ = worker.call("PUT", "/connectors/payments-pg/config", {
        "connector.class": JDBC, "topics": topic, "connection.url": pg.url,
        "auto.create": "true", "pk.mode": "none"})
    assert status == 201
    kill_at = rng.randrange(1, total // 2)
    wait_until(lambda: len(rows(pg, topic)) >= kill_at, DEADLINE,
               f"{kill_at} rows before the kill (seed {seed})")
    produce(broker.bootstrap, topic, [(i % 2, None, envelope(i, f"p{i}", i / 2), None)
                                      for i in range(total // 2, total)])
    worker.kill9()
    worker.start()
    wait_until(lambda: len(rows(pg, topic)) >= total, DEADLINE, f"{total} rows (seed {seed})")
    got = rows(pg, topic)
    assert got == [(i, f"p{i}", i / 2) for i in range(total)], f"seed {seed}"


def test_a_bad_url_is_refused_by_validation(worker):
    status, body = worker.call("PUT", "/connector-plugins/JdbcSinkConnector/config/validate", {
        "connector.class": "JdbcSinkConnector", "name": "x", "topics": "t",
        "connection.url": "jdbc:mysql://h/db", "delete.enabled": "true"})
    assert status == 200
    errors = {c["value"]["name"]: c["value"]["errors"] for c in body["configs"]}
    assert errors["connection.url"] and errors["delete.enabled"] == [
        "Deletes are only supported for pk.mode record_key"]
