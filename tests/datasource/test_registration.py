"""minilog's own registration of a Python data source (the Connect worker's and the mirror's
sessions, where several queries start at once): the functions Spark makes from it keep their
environment in a `java.util.Hashtable`, whose serialization cannot see a map half-changed by a
Python runner of another task (pyspark's `java.util.HashMap` can, and the task then fails to
deserialize: `OptionalDataException`); and queries started together through it read what
was written."""
import threading

from minilog.datasource.registration import register
from minilog.datasource.source import MinilogDataSource
from sparktools import create_topic, produce, run_available_now, unique


def test_registered_sources_keep_their_environment_whole_and_read_together(spark, broker,
                                                                            tmp_path):
    register(spark, MinilogDataSource)
    source = spark._jsparkSession.sessionState().dataSourceManager().lookupDataSource("minilog")
    assert source.dataSourceCls().envVars().getClass().getName() == "java.util.Hashtable"

    topic = create_topic(broker.bootstrap, unique("together"), 2)
    produce(broker.bootstrap, topic, [(i % 2, None, b"v%d" % i, None) for i in range(40)])
    counts, errors = {}, []

    def copy(i):
        try:
            df = (spark.readStream.format("minilog")
                  .option("kafka.bootstrap.servers", broker.bootstrap)
                  .option("subscribe", topic).option("startingOffsets", "earliest").load())
            run_available_now(df, str(tmp_path / f"cp{i}"), name=f"together{i}")
            counts[i] = spark.sql(f"select count(*) from together{i}").first()[0]
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)
    threads = [threading.Thread(target=copy, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)
    assert not errors, errors[0]
    assert counts == {i: 40 for i in range(4)}
