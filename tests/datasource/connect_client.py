"""A Spark Connect client, run as its own process by test_connect.py: a Python process with a
regular Spark session (the suite's, in each test worker) cannot also open a Connect one
(pyspark refuses: SESSION_ALREADY_EXIST), and a Connect application is a process of its own
anyway.

    python connect_client.py SERVER BOOTSTRAP batch TOPIC
        writes 50 rows to TOPIC, reads them back, prints them as JSON
    python connect_client.py SERVER BOOTSTRAP copy SOURCE SINK CHECKPOINT
        copies SOURCE to SINK with an availableNow streaming query, 80 records a micro-batch
"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pyspark.sql import SparkSession  # noqa: E402
from sparktools import minilog_copy  # noqa: E402


def batch(spark, bootstrap, topic):
    rows = [(f"k{i}", f"v{i}") for i in range(50)]
    (spark.createDataFrame(rows, "key string, value string").write.format("minilog")
     .option("kafka.bootstrap.servers", bootstrap).option("topic", topic)
     .mode("append").save())
    read = (spark.read.format("minilog").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic).load()
            .selectExpr("CAST(key AS STRING) k", "CAST(value AS STRING) v").collect())
    print(json.dumps({"written": rows, "read": [[r.k, r.v] for r in read]}))


def copy(spark, bootstrap, source, sink, checkpoint):
    query = minilog_copy(spark, bootstrap, source, sink, checkpoint, 80).start()
    try:
        finished = query.awaitTermination(600)
        print(json.dumps({"finished": finished, "exception": str(query.exception() or "")}))
    finally:
        query.stop()


def main(server, bootstrap, mode, *args):
    spark = SparkSession.builder.remote(server).getOrCreate()
    try:
        if type(spark).__module__ != "pyspark.sql.connect.session":
            sys.exit(f"not a Spark Connect session: {type(spark)}")
        {"batch": batch, "copy": copy}[mode](spark, bootstrap, *args)
    finally:
        spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:])
