"""A class-data sharing archive (JDK CDS) of the classes a Spark driver loads, for the suite's
Spark JVMs: sessions, spark-submit jobs, demos, mirrors.

The suite starts about a hundred Spark drivers, and loading and verifying Spark's classes from
its jars is most of a driver's start (measured on 2 busy cores: a session's start and a small
aggregation took 21-24 s without the archive, 11-15 s with it). The JVM maps the classes from a
dynamic archive instead (`-XX:SharedArchiveFile`): the same classes, the same code, loaded from
a file that one JVM wrote at its exit (`-XX:ArchiveClassesAtExit`) after running `workload`.

The archive is written once per machine, Java and pyspark, beside the run (`start_build`, in the
background: the drivers that start before it exists run as before) and found there by later
runs. The JVM checks that it matches its own classpath and jars, and silently does without it
when it does not (a missing, partly written or stale archive only costs the sharing);
`-Xlog:cds=off` keeps its notes off the jobs' outputs, which tests read line by line.
"""
import hashlib
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyspark

STALE_BUILD_S = 900.0  # a build marker older than this was left by a killed run


def archive_path() -> Path:
    """Where this machine's archive for this Java and this pyspark lives."""
    java = os.path.realpath(os.path.join(os.environ["JAVA_HOME"], "bin", "java")) \
        if os.environ.get("JAVA_HOME") else os.path.realpath(shutil.which("java") or "java")
    jars = Path(pyspark.__file__).parent / "jars"
    key = f"{java}:{_mtime(java)}:{jars}:{pyspark.__version__}:{_mtime(jars)}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / "minilog-test-cds" / f"spark-{digest}.jsa"


def java_options(path: Path) -> str:
    """The JVM options that use the archive at `path` once it exists, silently."""
    return f"-XX:SharedArchiveFile={path} -Xlog:cds=off -Xlog:cds+dynamic=off"


def start_build(path: Path) -> subprocess.Popen | None:
    """Start writing the archive in the background unless it exists or another run is writing
    it: the builder's Popen, or None. The archive appears under its name only once whole."""
    if path.exists():
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    marker = path.with_suffix(".building")
    try:
        if time.time() - marker.stat().st_mtime > STALE_BUILD_S:
            marker.unlink()
    except FileNotFoundError:
        pass
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return None
    os.close(fd)
    partial = path.with_suffix(f".{os.getpid()}.partial")
    env = dict(os.environ)
    env["SPARK_SUBMIT_OPTS"] = " ".join(filter(None, [
        _without_archive(env.get("SPARK_SUBMIT_OPTS", "")),
        f"-XX:ArchiveClassesAtExit={partial}", "-Xlog:cds=off", "-Xlog:cds+dynamic=off"]))
    q = shlex.quote
    finish = (f"{q(sys.executable)} {q(__file__)} && mv -f {q(str(partial))} {q(str(path))}; "
              f"rm -f {q(str(partial))} {q(str(marker))}")
    return subprocess.Popen(["sh", "-c", finish], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)


def stop_build(build: subprocess.Popen | None, path: Path) -> None:
    """Stop an unfinished build (a run shorter than the build) with all it started, and remove
    what it leaves: a later run builds again."""
    from proctree import kill_tree, tree
    if build is None or build.poll() is not None:
        return
    kill_tree(tree(build.pid))
    build.wait()
    for leftover in (path.with_suffix(f".{os.getpid()}.partial"), path.with_suffix(".building")):
        leftover.unlink(missing_ok=True)


def workload() -> None:
    """What most of the suite's drivers do, so that their classes are in the archive: a session
    as the suite configures it, a shuffle, Arrow to and from Python, a stateful streaming query."""
    from pyspark.sql import SparkSession
    spark = (SparkSession.builder.master("local[2,4]").appName("minilog-cds")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.host", "127.0.0.1")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.python.daemon.module", "minilog.datasource.worker_daemon")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    df = spark.range(1000).selectExpr("id % 7 AS k", "CAST(id AS STRING) AS v")
    df.groupBy("k").count().collect()
    df.mapInArrow(lambda batches: batches, df.schema).collect()
    with tempfile.TemporaryDirectory() as checkpoint:
        stream = (spark.readStream.format("rate-micro-batch").option("rowsPerBatch", 100).load()
                  .selectExpr("value % 3 AS k").groupBy("k").count())
        query = (stream.writeStream.outputMode("update").format("noop")
                 .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
        query.awaitTermination(300)
        query.stop()
    jvm = spark.sparkContext._gateway.proc  # the JVM writes the archive as it exits
    spark.stop()
    jvm.stdin.close()  # its gateway ends when its standard input does
    jvm.wait(300)


def _without_archive(options: str) -> str:
    return " ".join(o for o in options.split() if "SharedArchiveFile" not in o
                    and not o.startswith("-Xlog:cds"))


def _mtime(path: str | Path) -> int:
    try:
        return int(os.stat(path).st_mtime)
    except OSError:
        return 0


if __name__ == "__main__":
    workload()
