"""connect: `minilog connect`'s connectors against the script a user would write instead of
them, same run, one minilog broker and one PostgreSQL server.

- FileStreamSource -> topic: a file of 1,000,000 lines of 100 B (20,000 with --quick). The
  script reads the file and produces each line with confluent-kafka (acks=all,
  enable.idempotence), timed from its first line to its last acknowledgement. The connector
  (through the exactly-once sink) is created once the worker has started, Spark's Python
  processes included (connect/warmup.py), and timed from its task's RUNNING (its Spark query
  started: the JVM's and the query's start excluded, as the script's interpreter start is)
  until its task's progress counts every line.
- topic -> PostgreSQL: 200,000 records (20,000 with --quick) as JsonConverter writes them (a
  schema envelope, three fields) into `JdbcSinkConnector` (insert mode, auto.create). The
  script is what the sink promises, by hand: a confluent-kafka consumer, and per poll (up to
  10,000 records) one database transaction holding the rows (psycopg `executemany`) and the
  partition's offset, so it is exactly once too; timed from its first poll (its group join
  included) to its last commit. The connector is timed from its task's RUNNING until the
  table holds every record.

`--against REV` runs FileStreamSource -> topic with that revision's worker and this tree's,
alternately, each beside a run of the script (bench/revision.py).
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

from . import cluster, revision
from .postgres import PostgresServer, available
from .report import Report, main_args

RECORDS, QUICK_RECORDS = 200_000, 20_000
# The file's lines: a streaming connector's steady rate is what users compare, and 200,000
# lines were a second of the script's (its timing noise, the worker's once-a-second progress)
LINES, QUICK_LINES = 1_000_000, 20_000
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
    """`minilog connect` as a process of its own, and its REST API. `name` makes its group and
    state topics its own (a worker of another name restores none of its connectors); `env`
    is the process's environment (another revision's code: bench/revision.py)."""

    def __init__(self, bootstrap, work, name="bench", env=None):
        self.dir = Path(tempfile.mkdtemp(prefix="connect-bench-", dir=work))
        port = cluster.free_port()
        self.url = f"http://127.0.0.1:{port}"
        props = {"bootstrap.servers": bootstrap, "group.id": f"{name}-connect",
                 "config.storage.topic": f"{name}-configs",
                 "offset.storage.topic": f"{name}-offsets",
                 "status.storage.topic": f"{name}-status",
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
                start_new_session=True, env=env)
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
    lines = QUICK_LINES if args.quick else LINES
    rep = Report("connect", args.quick, args.out,
                 {"lines": lines, "line_bytes": LINE_BYTES, "records": n})
    work = tempfile.mkdtemp(prefix="connect-bench-")
    path = Path(work) / "in.txt"
    write_lines(path, lines)
    rows = []
    pg = PostgresServer().start()
    try:
        with cluster.running("minilog") as broker:
            bootstrap = broker.bootstrap
            for topic in ("script-lines", "lines", "script-rows", "rows"):
                cluster.create_topic(bootstrap, topic, 1)
            fill(bootstrap, "script-rows", n)
            fill(bootstrap, "rows", n)
            t_script = file_to_topic_script(bootstrap, path, "script-lines", lines)
            t_rows_script = topic_to_postgres_script(bootstrap, "script-rows", n, pg)
            worker = Worker(bootstrap, work)
            try:
                t_source = file_to_topic_connector(worker, path, "lines", lines)
                t_sink = topic_to_postgres_connector(worker, "rows", n, pg)
            finally:
                worker.stop()
    finally:
        pg.cleanup()
    for flow, size, script, connector in (
            ("FileStreamSource -> topic", lines, t_script, t_source),
            ("topic -> PostgreSQL", n, t_rows_script, t_sink)):
        rows.append({"flow": flow, "script": size / script, "connector": size / connector})
        rep.log(f"{flow}: script {size / script:,.0f}/s, connector {size / connector:,.0f}/s")
        rep.ratio(f"connector/script records/s, {flow}", size / connector, size / script)
    rep.section("Connect throughput (records/s)", rows,
                [("flow", "flow"), ("script", "confluent-kafka (+ psycopg) script"),
                 ("connector", "minilog connect")])
    rep.finish()


def compare(args):
    """`--against REV`: FileStreamSource -> topic in that revision's worker and in this tree's,
    alternately (which goes first alternates too), each beside a run of the script, one broker
    (this tree's) for all: the ratios of one sitting, with the load at each run."""
    n = QUICK_LINES if args.quick else LINES
    old_name = revision.describe(args.against)
    rep = Report("connect-compare", args.quick, args.out,
                 {"lines": n, "line_bytes": LINE_BYTES, "old": old_name, "new": "working tree"})
    work = tempfile.mkdtemp(prefix="connect-bench-")
    path = Path(work) / "in.txt"
    write_lines(path, n)
    rows = []
    with revision.checked_out(args.against) as old_env, cluster.running("minilog") as broker:
        trees = [(old_name, old_env), ("new", None)]
        for i in range(args.repeats or 2):
            for name, env in trees if i % 2 == 0 else trees[::-1]:
                tag = f"{'old' if env else 'new'}{i}"
                for topic in (f"script-{tag}", f"lines-{tag}"):
                    cluster.create_topic(broker.bootstrap, topic, 1)
                load = os.getloadavg()[0]
                t_script = file_to_topic_script(broker.bootstrap, path, f"script-{tag}", n)
                worker = Worker(broker.bootstrap, work, tag, env)
                try:
                    t_source = file_to_topic_connector(worker, path, f"lines-{tag}", n)
                    # its last micro-batch's rate: the steady one, the first batch's start aside
                    last = worker.task("bench-source")["progress"]["records_per_second"]
                finally:
                    worker.stop()
                rows.append({"tree": name, "load": f"{load:.1f} -> {os.getloadavg()[0]:.1f}",
                             "script": n / t_script, "connector": n / t_source,
                             "last": last, "ratio": t_script / t_source})
                rep.log(f"{name}: script {n / t_script:,.0f}/s, connector {n / t_source:,.0f}/s, "
                        f"ratio {t_script / t_source:.3f}, load {rows[-1]['load']}")
    for name, _ in trees:
        ratios = [r["ratio"] for r in rows if r["tree"] == name]
        rep.ratio(f"connector/script, FileStreamSource -> topic, {name} (best of "
                  f"{len(ratios)})", max(ratios), 1)
    rep.section(f"FileStreamSource -> topic, {old_name} against the working tree "
                "(lines/s, alternately)", rows,
                [("tree", "tree"), ("load", "load (1 min)"), ("script", "script"),
                 ("connector", "minilog connect"), ("last", "its last batch"),
                 ("ratio", "ratio")])
    rep.finish()


def _more(parser):
    parser.add_argument("--against", metavar="REV",
                        help="a git revision (or another checkout's path) whose connect worker "
                             "to measure against the working tree's, FileStreamSource only")


def main(argv=None):
    args = main_args(argv, _more)
    compare(args) if args.against else run(args)


if __name__ == "__main__":
    main()
