"""eos_sink: the exactly-once sink's cost per micro-batch (issue 38, item 6).

One minilog broker, the local Spark session of `bench/spark.py`. A topic of N records of
100 B over 4 partitions is copied by a streaming query (`format("minilog")` in and out,
`trigger(availableNow=True)`, `maxOffsetsPerTrigger` = the micro-batch size) into a new topic,
through the sink at-least-once (`kafka.acks=all`, an idempotent producer) and exactly-once
(one prepared transaction per task, the batch's decision recorded in the decisions topic, then
committed by the driver), the two interleaved in the same run; each copy's output is counted
as a read_committed reader sees it. The figure is rows/s from `writeStream.start()` to the
query's end, and the median per micro-batch of Spark's `addBatch` (the tasks plus the sink's
commit). Micro-batches of 20,000 rows (where the fixed cost per batch shows) and of 250,000.
"""
import tempfile
import time

from minilog.jobs.pipeline import start_query

from . import cluster
from .report import Report, main_args, median
from .spark import PARTITIONS, SIZE, _check_and_delete, fill, interleaved, start_spark

# (rows per micro-batch, records copied): ten micro-batches of 20,000, two of 250,000
SIZES = ((20_000, 200_000), (250_000, 500_000))
QUICK_SIZES = ((20_000, 100_000), (250_000, 250_000))
GUARANTEES = ("at-least-once", "exactly-once")


def copy(spark, bootstrap, source, per_batch, n, guarantee, topics, timeout=900):
    """Copy `source` into a new topic through the sink: (seconds, median addBatch ms)."""
    topic = next(topics)
    cluster.create_topic(bootstrap, topic, PARTITIONS)
    with tempfile.TemporaryDirectory(prefix="minilog-bench-eos-") as ckpt:
        t0 = time.perf_counter()
        q = start_query(
            spark.readStream.format("minilog")
            .option("kafka.bootstrap.servers", bootstrap).option("subscribe", source)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", str(per_batch)).load()
            .select("key", "value").writeStream.format("minilog")
            .option("kafka.bootstrap.servers", bootstrap).option("kafka.acks", "all")
            .option("topic", topic).option("deliveryGuarantee", guarantee)
            .option("checkpointLocation", ckpt).trigger(availableNow=True))
        try:
            if not q.awaitTermination(timeout):
                raise TimeoutError(f"the {guarantee} copy did not end in {timeout} s")
        finally:
            q.stop()
        seconds = time.perf_counter() - t0
        if q.exception() is not None:
            raise RuntimeError(f"{guarantee}: {q.exception()}")
        progress = [p for p in q.recentProgress if p["numInputRows"]]
    _check_and_delete(bootstrap, topic, n)
    return seconds, median([p["durationMs"]["addBatch"] for p in progress])


def measure(rep, spark, bootstrap, sizes, repeats, warmup):
    rows, topics = [], iter(f"eos-out-{i}" for i in range(10_000))
    for per_batch, n in sizes:
        source = f"eos-in-{per_batch}"
        fill(bootstrap, source, n)
        runs = interleaved({g: (lambda g=g: copy(spark, bootstrap, source, per_batch, n, g,
                                                 topics)) for g in GUARANTEES},
                           repeats, warmup)
        for guarantee, results in runs.items():
            t = median([s for s, _ in results])
            row = {"what": guarantee, "per_batch": per_batch, "rows": n, "seconds": t,
                   "rows_s": n / t, "min": n / max(s for s, _ in results),
                   "max": n / min(s for s, _ in results),
                   "add_batch_ms": median([ms for _, ms in results])}
            rows.append(row)
            rep.log(f"{per_batch:>7,} rows/batch {guarantee:14} {row['rows_s']:>10,.0f} rows/s "
                    f"({t:.2f} s), addBatch {row['add_batch_ms']:.0f} ms per micro-batch")
    return rows


def run(args):
    import pyspark
    quick = args.quick
    repeats = args.repeats or (1 if quick else 3)
    sizes = QUICK_SIZES if quick else SIZES
    rep = Report("eos_sink", quick, args.out, {
        "sizes": [list(s) for s in sizes], "value_bytes": SIZE, "partitions": PARTITIONS,
        "repeats": repeats, "pyspark": pyspark.__version__})
    spark = start_spark()
    try:
        with cluster.running("minilog") as broker:
            rows = measure(rep, spark, broker.bootstrap, sizes, repeats, not quick)
    finally:
        spark.stop()
    rep.section("Streaming copy through the sink, availableNow, rows/s (median [min-max]) and "
                "median addBatch per micro-batch", rows,
                [("per_batch", "rows/batch"), ("what", "guarantee"), ("rows_s", "rows/s"),
                 ("min", "min"), ("max", "max"), ("seconds", "s"),
                 ("add_batch_ms", "ms addBatch")])
    got = {(r["per_batch"], r["what"]): r["rows_s"] for r in rows}
    for per_batch, _ in sizes:
        rep.ratio(f"eos sink exactly-once/at-least-once ({per_batch:,} rows per micro-batch)",
                  got[(per_batch, "exactly-once")], got[(per_batch, "at-least-once")],
                  "target >= 0.9")
    rep.finish()


def main(argv=None):
    run(main_args(argv))


if __name__ == "__main__":
    main()
