"""spark: `format("minilog")` in a local Spark session, against what Spark and users can do
without it (issues 8 and 14).

One minilog broker, one Spark session (`local[2,4]`: 2 threads, a task tried up to 4 times as
on a cluster; UI off; Python workers forked from minilog's daemon as in spark-conf/), 1M
records of 100 B over 4 partitions (quick: 4k, no warm-up), each measurement repeated with the
alternatives interleaved, median kept:

- **read**: a streaming query, `trigger(availableNow=True)` into `format("noop")`, timed from
  `readStream` to its end (query start included), through `format("minilog")`, through a
  synthetic Python DataSource handing out the same Arrow batches (same schema, partitions, rows
  and batch sizes) from memory, the ceiling for any Python source (target: minilog >= 0.8 of
  it), and through a naive source on confluent-kafka's `consume()` yielding tuples.
- **pool**: the per-worker client pool (`datasource/clients.py`), on and off, as time per
  micro-batch of a query made of many small ones (`maxOffsetsPerTrigger`). "Off" is the same
  source registered under another name while `MINILOG_CLIENT_POOL=0` is in the session's
  `environment`: Spark starts separate Python workers with that environment for it (checked:
  `spark.executorEnv.*` and the driver's environment at start also reach the workers, but for
  the whole session).
- **bytes**: `maxBytesPerTrigger` against `maxOffsetsPerTrigger` asking the same bytes (the
  record count that holds them), on partitions of different record sizes: the bytes each
  micro-batch obtained against those asked, and the time per micro-batch (the byte bound adds
  one DescribeLogDirs per trigger). Quick: the 1 MiB bound only, the one the ratio reads.
- **write**: rows/s of `df.write.format("minilog")...mode("append").save()` against a
  `foreachPartition` writer on confluent-kafka's Producer (same producer settings), each run
  into a new topic, its record count checked, the topic deleted after.
"""
import json
import os
import sys
import tempfile
import time

from minilog.jobs.pipeline import start_query

from . import clients, cluster, spark_sources
from .report import Report, bars, main_args, median

RECORDS, QUICK_RECORDS = 1_000_000, 4_000
PARTITIONS, SIZE = 4, 100
POOL_RECORDS, QUICK_POOL_RECORDS, POOL_TRIGGER = 60_000, 4_000, 2_000
READERS = ("minilog", "synthetic", "naive confluent")
WRITERS = ("minilog sink", "confluent foreachPartition", "minilog sink acks=all",
           "minilog sink exactly-once")
POOL = {"pool on": "minilog", "pool off": "minilog_nopool"}
MASTER = "local[2,4]"
BYTES_SIZES = (100, 300, 1000, 3000)   # value bytes in each partition of the "bytes" topic
BYTES_RECORDS, QUICK_BYTES_RECORDS = 8_000, 300   # per partition (quick: two 1 MiB batches)
BYTES_ASKED = (256 * 1024, 1024 * 1024)
# quick: the 1 MiB bound alone, the one the ratio compares (each bound is two more queries)
QUICK_BYTES_ASKED = BYTES_ASKED[-1:]


