"""`minilog mirror mm2.properties [--clusters B]`: MirrorMaker 2's properties file, each enabled
flow (into the `--clusters` given) run as a Spark streaming query in one local Spark session,
the flows' background work (topic refresh, offset syncs and checkpoints, heartbeats) in a
thread beside them; until Ctrl-C or SIGTERM, which stop the queries between two micro-batches
(exit 130 or 143)."""
from __future__ import annotations

import logging
import os
import sys
from typing import TextIO

from pyspark.sql import SparkSession

from minilog.connector.properties import read_properties
from minilog.datasource.registration import register as register_source
from minilog.datasource.source import MinilogDataSource
from minilog.jobs.interrupts import CTRL_C
from minilog.jobs.pipeline import run as run_queries

from . import flow as flows
from .background import Background
from .config import MirrorConfig, mirror_config, targeting
from .sink import MirrorDataSource

log = logging.getLogger("minilog.mirror")


def spark_session(config: MirrorConfig) -> SparkSession:
    """The mirror's local Spark session: `spark.*` settings from the properties file."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = (SparkSession.builder.appName("minilog-mirror")
               .master(config.spark.get("spark.master", "local[*,4]"))
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.python.worker.reuse", "true")
               # tasks' Python workers fork with the connector imported (worker_daemon.py)
               .config("spark.python.daemon.module", "minilog.datasource.worker_daemon")
               .config("spark.sql.streaming.stopTimeout", "30s"))
    for key, value in config.spark.items():
        if key not in ("spark.master", "spark.sql.streaming.checkpointLocation"):
            builder = builder.config(key, value)
    spark = CTRL_C.start_spark(builder)
    spark.sparkContext.setLogLevel("ERROR")
    # Spark would find format("minilog") by itself, through a Python process it gives 10 s to
    # start; registered here so that a loaded machine cannot fail that search
    register_source(spark, MinilogDataSource)
    register_source(spark, MirrorDataSource)
    return spark


def run(properties_path: str, out: TextIO, clusters: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="[%(asctime)s] %(levelname)s %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    config = mirror_config(read_properties(properties_path))
    # every enabled flow counts, also those another process serves (MM2's heartbeats rule)
    enabled = {(f.source, f.target) for f in config.flows}
    config = targeting(config, clusters)
    background = [Background(f, (f.target, f.source) in enabled) for f in config.flows]
    for b in background:
        b.prepare()
    spark = spark_session(config)
    try:
        queries = [flows.start(spark, f, config.checkpoint_root) for f in config.flows]
        for b in background:
            b.start()
        out.write(f"mirroring {', '.join(f.name for f in config.flows)} "
                  f"(checkpoints in {config.checkpoint_root}); Ctrl-C stops it\n")
        out.flush()
        return run_queries(queries)
    finally:
        for b in background:
            b.stop()
        spark.stop()
