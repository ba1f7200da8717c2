"""Update-mode aggregations, written one micro-batch at a time through the batch sink.

Spark's Python streaming sinks take Append and Complete output modes only, so an update-mode
aggregation goes through `foreachBatch`: each micro-batch's updated rows are written with the
batch writer. `write_each_batch` is that function, with the save mode Python data sources need.
"""


def register(spark):
    """Register `format("minilog")` in `spark` (not needed when minilog is pip-installed)."""
    from .source import MinilogDataSource
    spark.dataSource.register(MinilogDataSource)


def write_each_batch(options=None, **more):
    """A `foreachBatch` function writing each micro-batch to topics with `format("minilog")`.

        query = (counts.writeStream.outputMode("update")
                 .foreachBatch(write_each_batch({"kafka.bootstrap.servers": servers,
                                                 "topic": "counts"}))
                 .option("checkpointLocation", path).start())

    `options` (and keyword options) are the sink's. Delivery is at-least-once: a batch Spark
    retries after a failure is written again.
    """
    options = {**(options or {}), **more}
    registered = set()

    def write(df, epoch_id):
        spark = df.sparkSession
        if id(spark) not in registered:
            register(spark)
            registered.add(id(spark))
        df.write.format("minilog").options(**options).mode("append").save()
    return write
