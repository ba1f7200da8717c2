"""Spark's Python workers fork from minilog's daemon (spark-conf/'s `spark.python.daemon.module`),
which has the connector and its Kafka client imported before it forks: a worker starts with
them loaded. Nothing it imports may start threads (numpy's and pyarrow's do): a fork keeps only
the thread that forked."""
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent


def test_python_workers_fork_from_a_daemon_with_the_client_imported(spark):
    def where(_):
        import os
        import sys
        with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
            parent = f.read().replace(b"\0", b" ").decode()
        machinery = {"minilog.connector.client.producer", "minilog.connector.client.sync_consumer"}
        yield parent, machinery | {"minilog.datasource"} <= set(sys.modules)
    # a fresh worker: a plain RDD task imports nothing of minilog's by itself
    (parent, loaded), = spark.sparkContext.parallelize([0], 1).mapPartitions(where).collect()
    assert "-m minilog.datasource.worker_daemon" in parent, parent
    assert loaded


def test_spark_conf_names_the_same_daemon():
    conf = (REPO / "spark-conf" / "spark-defaults.conf").read_text()
    assert re.search(r"^spark\.python\.daemon\.module\s+minilog\.datasource\.worker_daemon$",
                     conf, re.M)


def test_the_daemon_imports_nothing_that_starts_threads():
    probe = ("import sys, runpy; sys.argv = ['x']; "
             "runpy.run_module('minilog.datasource.worker_daemon', run_name='not_main'); "
             "threads = open('/proc/self/status').read().split('Threads:')[1].split()[0]; "
             "print(threads, sorted({'numpy', 'pyarrow', 'pandas'} & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=120, check=True).stdout.split("\n")[0]
    assert out == "1 []", out
