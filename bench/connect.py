"""connect: `minilog connect`'s connectors against the script a user would write instead of
them, same run, one minilog broker and one PostgreSQL server.

- FileStreamSource -> topic: a file of N lines of 100 B. The script reads the file and
  produces each line with confluent-kafka (acks=all, enable.idempotence), timed from its first
  line to its last acknowledgement. The connector (through the exactly-once sink) is created
  once the worker has started, Spark's Python processes included (connect/warmup.py), and timed
  from its task's RUNNING (its Spark query started: the JVM's and the query's start excluded,
  as the script's interpreter start is) until its task's progress counts all N.
- topic -> PostgreSQL: N records as JsonConverter writes them (a schema envelope, three
  fields) into `JdbcSinkConnector` (insert mode, auto.create). The script is what the sink
  promises, by hand: a confluent-kafka consumer, and per poll (up to 10,000 records) one
  database transaction holding the rows (psycopg `executemany`) and the partition's offset, so
  it is exactly once too; timed from its first poll (its group join included) to its last
  commit. The connector is timed from its task's RUNNING until the table holds N rows.
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from . import cluster
from .postgres import PostgresServer, available
from .report import Report, main_args

RECORDS, QUICK_RECORDS = 200_000, 20_000
LINE_BYTES = 100
START_TIMEOUT_S = 300
SCHEMA = {"type": "struct", "optional": False, "fields": [
    {"field": "id", "type": "int64", "optional": False},
    {"field": "name", "type": "string", "optional": True},
    {"field": "amount", "type": "float64", "optional": True}]}


def _ck(kind, **cfg):
    import confluent_kafka
    return getattr(confluent_kafka, kind)({"log_level": 3, **cfg})


def _wait(condition, what, timeout=START_TIMEOUT_S, step=0.05):
    end = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > end:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(step)


def write_lines(path, n):
    with open(path, "w") as f:
        for i in range(n):
            f.write(f"{i:08d} " + "x" * (LINE_BYTES - 10) + "\n")


def envelope(i):
    return json.dumps({"schema": SCHEMA,
                       "payload": {"id": i, "name": f"n{i}", "amount": i / 2}}).encode()


def fill(bootstrap, topic, n):
    p = _ck("Producer", **{"bootstrap.servers": bootstrap, "linger.ms": 5,
                           "queue.buffering.max.messages": 1_000_000})
    for i in range(n):
        while True:
            try:
                p.produce(topic, envelope(i))
                break
            except BufferError:
                p.poll(0.005)
    if p.flush(120):
        raise RuntimeError("records left undelivered")


def file_to_topic_script(bootstrap, path, topic, n):
    """Seconds for the script to produce the file's lines, every one acknowledged."""
    p = _ck("Producer", **{"bootstrap.servers": bootstrap, "acks": "all",
                           "enable.idempotence": True, "linger.ms": 5,
                           "queue.buffering.max.messages": 1_000_000})
    t0 = time.perf_counter()
    with open(path, "rb") as f:
        for line in f:
            while True:
                try:
                    p.produce(topic, line.rstrip(b"\n"))
                    break
                except BufferError:
                    p.poll(0.005)
    if p.flush(120):
        raise RuntimeError("the script left lines undelivered")
    return time.perf_counter() - t0


