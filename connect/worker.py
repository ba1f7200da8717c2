"""`minilog connect worker.properties`: read the settings, bind the REST listener (a port in use
is one line, not a traceback), start the local Spark session and the herder (which replays the
three topics and restarts the connectors, or with none to restart starts Spark's Python
processes ahead of the first, warmup.py), then serve Connect's REST API until SIGTERM/Ctrl-C,
stopping every connector's query on the way out."""
from __future__ import annotations

import logging
import os
import sys
from typing import TextIO

import uvicorn
from pyspark.sql import SparkSession

from minilog.connector.client import AdminClient
from minilog.connector.properties import read_properties
from minilog.console.server import bind  # a port in use is one line, as for the console
from minilog.datasource import register
from minilog.datasource.registration import register as register_source
from minilog.mirror.sink import MirrorDataSource

from .file_source import FileLinesDataSource
from .herder import Herder
from .rest import create_app
from .worker_config import WorkerConfig, worker_config

log = logging.getLogger("minilog.connect")


def spark_session(worker: WorkerConfig) -> SparkSession:
    """The worker's one local Spark session (`spark.*` settings from the worker properties)."""
    # Spark's Python workers (and its search for pyspark_* data sources) run this interpreter,
    # the one minilog is installed in, not whichever python3 comes first on PATH
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = (SparkSession.builder.appName(f"minilog-connect-{worker.group_id}")
               .master(worker.spark.get("spark.master", "local[2]"))
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.streaming.stopTimeout", "30s")
               # tasks' Python workers fork with the connector imported (worker_daemon.py)
               .config("spark.python.daemon.module", "minilog.datasource.worker_daemon"))
    for key, value in worker.spark.items():
        if key != "spark.sql.streaming.checkpointLocation":
            builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register_source(spark, FileLinesDataSource)  # the connectors' own, not installed
    register_source(spark, MirrorDataSource)  # MirrorSourceConnector's sink
    # a worker's connectors must not depend on Spark's search for format("minilog")
    register(spark, even_if_installed=True)
    return spark


def cluster_id(worker: WorkerConfig) -> str:
    admin = AdminClient(worker.client_config())
    try:
        return admin.describe_cluster(timeout=60).cluster_id or ""
    finally:
        admin.close()


def run(properties_path: str, out: TextIO) -> None:
    logging.basicConfig(level=logging.INFO, format="[%(asctime)s] %(levelname)s %(message)s")
    worker = worker_config(read_properties(properties_path))
    sock = bind(worker.host, worker.port)
    port = sock.getsockname()[1]
    ident = cluster_id(worker)
    spark = spark_session(worker)
    herder = Herder(worker, spark)
    try:
        herder.start()
        out.write(f"connect worker {worker.worker_id} at http://{worker.host}:{port}/ "
                  f"(group {worker.group_id}, cluster {worker.bootstrap_servers}); "
                  f"Ctrl-C stops it\n")
        out.flush()
        server = uvicorn.Server(uvicorn.Config(create_app(herder, ident), log_level="warning"))
        server.run(sockets=[sock])
    finally:
        herder.stop()
        spark.stop()
