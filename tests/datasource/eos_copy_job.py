"""A streaming copy job for the exactly-once fault tests, run as its own driver process so that
the test can kill it (driver Python, its JVM and Python workers) with SIGKILL.

Usage: python eos_copy_job.py BOOTSTRAP SOURCE OUT CHECKPOINT GUARANTEE TXN_TIMEOUT_MS run|finish
       [MIN_PARTITIONS [TRANSACTIONAL_ID_PREFIX]]
TXN_TIMEOUT_MS is the sink producers' transaction.timeout.ms ("2pc": KIP-939 two-phase commit,
no timeout); MIN_PARTITIONS the source's minPartitions (the number of writing tasks). `run` copies
micro-batches of 40 offsets until killed; `finish` copies what is left (availableNow) and exits
0. Each task hands its rows to the sink in slices of 5, 50 ms apart, so that a write takes a
good part of a micro-batch: a kill then often lands mid-write. `finish_copy` is the same
`finish` in the test's own session: a restart that nothing kills needs no driver of its own
(a driver start is a JVM start, the longest part of these tests)."""
import sys

from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession

from minilog.jobs.pipeline import start_query


def copy_query(spark, bootstrap, source, out, checkpoint, guarantee, txn_timeout_ms, mode,
               min_partitions="1", prefix=None):
    """The copy query, started."""
    def slowly(batches):  # nested: pickled by value, the Python workers cannot import this file
        import time as t
        for batch in batches:
            for start in range(0, batch.num_rows, 5):
                yield batch.slice(start, 5)
                t.sleep(0.05)

    df = (spark.readStream.format("minilog").option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", source).option("startingOffsets", "earliest")
          .option("maxOffsetsPerTrigger", 40).option("minPartitions", min_partitions)
          .load().select("value")
          .mapInArrow(slowly, "value binary"))
    w = (df.writeStream.format("minilog").option("kafka.bootstrap.servers", bootstrap)
         .option("topic", out).option("deliveryGuarantee", guarantee)
         .option("checkpointLocation", str(checkpoint)))
    if txn_timeout_ms == "2pc":
        w = w.option("kafka.transaction.two.phase.commit.enable", "true")
    else:
        w = w.option("kafka.transaction.timeout.ms", txn_timeout_ms)
    if prefix:
        w = w.option("transactionalIdPrefix", prefix)
    w = w.trigger(availableNow=True) if mode == "finish" else w.trigger(processingTime="0 seconds")
    return start_query(w)


def finish_copy(spark, bootstrap, source, out, checkpoint, guarantee, txn_timeout_ms,
                min_partitions="1", prefix=None, timeout: float = 300) -> str | None:
    """Run the `finish` copy in `spark` to its end: None when it copied everything, else why
    it failed."""
    query = copy_query(spark, bootstrap, source, out, checkpoint, guarantee, txn_timeout_ms,
                       "finish", min_partitions, prefix)
    try:
        ended = query.awaitTermination(timeout)
    except StreamingQueryException:
        ended = True  # it failed: exception() says why
    finally:
        query.stop()
    assert ended, "the finishing copy did not end"
    return None if query.exception() is None else str(query.exception())


def main(bootstrap, source, out, checkpoint, guarantee, txn_timeout_ms, mode,
         min_partitions="1", prefix=None):
    spark = (SparkSession.builder.master("local[2]").appName("eos-copy")
             .config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    query = copy_query(spark, bootstrap, source, out, checkpoint, guarantee, txn_timeout_ms,
                       mode, min_partitions, prefix)
    query.awaitTermination()
    if query.exception() is not None:
        raise SystemExit(f"query failed: {query.exception()}")
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:])
