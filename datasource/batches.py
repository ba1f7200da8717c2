"""Update-mode aggregations, written one micro-batch at a time through the batch sink.

Spark's Python streaming sinks take Append and Complete output modes only, so an update-mode
aggregation goes through `foreachBatch`: each micro-batch's updated rows are written with the
batch writer. `write_each_batch` is that function, with the save mode Python data sources need.
"""
import importlib.util
from typing import Any


def statically_registered() -> bool:
    """Whether Spark already knows `format("minilog")` without a registration line: at session
    start pyspark registers the `DefaultSource` of every top-level `pyspark_*` module it finds
    (setup.py installs `pyspark_minilog`). Registering again only makes Spark warn "The data
    source minilog replaced a statically registered data source"."""
    return importlib.util.find_spec("pyspark_minilog") is not None


def register(spark: Any, *, even_if_installed: bool = False) -> None:
    """Register `format("minilog")` in `spark` where it is not installed (pip-installed, Spark
    finds it by name, and this does nothing).

    `even_if_installed`: for a long-lived process whose queries must not hang on Spark's own
    search (a Python process it gives 10 s to start, which a loaded machine can miss, failing
    every query that names the format): registered all the same, at the price of Spark's one
    "replaced a statically registered data source" warning."""
    if statically_registered() and not even_if_installed:
        return
    from .registration import register as register_source
    from .source import MinilogDataSource
    register_source(spark, MinilogDataSource)


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
