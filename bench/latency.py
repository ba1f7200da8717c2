"""latency: produce-to-consume latency at fixed rates, one broker (RF=1) and three (RF=3).

A producer in this process sends 100 B records at a fixed rate (10,000 and 40,000 records/s,
released every millisecond, so the pacing sleeps instead of spinning) into a fresh
one-partition topic; a consumer in a child process, assigned at offset 0 before the first send,
polls them back. Each record's value starts with the CLOCK_MONOTONIC time of its `send` call
(the clock is shared by the processes of one machine), so latency = receive time - send time.
The first 0.5 s of each run is warm-up and dropped; p50/p99/p99.9 are taken per run and the
median over runs reported. `--quick` proves the cells run and the ratios print, no more: one run
of 0.1 s warm-up and 0.25 s measured per cell, a quarter of the records, and the RF=1
topics on the three-broker cluster too (one broker start less).

Where: one broker with RF=1 topics, and a cluster as `minilog cluster up` starts it (three
brokers, each a voter of the controller quorum) with RF=3 topics and min.insync.replicas=2,
so acks=all waits for the followers' fetches. Who: confluent-kafka and minilog's client, each
read by its own library's consumer, acks=1 and acks=all, plus confluent-kafka into Tansu as
the peer. Producers use linger.ms=0 (`--linger`) as the regression report measured them;
consumers the default fetch settings (long poll up to 500 ms, min 1 byte).

`--against REV` (a git revision, or the path of another checkout) measures that revision's
broker against the working tree's in the same sitting instead (bench/revision.py): both
single brokers, then both clusters, run at once, and every repeat runs each cell on both,
alternating which goes first (old-new, new-old, ...), so a neighbour's burst of load hits
both sides alike; printed as new/old ratios. Only confluent-kafka with acks=all is measured
there: the clients are this tree's on both sides.
"""
import contextlib
import multiprocessing
import os
import struct
import time

from . import cluster, revision
from .report import Report, bars, main_args, median, percentile

RATES = (10_000, 40_000)
SIZE = 100
SECONDS, QUICK_SECONDS = 3.0, 0.25
WARMUP, QUICK_WARMUP = 0.5, 0.1
LINGER_MS = 0
MIN_INSYNC = 2  # with RF=3: `minilog cluster up`'s and the regression report's setting
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


def _producer(kind, bootstrap, acks, linger_ms):
    cfg = {"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": linger_ms}
    if kind == "confluent":
        import confluent_kafka
        # room for a backlog of a whole run: a busy broker is measured, not a BufferError
        p = confluent_kafka.Producer({**cfg, "log_level": 3,
                                      "queue.buffering.max.messages": 1_000_000})
        return p, p.produce, lambda: p.poll(0), lambda: p.flush(30)
    from minilog.connector.client import Producer
    p = Producer(cfg)
    return p, p.send, lambda: None, lambda: p.flush(30)


def _one_run(kind, target, acks, topic, rate, seconds, linger_ms, warmup):
    """Latencies (ns) of the records after the warm-up, in one paced run."""
    config = {"min.insync.replicas": MIN_INSYNC} if target["rf"] > 1 else None
    cluster.create_topic(target["bootstrap"], topic, 1, config, target["rf"])
    n = int(rate * seconds)
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_consume, args=(kind, target["bootstrap"], topic, n, child),
                       daemon=True)
    proc.start()
    p, send, serve, flush = _producer(kind, target["bootstrap"], acks, linger_ms)
    try:
        if not parent.poll(60) or parent.recv() != "ready":
            raise RuntimeError("latency consumer did not start")
        pad = bytes(SIZE - _STAMP.size)
        t0, sent = time.monotonic(), 0
        while sent < n:
            due = min(n, int((time.monotonic() - t0) * rate) + 1)
            while sent < due:
                send(topic, _STAMP.pack(time.monotonic_ns()) + pad)
                sent += 1
            serve()
            time.sleep(max(0.0, t0 + sent / rate - time.monotonic()))
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
    return lat[int(warmup * rate):]


def _percentiles(lat):
    return {q: percentile(lat, q) / 1e6 for q in (50, 99, 99.9)}


def _row(target, kind, acks, rate, runs):
    return {"broker": target["broker"], "rf": target["rf"], "client": kind, "acks": acks,
            "rate": rate, "p50": median([x[50] for x in runs]),
            "p99": median([x[99] for x in runs]), "p999": median([x[99.9] for x in runs]),
            "max_p99": max(x[99] for x in runs)}


