"""mirror: `minilog mirror` (MirrorMaker 2 on Spark, exactly-once) against the copy a user
would write by hand, same run, same two brokers (A and B, one minilog broker each).

- Throughput: N records of 100 B and of 1 KB already on A (3 partitions) copied to B. The
  baseline is a confluent-kafka consume-produce loop (a consumer on A, a producer on B with
  acks=all and enable.idempotence: at-least-once, no offset translation), key, value, headers,
  timestamp and partition copied as the mirror copies them; timed from its first poll to its
  last acknowledgement. The mirror is timed from the first record's arrival on B (its Spark
  start excluded) to its progress on A (committed after each micro-batch is committed on B)
  covering all N: within one trigger interval (0.5 s) of the true end.
- Lag: records written to A at a steady rate (RATE/s for LAG_SECONDS), each read on B
  (read_committed) and its age taken against its timestamp (set on A, kept by both copies):
  p50/p99 for the loop and for the mirror.
"""
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from . import cluster
from .report import Report, main_args, median, percentile

SIZES = (100, 1000)
RECORDS, QUICK_RECORDS = {100: 500_000, 1000: 200_000}, {100: 10_000, 1000: 5_000}
PARTITIONS = 3
RATE, LAG_SECONDS, QUICK_LAG_SECONDS = 10_000, 30, 5
START_TIMEOUT_S = 300


def _ck(kind, **cfg):
    import confluent_kafka
    return getattr(confluent_kafka, kind)({"log_level": 3, **cfg})


def fill(bootstrap, topic, size, n):
    p = _ck("Producer", **{"bootstrap.servers": bootstrap, "linger.ms": 5,
                           "batch.size": 1_000_000, "queue.buffering.max.messages": 1_000_000})
    value = os.urandom(size)
    for i in range(n):
        while True:
            try:
                p.produce(topic, value, str(i).encode(), partition=i % PARTITIONS,
                          headers=[("i", b"x")])
                break
            except BufferError:
                p.poll(0.005)
    if p.flush(120):
        raise RuntimeError("records left undelivered on A")


def copy_loop(a, b, topic, dest, n, stop=None):
    """The hand-written copy: seconds to copy `n` records (or until `stop` is set)."""
    c = _ck("Consumer", **{"bootstrap.servers": a, "group.id": f"loop-{dest}",
                           "auto.offset.reset": "earliest", "enable.auto.commit": True})
    p = _ck("Producer", **{"bootstrap.servers": b, "acks": "all", "enable.idempotence": True,
                           "linger.ms": 5, "queue.buffering.max.messages": 1_000_000})
    c.subscribe([topic])
    copied, t0 = 0, time.perf_counter()
    try:
        while (stop is None and copied < n) or (stop is not None and not stop.is_set()):
            for m in c.consume(1000, 0.1):
                if m.error() is not None:
                    continue
                while True:
                    try:
                        p.produce(dest, m.value(), m.key(), partition=m.partition(),
                                  timestamp=m.timestamp()[1], headers=m.headers())
                        break
                    except BufferError:
                        p.poll(0.005)
                copied += 1
            p.poll(0)
        if p.flush(120):
            raise RuntimeError("the loop left records undelivered on B")
        return time.perf_counter() - t0
    finally:
        c.close()


class Mirror:
    """`minilog mirror` on A->B for the topics `topics`, as a process of its own."""

    def __init__(self, a, b, topics, work):
        self.dir = Path(tempfile.mkdtemp(prefix="mirror-bench-", dir=work))
        props = {"clusters": "A, B", "A.bootstrap.servers": a, "B.bootstrap.servers": b,
                 "A->B.enabled": "true", "A->B.topics": topics, "replication.factor": "1",
                 "offset-syncs.topic.replication.factor": "1",
                 "checkpoints.topic.replication.factor": "1",
                 "heartbeats.topic.replication.factor": "1",
                 "spark.sql.streaming.checkpointLocation": str(self.dir / "checkpoints")}
        (self.dir / "mm2.properties").write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        self.log = self.dir / "mirror.log"
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "minilog.connector.cli", "mirror",
                 str(self.dir / "mm2.properties")], stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True)
        end = time.monotonic() + START_TIMEOUT_S
        while b"mirroring A->B" not in self.log.read_bytes():
            if self.proc.poll() is not None or time.monotonic() > end:
                raise RuntimeError(f"the mirror did not start: {self.log.read_text()[-2000:]}")
            time.sleep(0.2)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # the queries stop, Spark stops
            try:
                self.proc.wait(90)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def _offsets(admin, topic, group=None):
    from minilog.connector.client import TopicPartition
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    if group is None:
        return sum(o.offset for o in admin.list_offsets({tp: "latest" for tp in tps}).values())
    got = admin.list_group_offsets(group, tps)
    return sum(om.offset for om in got.values() if om is not None)


def mirror_throughput(a, b, topic, n, work):
    """Seconds from the first record on B to the mirror's progress covering all `n`."""
    from minilog.connector.client import AdminClient
    with AdminClient({"bootstrap.servers": a}) as admin_a, \
            AdminClient({"bootstrap.servers": b}) as admin_b:
        mirror = Mirror(a, b, topic, work)
        try:
            while True:
                try:
                    if _offsets(admin_b, f"A.{topic}") > 0:
                        break
                except Exception:  # noqa: BLE001 - the copy's topic is not there yet
                    pass
                time.sleep(0.02)
            t0 = time.perf_counter()
            while _offsets(admin_a, topic, "minilog-mirror-A-B") < n:
                time.sleep(0.05)
            return time.perf_counter() - t0
        finally:
            mirror.stop()