def start_spark():
    """The local session every measurement shares, with the baseline sources registered."""
    os.environ["PYSPARK_PYTHON"] = os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ.pop("MINILOG_CLIENT_POOL", None)
    from pyspark import cloudpickle
    from pyspark.sql import SparkSession
    cloudpickle.register_pickle_by_value(spark_sources)
    spark = (SparkSession.builder.master(MASTER).appName("minilog-bench")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.host", "127.0.0.1")
             .config("spark.sql.shuffle.partitions", "2")
             # task workers fork from minilog's daemon, as spark-conf/ has them: the client
             # imported once, not in every worker
             .config("spark.python.daemon.module", "minilog.datasource.worker_daemon")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(spark_sources.SyntheticSource)
    spark.dataSource.register(spark_sources.NaiveSource)
    env = spark.sparkContext.environment
    env["MINILOG_CLIENT_POOL"] = "0"
    try:
        spark.dataSource.register(spark_sources.MinilogWithoutPool)
    finally:
        del env["MINILOG_CLIENT_POOL"]
    return spark


def fill(bootstrap, topic, n):
    """`n` records of SIZE bytes over PARTITIONS partitions; returns [[partition, end, [rows
    per batch as minilog's fetches return them]]], the shape the baselines copy."""
    from minilog.connector.client import Consumer, TopicPartition
    cluster.create_topic(bootstrap, topic, PARTITIONS)
    prod = clients.producer("minilog-arrow", clients.producer_config(bootstrap))
    try:
        prod.produce(topic, clients.value_of(SIZE), n, PARTITIONS)
    finally:
        prod.close()
    c = Consumer({"bootstrap.servers": bootstrap})
    try:
        parts = []
        for p in range(PARTITIONS):
            tp = TopicPartition(topic, p)
            end = c.end_offsets([tp])[tp]
            parts.append([p, end, [b.num_rows for b in c.fetch_range_arrow(tp, 0, end, 60)]])
    finally:
        c.close()
    if sum(end for _, end, _ in parts) != n:
        raise RuntimeError(f"{topic} holds {[end for _, end, _ in parts]} records, not {n}")
    return parts


def stream(spark, fmt, options, rows, timeout=600):
    """Run `fmt` with `options` as an availableNow query into noop, to its end: (seconds,
    [progress of each micro-batch]); fails unless exactly `rows` rows were read."""
    with tempfile.TemporaryDirectory(prefix="minilog-bench-ckpt-") as ckpt:
        t0 = time.perf_counter()
        # started as the jobs start theirs: again if Spark's source worker was late
        q = start_query(spark.readStream.format(fmt).options(**options).load().writeStream
                        .format("noop").option("checkpointLocation", ckpt)
                        .trigger(availableNow=True))
        try:
            if not q.awaitTermination(timeout):
                raise TimeoutError(f"{fmt}: the availableNow query did not end in {timeout} s")
        finally:
            q.stop()
        seconds = time.perf_counter() - t0
        if q.exception() is not None:
            raise RuntimeError(f"{fmt}: {q.exception()}")
        progress = list({p["batchId"]: p for p in q.recentProgress if p["numInputRows"]}.values())
    got = sum(p["numInputRows"] for p in progress)
    if got != rows:
        raise RuntimeError(f"{fmt} read {got} rows, expected {rows}")
    return seconds, progress


def interleaved(variants, repeats, warmup):
    """{name: [result of each timed run]} of `variants` ({name: run()}): one warm-up run each
    (if `warmup`), then `repeats` rounds taking each in turn, so machine noise spreads over
    all of them."""
    for run in variants.values() if warmup else ():
        run()
    results = {name: [] for name in variants}
    for _ in range(repeats):
        for name, run in variants.items():
            results[name].append(run())
    return results


def throughput_rows(rep, kind, times, n):
    rows = []
    for name, ts in times.items():
        t = median(ts)
        rows.append({"what": name, "rows": n, "seconds": t, "rows_s": n / t,
                     "min": n / max(ts), "max": n / min(ts), "mb_s": n * SIZE / t / 1e6})
        rep.log(f"{kind} {name:28} {n / t:>12,.0f} rows/s  ({t:.2f} s)")
    return rows


def measure_read(rep, spark, bootstrap, n, repeats, warmup):
    parts = fill(bootstrap, "read", n)
    rep.log(f"filled: {n:,} records, {sum(len(s) for *_, s in parts)} fetched batches")
    options = {
        "minilog": ("minilog", {"kafka.bootstrap.servers": bootstrap, "subscribe": "read",
                                "startingOffsets": "earliest"}),
        "synthetic": ("bench_synthetic", {"topic": "read", "parts": json.dumps(parts),
                                          "valueSize": str(SIZE)}),
        "naive confluent": ("bench_naive", {"bootstrap": bootstrap, "topic": "read",
                                            "parts": json.dumps(parts)}),
    }
    times = interleaved({name: (lambda f=fmt, o=opts: stream(spark, f, o, n)[0])
                         for name, (fmt, opts) in options.items()}, repeats, warmup)
    return throughput_rows(rep, "read ", times, n)


def measure_pool(rep, spark, bootstrap, n, repeats, warmup):
    fill(bootstrap, "pool", n)
    options = {"kafka.bootstrap.servers": bootstrap, "subscribe": "pool",
               "startingOffsets": "earliest", "maxOffsetsPerTrigger": str(POOL_TRIGGER)}
    runs = interleaved({name: (lambda f=fmt: stream(spark, f, options, n)[1])
                        for name, fmt in POOL.items()}, repeats, warmup)
    rows = []
    for name, progresses in runs.items():
        batches = [p["durationMs"] for progress in progresses for p in progress]
        trigger = median([d["triggerExecution"] for d in batches])
        tasks = median([d["addBatch"] for d in batches])
        rows.append({"what": name, "batches": len(batches), "rows_batch": POOL_TRIGGER,
                     "trigger_ms": trigger, "add_batch_ms": tasks})
        rep.log(f"pool  {name:28} {trigger:6.0f} ms per micro-batch, {tasks:.0f} ms of it in "
                f"addBatch ({len(batches)} micro-batches)")
    return rows


def _fill_sized(bootstrap, topic, per_partition):
    from minilog.connector.client import Producer
    cluster.create_topic(bootstrap, topic, len(BYTES_SIZES))
    with Producer(clients.producer_config(bootstrap)) as prod:
        for p, size in enumerate(BYTES_SIZES):
            for _ in range(per_partition):
                prod.send(topic, value=b"b" * size, partition=p)
        prod.flush()


def _value_bytes(progress):
    """Value bytes each micro-batch read, from its start and end offsets."""
    from minilog.datasource import offsets_read
    return [sum(n * BYTES_SIZES[partition] for (_, partition), n in
                offsets_read(p["sources"][0]).items()) for p in progress]


def measure_bytes(rep, spark, bootstrap, per_partition, repeats, warmup, bounds=BYTES_ASKED):
    _fill_sized(bootstrap, "bytes", per_partition)
    n = per_partition * len(BYTES_SIZES)
    per_record = sum(BYTES_SIZES) / len(BYTES_SIZES)
    base = {"kafka.bootstrap.servers": bootstrap, "subscribe": "bytes",
            "startingOffsets": "earliest"}
    rows = []
    for asked in bounds:
        variants = {"maxBytesPerTrigger": {**base, "maxBytesPerTrigger": str(asked)},
                    "maxOffsetsPerTrigger": {**base, "maxOffsetsPerTrigger":
                                             str(int(asked / per_record))}}
        runs = interleaved({name: (lambda o=opts: stream(spark, "minilog", o, n)[1])
                            for name, opts in variants.items()}, repeats, warmup)
        for name, progresses in runs.items():
            batches = [p for progress in progresses for p in progress]
            got = _value_bytes(batches)
            full = got[:-1] or got  # the last batch takes what is left
            row = {"what": name, "asked_kib": asked // 1024, "batches": len(got) // repeats,
                   "median_kib": median(full) / 1024, "max_kib": max(full) / 1024,
                   "max_over_asked": max(full) / asked,
                   "trigger_ms": median([p["durationMs"]["triggerExecution"] for p in batches]),
                   "latest_ms": median([p["durationMs"].get("latestOffset", 0)
                                        for p in batches])}
            rows.append(row)
            rep.log(f"bytes {name:22} asked {asked // 1024:5} KiB: median {row['median_kib']:7.1f}"
                    f" KiB, max {row['max_kib']:7.1f} KiB over {row['batches']} batches, "
                    f"{row['trigger_ms']:.0f} ms/batch ({row['latest_ms']:.0f} in latestOffset)")
    return rows


def measure_write(rep, spark, bootstrap, n, repeats, warmup):
    from pyspark.sql import functions as F
    value = clients.value_of(SIZE)
    df = spark.range(0, n, 1, PARTITIONS).select(F.lit(bytearray(value)).alias("value"))
    topics = iter(f"write-{i}" for i in range(10_000))
    settings = clients.PRODUCER

    def into_new_topic(write):
        topic = next(topics)
        cluster.create_topic(bootstrap, topic, PARTITIONS)
        t0 = time.perf_counter()
        write(topic)
        seconds = time.perf_counter() - t0
        _check_and_delete(bootstrap, topic, n)
        return seconds

    def sink(topic, acks=settings["acks"], guarantee="at-least-once"):
        (df.write.format("minilog").option("kafka.bootstrap.servers", bootstrap)
         .options(**{f"kafka.{k}": str(v) for k, v in {**settings, "acks": acks}.items()})
         .option("deliveryGuarantee", guarantee).option("topic", topic).mode("append").save())

    def by_hand(topic):
        df.foreachPartition(spark_sources.confluent_writer(bootstrap, topic, settings))

    # exactly-once needs acks=all (an idempotent producer): compared with the sink at acks=all
    times = interleaved({"minilog sink": lambda: into_new_topic(sink),
                         "confluent foreachPartition": lambda: into_new_topic(by_hand),
                         "minilog sink acks=all": lambda: into_new_topic(
                             lambda t: sink(t, "all")),
                         "minilog sink exactly-once": lambda: into_new_topic(
                             lambda t: sink(t, "all", "exactly-once"))},
                        repeats, warmup)
    return throughput_rows(rep, "write", times, n)


def _count_committed(consumer, tps):
    """The records a read_committed consumer reads (transaction markers take offsets)."""
    ends = consumer.end_offsets(tps)
    return sum(b.num_rows for tp in tps
               for b in consumer.fetch_range_arrow(tp, 0, ends[tp], include_headers=False))


def _check_and_delete(bootstrap, topic, n):
    from minilog.connector.client import AdminClient, Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "isolation.level": "read_committed"})
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        got = _count_committed(c, tps)
    finally:
        c.close()
    if got != n:
        raise RuntimeError(f"{topic} received {got} records, expected {n}")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        admin.delete_topic(topic)
    finally:
        admin.close()