def _log_row(rep, row):
    rep.log(f"{row['broker']:8} RF={row['rf']} {row['client']:9} acks={row['acks']:3} "
            f"{row['rate']:>6,}/s: p50 {row['p50']:.2f} ms, p99 {row['p99']:.2f} ms, "
            f"p99.9 {row['p999']:.2f} ms")


def _cell(rep, target, kind, acks, rate, args):
    topic = f"lat-{kind}-{acks}-rf{target['rf']}-{rate}"
    runs = [_percentiles(_one_run(kind, target, acks, f"{topic}-{r}", rate, args.seconds,
                                  args.linger, args.warmup))
            for r in range(args.repeats)]
    row = _row(target, kind, acks, rate, runs)
    _log_row(rep, row)
    return row


def _load():
    return "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


COLUMNS = [("broker", "broker"), ("rf", "RF"), ("client", "client"), ("acks", "acks"),
           ("rate", "records/s"), ("p50", "p50"), ("p99", "p99"), ("p999", "p99.9"),
           ("max_p99", "worst run p99")]


# (client, acks, rate) of each cell, by the topics' replication factor
CELLS = {1: [(kind, acks, RATES[0]) for kind in ("confluent", "minilog") for acks in ("1", "all")]
         + [("confluent", "all", RATES[1])],
         3: [(kind, "all", RATES[0]) for kind in ("confluent", "minilog")]
         + [("confluent", "all", RATES[1])]}


def _layouts(quick):
    """[(replication factors, "single" or "cluster")]: RF=1 topics on one broker, RF=3 ones on
    a three-broker cluster; --quick puts both on the cluster, one broker start less (its
    figures mean nothing)."""
    return [((1, 3), "cluster")] if quick else [((1,), "single"), ((3,), "cluster")]


def _start(layout, env=None):
    return cluster.running("minilog", env=env) if layout == "single" else \
        cluster.running_cluster(3, env=env)


def run(args):
    rep = Report("latency", args.quick, args.out, _params(args))
    rep.log(f"{_load()} at the start")
    rows = []
    for rfs, layout in _layouts(args.quick):
        with _start(layout) as b:
            for rf in rfs:
                target = {"broker": "minilog", "rf": rf, "bootstrap": b.bootstrap}
                rows += [_cell(rep, target, kind, acks, rate, args)
                         for kind, acks, rate in CELLS[rf]]
    peer = cluster.tansu_available()
    if peer:
        with cluster.running("tansu") as b:
            tansu = {"broker": "tansu", "rf": 1, "bootstrap": b.bootstrap}
            rows.append(_cell(rep, tansu, "confluent", "1", RATES[0], args))
    rep.log(f"{_load()} at the end")
    rep.section("Produce-to-consume latency of 100 B records (ms, median of per-run "
                "percentiles)", rows, COLUMNS)
    got = {(r["broker"], r["rf"], r["client"], r["acks"], r["rate"]): r for r in rows}
    for acks in ("1", "all"):
        ours = got[("minilog", 1, "minilog", acks, RATES[0])]
        conf = got[("minilog", 1, "confluent", acks, RATES[0])]
        rep.ratio(f"latency p50 minilog-client/confluent acks={acks}", ours["p50"], conf["p50"])
        rep.ratio(f"latency p99 minilog-client/confluent acks={acks}", ours["p99"], conf["p99"])
    for rate in RATES:
        rf1 = got[("minilog", 1, "confluent", "all", rate)]
        rf3 = got[("minilog", 3, "confluent", "all", rate)]
        for q in ("p50", "p99"):
            rep.ratio(f"latency {q} RF=3/RF=1 confluent acks=all {rate}/s", rf3[q], rf1[q])
    if peer:
        conf = got[("minilog", 1, "confluent", "1", RATES[0])]
        tansu = got[("tansu", 1, "confluent", "1", RATES[0])]
        rep.ratio("latency p50 minilog/tansu (confluent-kafka, acks=1)", conf["p50"], tansu["p50"])
        rep.ratio("latency p99 minilog/tansu (confluent-kafka, acks=1)", conf["p99"], tansu["p99"])
    _plot(rep, rows, [f"{r['client']}\n→ {r['broker']} RF={r['rf']}\nacks={r['acks']} "
                      f"{r['rate'] // 1000}k/s" for r in rows], "percentiles")
    rep.finish()