def ages(b, topic, n, stop_at):
    """Age (ms) of each of `n` records as a read_committed consumer on B gets them."""
    c = _ck("Consumer", **{"bootstrap.servers": b, "group.id": f"ages-{topic}",
                           "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    out = []
    try:
        while len(out) < n and time.monotonic() < stop_at:
            for m in c.consume(1000, 0.1):
                if m.error() is None:
                    out.append(time.time() * 1000 - m.timestamp()[1])
    finally:
        c.close()
    return out


def steady(a, topic, seconds):
    """RATE records/s of 100 B into `topic` on A for `seconds`; how many."""
    p = _ck("Producer", **{"bootstrap.servers": a, "linger.ms": 1})
    value, sent, t0 = os.urandom(100), 0, time.monotonic()
    while time.monotonic() - t0 < seconds:
        due = int((time.monotonic() - t0) * RATE)
        while sent < due:
            p.produce(topic, value, partition=sent % PARTITIONS)
            sent += 1
        p.poll(0)
        time.sleep(0.001)
    p.flush(60)
    return sent


def lag(a, b, topic, dest, seconds, copier):
    """Ages of the records written at RATE while `copier(stop)` copies `topic` to `dest`."""
    stop = threading.Event()
    thread = threading.Thread(target=copier, args=(stop,), daemon=True)
    thread.start()
    got: list = []
    reader = threading.Thread(target=lambda: got.extend(
        ages(b, dest, int(seconds * RATE), time.monotonic() + seconds + 60)))
    reader.start()
    sent = steady(a, topic, seconds)
    reader.join(seconds + 120)
    stop.set()
    thread.join(60)
    return got, sent


def run(args):
    quick = args.quick
    records = QUICK_RECORDS if quick else RECORDS
    seconds = QUICK_LAG_SECONDS if quick else LAG_SECONDS
    rep = Report("mirror", quick, args.out, {"records": records, "partitions": PARTITIONS,
                                             "rate": RATE, "lag_seconds": seconds})
    rows, lag_rows = [], []
    work = tempfile.mkdtemp(prefix="mirror-bench-")
    with cluster.running("minilog") as a, cluster.running("minilog") as b:
        for size in SIZES:
            n = records[size]
            for name in (f"loop-{size}", f"m-{size}"):
                cluster.create_topic(a.bootstrap, name, PARTITIONS)
                fill(a.bootstrap, name, size, n)
            cluster.create_topic(b.bootstrap, f"copy-{size}", PARTITIONS)
            t_loop = copy_loop(a.bootstrap, b.bootstrap, f"loop-{size}", f"copy-{size}", n)
            t_mirror = mirror_throughput(a.bootstrap, b.bootstrap, f"m-{size}", n, work)
            rows.append({"size": size, "records": n, "loop_s": n / t_loop,
                         "mirror_s": n / t_mirror})
            rep.log(f"{size} B: loop {n / t_loop:,.0f}/s, mirror {n / t_mirror:,.0f}/s")
            rep.ratio(f"mirror/loop records/s, {size} B", n / t_mirror, n / t_loop)
        cluster.create_topic(a.bootstrap, "lag-loop", PARTITIONS)
        cluster.create_topic(b.bootstrap, "lag-loop-copy", PARTITIONS)
        loop_ages, _ = lag(a.bootstrap, b.bootstrap, "lag-loop", "lag-loop-copy", seconds,
                           lambda stop: copy_loop(a.bootstrap, b.bootstrap, "lag-loop",
                                                  "lag-loop-copy", 0, stop))
        cluster.create_topic(a.bootstrap, "lag", PARTITIONS)
        mirror = Mirror(a.bootstrap, b.bootstrap, "lag", work)
        try:
            mirror_ages, _ = lag(a.bootstrap, b.bootstrap, "lag", "A.lag", seconds,
                                 lambda stop: stop.wait())
        finally:
            mirror.stop()
        for name, got in (("loop", loop_ages), ("mirror", mirror_ages)):
            if not got:
                raise RuntimeError(f"no record of the steady run reached B through the {name}")
            lag_rows.append({"copy": name, "records": len(got), "p50_ms": median(got),
                             "p99_ms": percentile(got, 99)})
            rep.log(f"lag {name}: p50 {median(got):,.0f} ms, p99 {percentile(got, 99):,.0f} ms")
        rep.ratio("mirror/loop lag p50", median(mirror_ages), median(loop_ages),
                  "the mirror commits a transaction per micro-batch (0.5 s trigger)")
    rep.section("Copy throughput A -> B (records/s)", rows,
                [("size", "bytes"), ("records", "records"), ("loop_s", "confluent loop"),
                 ("mirror_s", "minilog mirror")])
    rep.section(f"Replication lag at {RATE:,} records/s of 100 B (ms)", lag_rows,
                [("copy", "copy"), ("records", "records"), ("p50_ms", "p50"),
                 ("p99_ms", "p99")])
    rep.finish()


def main(argv=None):
    run(main_args(argv))


if __name__ == "__main__":
    main()