def run(args):
    import pyspark
    quick = args.quick
    repeats = args.repeats or (1 if quick else 3)
    n = QUICK_RECORDS if quick else RECORDS
    pool_n = QUICK_POOL_RECORDS if quick else POOL_RECORDS
    bytes_n = QUICK_BYTES_RECORDS if quick else BYTES_RECORDS
    bounds = QUICK_BYTES_ASKED if quick else BYTES_ASKED
    rep = Report("spark", quick, args.out, {
        "records": n, "value_bytes": SIZE, "partitions": PARTITIONS, "repeats": repeats,
        "master": MASTER, "pyspark": pyspark.__version__,
        "pool_records": pool_n, "maxOffsetsPerTrigger": POOL_TRIGGER,
        "bytes_records_per_partition": bytes_n, "bytes_value_sizes": list(BYTES_SIZES),
        "bytes_asked_kib": [b // 1024 for b in bounds]})
    t0 = time.perf_counter()
    spark = start_spark()
    rep.log(f"Spark session started in {time.perf_counter() - t0:.1f} s")
    try:
        with cluster.running("minilog") as broker:
            read = measure_read(rep, spark, broker.bootstrap, n, repeats, not quick)
            pool = measure_pool(rep, spark, broker.bootstrap, pool_n, repeats, not quick)
            by_bytes = measure_bytes(rep, spark, broker.bootstrap, bytes_n, repeats, not quick,
                                     bounds)
            write = measure_write(rep, spark, broker.bootstrap, n, repeats, not quick)
    finally:
        spark.stop()
    report(rep, n, read, pool, by_bytes, write)


def report(rep, n, read, pool, by_bytes, write):
    columns = [("what", "source"), ("rows_s", "rows/s"), ("min", "min"), ("max", "max"),
               ("seconds", "s"), ("mb_s", "MB/s")]
    rep.section(f"Read: availableNow query into noop, {n:,} rows of {SIZE} B, {PARTITIONS} "
                "partitions, query start included (rows/s, median [min-max])", read, columns)
    rep.section(f"Client pool: time per micro-batch (median triggerExecution), "
                f"maxOffsetsPerTrigger={POOL_TRIGGER}",
                pool, [("what", "minilog"), ("batches", "micro-batches"),
                       ("rows_batch", "rows/batch"), ("trigger_ms", "ms/batch"),
                       ("add_batch_ms", "ms in addBatch")])
    rep.section("Byte-bounded micro-batches (maxBytesPerTrigger) against record-bounded ones "
                f"asking the same bytes: value sizes {'/'.join(map(str, BYTES_SIZES))} B by "
                "partition; KiB of values per micro-batch (the last left out) and time per "
                "micro-batch (median triggerExecution)",
                by_bytes, [("what", "bound"), ("asked_kib", "asked KiB"),
                           ("batches", "micro-batches"), ("median_kib", "median KiB"),
                           ("max_kib", "max KiB"), ("max_over_asked", "max/asked"),
                           ("trigger_ms", "ms/batch"), ("latest_ms", "ms in latestOffset")])
    rep.section(f"Write: {n:,} rows of {SIZE} B from {PARTITIONS} partitions (rows/s)", write,
                [("what", "writer")] + columns[1:])
    got = {r["what"]: r["rows_s"] for r in read + write}
    per_batch = {r["what"]: r["trigger_ms"] for r in pool}
    rep.ratio("spark read minilog/synthetic", got["minilog"], got["synthetic"], "target >= 0.8")
    rep.ratio("spark read naive confluent/synthetic", got["naive confluent"], got["synthetic"])
    rep.ratio("spark micro-batch time pool on/off", per_batch["pool on"], per_batch["pool off"],
              "< 1: the pool saves time")
    cost = {r["what"]: r["trigger_ms"] for r in by_bytes if r["asked_kib"] == 1024}
    rep.ratio("spark micro-batch time maxBytesPerTrigger/maxOffsetsPerTrigger (1 MiB)",
              cost["maxBytesPerTrigger"], cost["maxOffsetsPerTrigger"],
              "the byte bound's cost")
    rep.ratio("spark write minilog sink/confluent foreachPartition", got["minilog sink"],
              got["confluent foreachPartition"], "target > 1")
    rep.ratio("spark write exactly-once/at-least-once sink (acks=all)",
              got["minilog sink exactly-once"], got["minilog sink acks=all"], "target >= 0.85")
    rep.plot("throughput", lambda plt: bars(
        plt, ["read", "write"],
        {"minilog": [got["minilog"], got["minilog sink"]],
         "synthetic source (Spark alone)": [got["synthetic"], None],
         "confluent-kafka by hand": [got["naive confluent"], got["confluent foreachPartition"]]},
        "rows/s", f"Spark {MASTER}, {n:,} rows of {SIZE} B, {PARTITIONS} partitions"))
    rep.finish()


def main(argv=None):
    run(main_args(argv))


if __name__ == "__main__":
    main()
