"""scale: throughput against partition count (1, 4, 16, 64) and against client count (1, 2, 4).

One minilog broker. Records of 1 KB; producers as in `produce` (`clients.PRODUCER`: acks=1,
linger 5 ms, 1 MB batches), partitions round-robin, so with more partitions each batch holds
fewer records: the broker does more, smaller appends for the same bytes.

- **partitions**: one producer of each library (confluent-kafka, minilog) into topics of 1, 4,
  16 and 64 partitions; then each topic is read back whole by confluent-kafka's consumer and by
  minilog's `poll_arrow`, all partitions assigned to one consumer.
- **clients**: 1, 2 and 4 producer processes of each library into one topic of 16 partitions,
  started together at a barrier; aggregate MB/s = all their bytes / (last end - first start).

Each figure is the median of repeated runs after a warm-up, measured in the same run. On this
2-core machine the broker, the producers and their I/O threads share two cores: more clients
measure contention, not parallel speed-up.
"""
import multiprocessing
import time

from . import clients, cluster
from .report import MB, Report, lines, main_args, median

PARTITIONS = (1, 4, 16, 64)
CLIENT_COUNTS = (1, 2, 4)
SIZE = 1000
RECORDS, QUICK_RECORDS = 64_000, 4_000
CLIENT_RECORDS, QUICK_CLIENT_RECORDS = 32_000, 2_000
CLIENT_PARTITIONS = 16


def _partition_sweep(rep, b, n, repeats):
    value = clients.value_of(SIZE)
    rows = []
    for parts in PARTITIONS:
        topic = f"scale-p{parts}"
        cluster.create_topic(b.bootstrap, topic, parts)
        prods = {c: clients.producer(c, clients.producer_config(b.bootstrap)) for c in clients.CLIENTS}
        times = {c: [] for c in clients.CLIENTS}
        try:
            for prod in prods.values():
                clients.timed_produce(prod, topic, value, max(n // 10, parts), parts)
            for _ in range(repeats):
                for c, prod in prods.items():
                    times[c].append(clients.timed_produce(prod, topic, value, n, parts))
        finally:
            for prod in prods.values():
                prod.close()
        total = 2 * (max(n // 10, parts) + repeats * n)
        reads = {"confluent": [], "minilog": []}
        for i in range(repeats + 1):  # the first read is a warm-up
            t_conf = clients.read_confluent(b.bootstrap, topic, parts, total)
            t_ours = clients.read_minilog(b.bootstrap, topic, parts, total, arrow=True)
            if i:
                reads["confluent"].append(t_conf)
                reads["minilog"].append(t_ours)
        row = {"partitions": parts}
        for c in clients.CLIENTS:
            row[f"produce_{c}"] = n * SIZE / median(times[c]) / MB
            row[f"consume_{c}"] = total / median(reads[c])
        rows.append(row)
        rep.log(f"p{parts:<3} produce confluent {row['produce_confluent']:6.1f} MB/s, minilog "
                f"{row['produce_minilog']:6.1f} MB/s; consume confluent "
                f"{row['consume_confluent']:>9,.0f} rec/s, minilog arrow "
                f"{row['consume_minilog']:>9,.0f} rec/s")
    return rows


def _client_process(kind, bootstrap, topic, n, repeats, barrier, results):
    prod = clients.producer(kind, clients.producer_config(bootstrap))
    value = clients.value_of(SIZE)
    try:
        prod.produce(topic, value, max(n // 10, CLIENT_PARTITIONS), CLIENT_PARTITIONS)
        for _ in range(repeats):
            barrier.wait(120)
            t0 = time.monotonic()
            prod.produce(topic, value, n, CLIENT_PARTITIONS)
            results.put((t0, time.monotonic()))
    finally:
        prod.close()


def _client_sweep(rep, b, n, repeats):
    ctx = multiprocessing.get_context("spawn")
    rows = []
    topic = "scale-clients"
    cluster.create_topic(b.bootstrap, topic, CLIENT_PARTITIONS)
    for count in CLIENT_COUNTS:
        row = {"clients": count}
        for kind in clients.CLIENTS:
            barrier, results = ctx.Barrier(count), ctx.Queue()
            procs = [ctx.Process(target=_client_process, daemon=True,
                                 args=(kind, b.bootstrap, topic, n, repeats, barrier, results))
                     for _ in range(count)]
            for p in procs:
                p.start()
            try:
                runs = []
                for _ in range(repeats):
                    spans = [results.get(timeout=120) for _ in range(count)]
                    wall = max(e for _, e in spans) - min(s for s, _ in spans)
                    runs.append(count * n * SIZE / wall / MB)
            finally:
                for p in procs:
                    p.join(30)
                    if p.is_alive():
                        p.kill()
            row[kind] = median(runs)
        rows.append(row)
        rep.log(f"{count} producer process(es): confluent {row['confluent']:6.1f} MB/s, "
                f"minilog {row['minilog']:6.1f} MB/s")
    return rows


def run(args):
    quick = args.quick
    repeats = args.repeats or (1 if quick else 3)
    n = QUICK_RECORDS if quick else RECORDS
    cn = QUICK_CLIENT_RECORDS if quick else CLIENT_RECORDS
    rep = Report("scale", quick, args.out, {"value_bytes": SIZE, "records_per_run": n,
                                            "records_per_client_run": cn, "repeats": repeats,
                                            "client_settings": clients.PRODUCER,
                                            "client_topic_partitions": CLIENT_PARTITIONS})
    with cluster.running("minilog") as b:
        parts = _partition_sweep(rep, b, n, repeats)
        procs = _client_sweep(rep, b, cn, repeats)
    rep.section("Against partition count: one producer / one consumer (produce MB/s of values, "
                "consume records/s)", parts,
                [("partitions", "partitions"), ("produce_confluent", "produce confluent"),
                 ("produce_minilog", "produce minilog"), ("consume_confluent", "consume confluent"),
                 ("consume_minilog", "consume minilog arrow")])
    rep.section(f"Against producer processes, {CLIENT_PARTITIONS} partitions (aggregate MB/s)",
                procs, [("clients", "processes"), ("confluent", "confluent"),
                        ("minilog", "minilog")])
    first, last = parts[0], parts[-1]
    for c in clients.CLIENTS:
        rep.ratio(f"produce {c} p{last['partitions']}/p{first['partitions']}",
                  last[f"produce_{c}"], first[f"produce_{c}"])
        rep.ratio(f"consume {c} p{last['partitions']}/p{first['partitions']}",
                  last[f"consume_{c}"], first[f"consume_{c}"])
        rep.ratio(f"produce {c} {procs[-1]['clients']} processes/1", procs[-1][c], procs[0][c])
    xs = [r["partitions"] for r in parts]
    rep.plot("partitions-produce", lambda plt: lines(
        plt, xs, {f"{c} producer": [r[f"produce_{c}"] for r in parts] for c in clients.CLIENTS},
        "partitions", "MB/s", "produce throughput against partitions", logx=True))
    rep.plot("partitions-consume", lambda plt: lines(
        plt, xs, {"confluent consume": [r["consume_confluent"] for r in parts],
                  "minilog poll_arrow": [r["consume_minilog"] for r in parts]},
        "partitions", "records/s", "consume throughput against partitions", logx=True))
    rep.plot("clients", lambda plt: lines(
        plt, [r["clients"] for r in procs], {c: [r[c] for r in procs] for c in clients.CLIENTS},
        "producer processes", "aggregate MB/s", f"produce, {CLIENT_PARTITIONS} partitions"))
    rep.finish()


def main(argv=None):
    run(main_args(argv))


if __name__ == "__main__":
    main()
