"""Spark's Python daemon with minilog's connector and client imported once, before it forks.

Spark runs a task's Python by forking a daemon (`pyspark.daemon`): each fork imports what its
work needs. A `format("minilog")` job forks a worker for its read and write tasks, again after
a worker dies or idles out, and each imported the connector and minilog's client, half a second
of CPU (the client package imports its classes on first use: they are named here). Imported here, before the forks, they are shared. (The data source's planning steps,
lookup, create, plan the read, write, commit, fork from Spark's own daemon whatever this
setting says.) What starts threads when imported (numpy, pyarrow, pandas) is still imported
after the fork, as `pyspark.daemon` does: a fork keeps only the thread that forked, and a
library whose threads vanished can hang.

Its objects are frozen before it forks (`worker_gc.py`): the collection pyspark's daemon runs
after every task then skips them, and does not write to, and so copy, every page a fork shares.

Spark uses it with `spark.python.daemon.module minilog.datasource.worker_daemon`
(spark-conf/spark-defaults.conf); it is Spark's own daemon otherwise.
"""
import gc

import minilog.datasource  # noqa: F401 - imported for the forks
from minilog.connector.client import AdminClient, Consumer, Producer  # noqa: F401 - the same
from pyspark.daemon import manager

if __name__ == "__main__":
    gc.collect()
    gc.freeze()
    manager()