def topic_to_postgres_script(bootstrap, topic, n, pg):
    """Seconds for the script to write `n` records into a table, exactly once."""
    import psycopg
    table = f"script_{topic}"
    with psycopg.connect(**pg.conninfo()) as conn:
        conn.execute(f'CREATE TABLE "{table}" (id BIGINT NOT NULL, name TEXT, '
                     f'amount DOUBLE PRECISION)')
        conn.execute('CREATE TABLE IF NOT EXISTS script_offsets (topic TEXT, partition INT, '
                     '"offset" BIGINT, PRIMARY KEY (topic, partition))')
    c = _ck("Consumer", **{"bootstrap.servers": bootstrap, "group.id": f"script-{topic}",
                           "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    written, t0 = 0, time.perf_counter()
    try:
        with psycopg.connect(**pg.conninfo()) as conn:
            while written < n:
                batch = [m for m in c.consume(10_000, 0.5) if m.error() is None]
                if not batch:
                    continue
                rows = []
                for m in batch:
                    payload = json.loads(m.value())["payload"]
                    rows.append((payload["id"], payload["name"], payload["amount"]))
                with conn.transaction(), conn.cursor() as cur:
                    cur.executemany(f'INSERT INTO "{table}" VALUES (%s, %s, %s)', rows)
                    last = batch[-1]
                    cur.execute('INSERT INTO script_offsets VALUES (%s, %s, %s) ON CONFLICT '
                                '(topic, partition) DO UPDATE SET "offset" = EXCLUDED."offset"',
                                (topic, last.partition(), last.offset()))
                written += len(batch)
        return time.perf_counter() - t0
    finally:
        c.close()


class Worker:
    """`minilog connect` as a process of its own, and its REST API."""

    def __init__(self, bootstrap, work):
        self.dir = Path(tempfile.mkdtemp(prefix="connect-bench-", dir=work))
        port = cluster.free_port()
        self.url = f"http://127.0.0.1:{port}"
        props = {"bootstrap.servers": bootstrap, "group.id": "bench-connect",
                 "config.storage.topic": "bench-configs", "offset.storage.topic": "bench-offsets",
                 "status.storage.topic": "bench-status",
                 **{f"{k}.storage.replication.factor": "1"
                    for k in ("config", "offset", "status")},
                 "key.converter": "org.apache.kafka.connect.storage.StringConverter",
                 "value.converter": "org.apache.kafka.connect.storage.StringConverter",
                 "listeners": self.url,
                 "spark.sql.streaming.checkpointLocation": str(self.dir / "checkpoints")}
        (self.dir / "worker.properties").write_text(
            "".join(f"{k}={v}\n" for k, v in props.items()))
        self.log = self.dir / "worker.log"
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "minilog.connector.cli", "connect",
                 str(self.dir / "worker.properties")], stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True)
        _wait(self._answers, f"the worker at {self.url}", step=0.5)
        # the worker's start ends with Spark's Python processes started (connect/warmup.py):
        # part of its start, as the script's interpreter start is part of its own
        _wait(self._warm, "the worker's Python processes", step=0.2)

    def _warm(self):
        text = self.log.read_text(errors="replace")
        return "Spark's Python processes started" in text or "ahead of the connectors" in text

    def _answers(self):
        if self.proc.poll() is not None:
            raise RuntimeError(f"the worker exited: {self.log.read_text()[-2000:]}")
        try:
            return self.call("GET", "/") is not None
        except OSError:
            return False

    def call(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as response:
            text = response.read()
        return json.loads(text) if text else None

    def task(self, name):
        tasks = self.call("GET", f"/connectors/{name}/status")["tasks"]
        return tasks[0] if tasks else {}

    def records(self, name):
        return (self.task(name).get("progress") or {}).get("records", 0)

    def wait_running(self, name):
        def running():
            state = self.task(name).get("state")
            if state == "FAILED":
                raise RuntimeError(f"{name} FAILED: {self.task(name).get('trace')}")
            return state == "RUNNING"
        _wait(running, f"{name} RUNNING", step=0.02)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(90)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def file_to_topic_connector(worker, path, topic, n):
    worker.call("PUT", "/connectors/bench-source/config", {
        "connector.class": "FileStreamSource", "file": str(path), "topic": topic})
    worker.wait_running("bench-source")
    t0 = time.perf_counter()
    _wait(lambda: worker.records("bench-source") >= n, "the source's progress", step=0.1)
    took = time.perf_counter() - t0
    print(f"   source task: {worker.task('bench-source').get('progress')}", flush=True)
    return took


def topic_to_postgres_connector(worker, topic, n, pg):
    import psycopg

    def count():
        try:
            return pg.query(f'SELECT count(*) FROM "{topic}"')[0][0]
        except psycopg.errors.UndefinedTable:
            return 0
    worker.call("PUT", "/connectors/bench-jdbc/config", {
        "connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector", "topics": topic,
        "connection.url": pg.url, "auto.create": "true", "pk.mode": "none",
        "insert.mode": "insert"})
    worker.wait_running("bench-jdbc")
    t0 = time.perf_counter()
    _wait(lambda: count() >= n, "the sink's rows", step=0.1)
    return time.perf_counter() - t0


def run(args):
    if not available():
        raise SystemExit("connect: PostgreSQL's initdb/postgres are not installed "
                         "(apt-get install postgresql)")
    n = QUICK_RECORDS if args.quick else RECORDS
    rep = Report("connect", args.quick, args.out, {"records": n, "line_bytes": LINE_BYTES})
    work = tempfile.mkdtemp(prefix="connect-bench-")
    path = Path(work) / "in.txt"
    write_lines(path, n)
    rows = []
    pg = PostgresServer().start()
    try:
        with cluster.running("minilog") as broker:
            bootstrap = broker.bootstrap
            for topic in ("script-lines", "lines", "script-rows", "rows"):
                cluster.create_topic(bootstrap, topic, 1)
            fill(bootstrap, "script-rows", n)
            fill(bootstrap, "rows", n)
            t_script = file_to_topic_script(bootstrap, path, "script-lines", n)
            t_rows_script = topic_to_postgres_script(bootstrap, "script-rows", n, pg)
            worker = Worker(bootstrap, work)
            try:
                t_source = file_to_topic_connector(worker, path, "lines", n)
                t_sink = topic_to_postgres_connector(worker, "rows", n, pg)
            finally:
                worker.stop()
    finally:
        pg.cleanup()
    for flow, script, connector in (("FileStreamSource -> topic", t_script, t_source),
                                    ("topic -> PostgreSQL", t_rows_script, t_sink)):
        rows.append({"flow": flow, "script": n / script, "connector": n / connector})
        rep.log(f"{flow}: script {n / script:,.0f}/s, connector {n / connector:,.0f}/s")
        rep.ratio(f"connector/script records/s, {flow}", n / connector, n / script)
    rep.section("Connect throughput (records/s)", rows,
                [("flow", "flow"), ("script", "confluent-kafka (+ psycopg) script"),
                 ("connector", "minilog connect")])
    rep.finish()


def main(argv=None):
    run(main_args(argv))


if __name__ == "__main__":
    main()
