"""The PySpark connector: `spark.read.format("minilog")`, `spark.readStream.format("minilog")`,
`df.write.format("minilog")` and `df.writeStream.format("minilog")`.

Options and schema are those of Spark's built-in Kafka source and sink, so moving a job from
`format("kafka")` to `format("minilog")` changes nothing else; the connector is a Kafka client,
so it works against minilog and any Kafka-compatible cluster. Installed with minilog, the
format is found by name (the top-level module `pyspark_minilog`); `register(spark)` does the
same explicitly.
"""
from .batches import register, write_each_batch
from .errors import OptionError
from .progress import offsets_behind_latest, offsets_read
from .source import MinilogDataSource, kafka_schema

__all__ = ["MinilogDataSource", "OptionError", "kafka_schema", "offsets_behind_latest",
           "offsets_read", "register", "write_each_batch"]
