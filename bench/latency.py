"""latency: produce-to-consume latency at a fixed rate, acks=1 and acks=all.

A producer in this process sends 100 B records at 10,000 records/s (released every millisecond,
so the pacing sleeps instead of spinning) into a fresh one-partition topic; a consumer in a
child process, assigned at offset 0 before the first send, polls them back. Each record's
value starts with the CLOCK_MONOTONIC time of its `send` call (the clock is shared by the
processes of one machine), so latency = receive time - send time. The first 0.5 s of each run
is warm-up and dropped; p50/p99/p99.9 are taken per run and the median over runs reported.

Pairs measured in the same run, each producer with its own library's consumer: confluent-kafka
and minilog's client into minilog, acks=1 and acks=all (one broker, so acks=all waits for
nothing more until replication exists: issue 8 asks for RF=3 then), plus confluent-kafka into
Tansu as the peer. Producers use linger.ms=1; consumers the default fetch settings (long poll
up to 500 ms, min 1 byte). With linger.ms=0 librdkafka sends every record in a request of its
own, 10,000 requests/s, more than one minilog broker (or Tansu) answers here: latency then grows
without bound, which measures a backlog, not a latency.
"""
import multiprocessing
import struct
import time

from . import cluster
from .report import Report, bars, main_args, median, percentile

RATE = 10_000
SIZE = 100
SECONDS, QUICK_SECONDS = 3.0, 1.0
WARMUP = 0.5
LINGER_MS = 1
_STAMP = struct.Struct(">q")


def _consume(kind, bootstrap, topic, expected, conn):
    """Child process: read `expected` records of `topic`, send back their latencies (ns)."""
    lat = []
    try:
        if kind == "confluent":
            import confluent_kafka
            c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "latency",
                                          "enable.auto.commit": False, "log_level": 3})
            c.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
            c.poll(0.2)
            conn.send("ready")
            deadline = time.monotonic() + 60
            while len(lat) < expected and time.monotonic() < deadline:
                m = c.poll(0.1)
                if m is not None and m.error() is None:
                    lat.append(time.monotonic_ns() - _STAMP.unpack_from(m.value())[0])
        else:
            from minilog.connector.client import Consumer, TopicPartition
            c = Consumer({"bootstrap.servers": bootstrap})
            tp = TopicPartition(topic, 0)
            c.assign([tp])
            c.seek(tp, 0)
            c.poll(0.2)
            conn.send("ready")
            deadline = time.monotonic() + 60
            while len(lat) < expected and time.monotonic() < deadline:
                records = c.poll(0.1)
                now = time.monotonic_ns()
                lat.extend(now - _STAMP.unpack_from(r.value)[0] for r in records)
        c.close()
    finally:
        conn.send(lat)
        conn.close()


def _producer(kind, bootstrap, acks):
    cfg = {"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": LINGER_MS}
    if kind == "confluent":
        import confluent_kafka
        p = confluent_kafka.Producer({**cfg, "log_level": 3})
        return p, p.produce, lambda: p.poll(0), lambda: p.flush(30)
    from minilog.connector.client import Producer
    p = Producer(cfg)
    return p, p.send, lambda: None, lambda: p.flush(30)


def _one_run(kind, bootstrap, acks, topic, seconds):
    """Latencies (ns) of the records after the warm-up, in one paced run."""
    cluster.create_topic(bootstrap, topic, 1)
    n = int(RATE * seconds)
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_consume, args=(kind, bootstrap, topic, n, child), daemon=True)
    proc.start()
    p, send, serve, flush = _producer(kind, bootstrap, acks)
    try:
        if not parent.poll(60) or parent.recv() != "ready":
            raise RuntimeError("latency consumer did not start")
        pad = bytes(SIZE - _STAMP.size)
        t0, sent = time.monotonic(), 0
        while sent < n:
            due = min(n, int((time.monotonic() - t0) * RATE) + 1)
            while sent < due:
                send(topic, _STAMP.pack(time.monotonic_ns()) + pad)
                sent += 1
            serve()
            time.sleep(max(0.0, t0 + sent / RATE - time.monotonic()))
        flush()
        if not parent.poll(60):
            raise RuntimeError("latency consumer sent no result")
        lat = parent.recv()
    finally:
        if kind == "minilog":
            p.close(10)
        proc.join(10)
        if proc.is_alive():
            proc.kill()
    if len(lat) < n:
        raise RuntimeError(f"{kind}: consumer got {len(lat)} of {n} records")
    return lat[int(WARMUP * RATE):]