def _plot(rep, rows, labels, stem):
    def draw(plt):
        bars(plt, labels, {q: [r[k] for r in rows] for q, k in
                           (("p50", "p50"), ("p99", "p99"), ("p99.9", "p999"))},
             "ms (log scale)", "produce→consume latency")
        plt.yscale("log")
        plt.xticks(fontsize=6)
    rep.plot(stem, draw)


@contextlib.contextmanager
def _pair(layout, old_env, old_name):
    """Both sides of a comparison at once: [(old name, bootstrap), ("new", bootstrap)]."""
    with contextlib.ExitStack() as stack:
        yield [(name, stack.enter_context(_start(layout, env)).bootstrap)
               for name, env in ((old_name, old_env), ("new", None))]


def _compare_rf(rep, pair, args):
    """Rows of both sides of `pair` at each rate, every repeat alternating who goes first."""
    rf, rows = pair[0]["rf"], []
    runs = {(t["broker"], rate): [] for t in pair for rate in RATES}
    for r in range(args.repeats):
        for rate in RATES:
            for t in (pair if r % 2 == 0 else pair[::-1]):
                lat = _one_run("confluent", t, "all", f"lat-{t['broker']}-rf{rf}-{rate}-{r}",
                               rate, args.seconds, args.linger, args.warmup)
                runs[(t["broker"], rate)].append(_percentiles(lat))
    for rate in RATES:
        for t in pair:
            rows.append(_row(t, "confluent", "all", rate, runs[(t["broker"], rate)]))
            _log_row(rep, rows[-1])
    return rows


def compare(args):
    """`--against REV`: that revision's broker and this tree's, interleaved in one sitting."""
    old_name = revision.describe(args.against)
    rep = Report("latency-compare", args.quick, args.out,
                 {**_params(args), "old": old_name, "new": "working tree"})
    rep.log(f"{_load()} at the start")
    rows = []
    with revision.checked_out(args.against) as env:
        rep.log(f"old broker: {revision.broker_path(env)}; new broker: "
                f"{revision.broker_path(dict(os.environ))}")
        for rfs, layout in _layouts(args.quick):
            with _pair(layout, env, old_name) as bootstraps:
                for rf in rfs:
                    pair = [{"broker": name, "rf": rf, "bootstrap": bootstrap}
                            for name, bootstrap in bootstraps]
                    rows += _compare_rf(rep, pair, args)
                    rep.log(f"{_load()} after RF={rf}")
    rep.section(f"Produce-to-consume latency, {old_name} vs the working tree, confluent-kafka "
                "acks=all (ms, median of per-run percentiles)", rows, COLUMNS)
    got = {(r["broker"], r["rf"], r["rate"]): r for r in rows}
    for rf in (1, 3):
        for rate in RATES:
            old, new = got[(old_name, rf, rate)], got[("new", rf, rate)]
            for q in ("p50", "p99"):
                rep.ratio(f"latency {q} new/{old_name} RF={rf} {rate}/s", new[q], old[q])
    _plot(rep, rows, [f"{r['broker']}\nRF={r['rf']}\n{r['rate'] // 1000}k/s" for r in rows],
          "compare")
    rep.finish()


def _params(args):
    return {"rates": "/".join(str(r) for r in RATES), "value_bytes": SIZE,
            "seconds_per_run": args.seconds, "warmup_s": args.warmup, "repeats": args.repeats,
            "linger.ms": args.linger, "min.insync.replicas (RF=3)": MIN_INSYNC}


def _more(parser):
    parser.add_argument("--against", metavar="REV",
                        help="a git revision (or another checkout's path) to measure the "
                             "working tree's broker against, interleaved")
    parser.add_argument("--linger", type=float, default=LINGER_MS,
                        help=f"the producers' linger.ms (default {LINGER_MS})")


def main(argv=None):
    args = main_args(argv, _more)
    args.repeats = args.repeats or (1 if args.quick else 3)
    args.warmup = QUICK_WARMUP if args.quick else WARMUP
    args.seconds = (QUICK_SECONDS if args.quick else SECONDS) + args.warmup
    compare(args) if args.against else run(args)


if __name__ == "__main__":
    main()
