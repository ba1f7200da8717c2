"""An exactly-once batch write (`df.write`), run as its own driver process so that a test can
kill it (driver Python, its JVM and Python workers) at a named point of its commit
(`MINILOG_SINK_HALT=write:<n>:<file>`).

Usage: python eos_write_job.py BOOTSTRAP OUT ROWS [TRANSACTIONAL_ID_PREFIX]
Writes the values w0..w<ROWS-1> from two tasks, with KIP-939's two-phase commit (nothing the
killed driver prepared times out). `write_values` is the same write for the test's session."""
import sys

from pyspark.sql import SparkSession


def values(rows: int) -> list[bytes]:
    return [f"w{i}".encode() for i in range(rows)]


def write_values(spark, bootstrap: str, out: str, rows: int, prefix: str | None = None) -> None:
    df = spark.createDataFrame([(v.decode(),) for v in values(rows)], "value string")
    w = (df.repartition(2).write.format("minilog").option("kafka.bootstrap.servers", bootstrap)
         .option("topic", out).option("deliveryGuarantee", "exactly-once")
         .option("kafka.transaction.two.phase.commit.enable", "true"))
    if prefix:
        w = w.option("transactionalIdPrefix", prefix)
    w.mode("append").save()


def main(bootstrap: str, out: str, rows: str, prefix: str | None = None) -> None:
    spark = (SparkSession.builder.master("local[2]").appName("eos-write")
             .config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    write_values(spark, bootstrap, out, int(rows), prefix)
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:])