def _cell(rep, broker, kind, acks, repeats, seconds):
    runs = []
    for r in range(repeats):
        lat = _one_run(kind, broker.bootstrap, acks, f"lat-{kind}-{acks}-{r}", seconds)
        runs.append({q: percentile(lat, q) / 1e6 for q in (50, 99, 99.9)})
    row = {"broker": broker.kind, "client": kind, "acks": acks, "rate": RATE,
           "p50": median([x[50] for x in runs]), "p99": median([x[99] for x in runs]),
           "p999": median([x[99.9] for x in runs]),
           "max_p99": max(x[99] for x in runs)}
    rep.log(f"{broker.kind:8} {kind:9} acks={acks:3}: p50 {row['p50']:.2f} ms, "
            f"p99 {row['p99']:.2f} ms, p99.9 {row['p999']:.2f} ms")
    return row


def run(args):
    quick = args.quick
    repeats = args.repeats or (1 if quick else 3)
    seconds = QUICK_SECONDS + WARMUP if quick else SECONDS + WARMUP
    peer = cluster.tansu_available()
    rep = Report("latency", quick, args.out, {"rate": RATE, "value_bytes": SIZE,
                                              "seconds_per_run": seconds, "warmup_s": WARMUP,
                                              "repeats": repeats, "linger.ms": LINGER_MS})
    rows = []
    with cluster.running("minilog") as b:
        for kind in ("confluent", "minilog"):
            for acks in ("1", "all"):
                rows.append(_cell(rep, b, kind, acks, repeats, seconds))
    if peer:
        with cluster.running("tansu") as b:
            rows.append(_cell(rep, b, "confluent", "1", repeats, seconds))
    rep.section(f"Produce-to-consume latency at {RATE:,} records/s of {SIZE} B (ms, median of "
                "per-run percentiles)", rows,
                [("broker", "broker"), ("client", "client"), ("acks", "acks"), ("p50", "p50"),
                 ("p99", "p99"), ("p999", "p99.9"), ("max_p99", "worst run p99")])
    got = {(r["broker"], r["client"], r["acks"]): r for r in rows}
    for acks in ("1", "all"):
        ours, conf = got[("minilog", "minilog", acks)], got[("minilog", "confluent", acks)]
        rep.ratio(f"latency p50 minilog-client/confluent acks={acks}", ours["p50"], conf["p50"])
        rep.ratio(f"latency p99 minilog-client/confluent acks={acks}", ours["p99"], conf["p99"])
    if peer:
        conf, tansu = got[("minilog", "confluent", "1")], got[("tansu", "confluent", "1")]
        rep.ratio("latency p50 minilog/tansu (confluent-kafka, acks=1)", conf["p50"], tansu["p50"])
        rep.ratio("latency p99 minilog/tansu (confluent-kafka, acks=1)", conf["p99"], tansu["p99"])
    labels = [f"{r['client']}\n→ {r['broker']}\nacks={r['acks']}" for r in rows]

    def draw(plt):
        bars(plt, labels, {q: [r[k] for r in rows] for q, k in
                           (("p50", "p50"), ("p99", "p99"), ("p99.9", "p999"))},
             "ms (log scale)", f"produce→consume latency at {RATE:,} records/s")
        plt.yscale("log")
    rep.plot("percentiles", draw)
    rep.finish()


def main(argv=None):
    run(main_args(argv))


if __name__ == "__main__":
    main()
