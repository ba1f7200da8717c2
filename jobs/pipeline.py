"""What every pipeline job shares: its command line, its Spark session, its trigger.

Each job is a module with `main(argv)`, run either by spark-submit

    spark-submit --properties-file spark-conf/spark-defaults.conf jobs/bank_balance.py ...

or as `python -m minilog.jobs.bank_balance ...`, which starts Spark with the same properties
file (found beside the installed package, the repository's `spark-conf/`). Jobs read and write
topics only through `format("minilog")`.
"""
import argparse
import os
import sys
import time
import uuid
from pathlib import Path

from minilog.jobs.interrupts import CTRL_C

TRIGGERS = ("available-now", "processing-time=<interval>", "continuous-until-stopped")
SPARK_CONF = Path(os.environ.get("MINILOG_SPARK_CONF",
                                 Path(__file__).resolve().parent.parent / "spark-conf"))
# from_json/to_json options: event times read and written as "2026-11-24T10:00:05Z", in UTC
# whatever the session's time zone.
UTC_JSON = {"timestampFormat": "yyyy-MM-dd'T'HH:mm:ssXXX", "timeZone": "UTC"}
# Spark 4 waits a fixed 10 s, with no setting to change it (PythonWorkerFactory.createSimpleWorker),
# for the Python process behind a streaming source to connect back to the driver. A starved machine
# can miss that, and the query then fails before it has read anything: start_query starts it again.
SOURCE_WORKER_LATE = "Python worker failed to connect back"
STARTS = 3
# After Ctrl-C, how long a running micro-batch may take to finish before the job exits with the
# batch unfinished (run()): a few seconds, not a whole batch (58 s were seen).
BATCH_FINISH_S = 3.0


def parser(prog, description, topics):
    """The common options, plus one `--<name>-topic` option per entry of `topics`."""
    p = argparse.ArgumentParser(prog=prog, description=description, allow_abbrev=False)
    p.add_argument("--bootstrap-servers", default="127.0.0.1:9092",
                   help="the Kafka-compatible cluster (default 127.0.0.1:9092)")
    p.add_argument("--checkpoint", help="checkpoint directory of the streaming query "
                   "(default: spark.sql.streaming.checkpointLocation/<job>)")
    p.add_argument("--trigger", default="available-now", type=trigger_of,
                   help="available-now (default), processing-time=<interval> such as "
                        "'processing-time=5 seconds', or continuous-until-stopped")
    p.add_argument("--starting-offsets", default="earliest",
                   help="where a new query starts: earliest (default), latest or group")
    p.add_argument("--max-offsets-per-trigger", type=int,
                   help="records per micro-batch at most")
    p.add_argument("--group-id", help="consumer group the query commits its progress to "
                   "(default: minilog-<job>)")
    for name, default in topics.items():
        p.add_argument(f"--{name}-topic", default=default, help=f"default {default}")
    return p


def trigger_of(text):
    """'available-now' | 'processing-time=<interval>' | 'continuous-until-stopped' as
    keyword arguments of DataStreamWriter.trigger (None: Spark's default, as fast as it can)."""
    if text == "available-now":
        return {"availableNow": True}
    if text.startswith("processing-time="):
        return {"processingTime": text.split("=", 1)[1]}
    if text == "continuous-until-stopped":
        return None
    raise argparse.ArgumentTypeError(f"unknown trigger {text!r}: one of {', '.join(TRIGGERS)}")


def session(app_name):
    """The active SparkSession (spark-submit's), or one started as spark-submit would, on
    spark-conf/'s settings (their master: local[*,4], local mode with task retries)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if "PYSPARK_GATEWAY_PORT" not in os.environ and "PYSPARK_SUBMIT_ARGS" not in os.environ:
        # Not under spark-submit: launch Spark's JVM as spark-submit would, with our settings.
        args = []
        if (SPARK_CONF / "spark-defaults.conf").is_file():
            args += ["--properties-file", str(SPARK_CONF / "spark-defaults.conf")]
        if (SPARK_CONF / "log4j2.properties").is_file():
            args += ["--driver-java-options",
                     f"-Dlog4j2.configurationFile=file:{SPARK_CONF / 'log4j2.properties'}"]
        os.environ["PYSPARK_SUBMIT_ARGS"] = " ".join(args + ["pyspark-shell"])
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # No master set here: spark-submit's --master (or the properties file's) decides.
    from pyspark.sql import SparkSession
    # Ctrl-C from here on: one line, a stop between two Spark calls
    return CTRL_C.start_spark(SparkSession.builder.appName(app_name))


def read_topic(spark, args, topic, job, query=None):
    """A streaming DataFrame of `topic`, in the schema of Spark's Kafka source. A job with
    several queries names each (`query`): each commits its progress to a group of its own."""
    group = (args.group_id or f"minilog-{job}") + (f"-{query}" if query else "")
    reader = (spark.readStream.format("minilog")
              .option("kafka.bootstrap.servers", args.bootstrap_servers)
              .option("subscribe", topic)
              .option("startingOffsets", args.starting_offsets)
              .option("kafka.group.id", group))
    if args.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(args.max_offsets_per_trigger))
    return reader.load()


def checkpoint(spark, args, job, query):
    """The checkpoint directory of one of the job's queries."""
    base = args.checkpoint or os.path.join(
        spark.conf.get("spark.sql.streaming.checkpointLocation", "/tmp/minilog-checkpoints"),
        job)
    return os.path.join(base, query)


def start(writer, args, spark, job, query):
    """Start a query with the job's trigger and checkpoint."""
    writer = writer.option("checkpointLocation", checkpoint(spark, args, job, query))
    if args.trigger is not None:
        writer = writer.trigger(**args.trigger)
    return start_query(writer.queryName(f"{job}_{query}".replace("-", "_")))


def checkpoint_token(checkpoint):
    """A token kept in the checkpoint directory: the same for as long as the checkpoint lives,
    new with a new one. An exactly-once query's transactional id prefix carries it, so that a
    restarted query fences its earlier self, and a new checkpoint (whose batch ids start again
    from 0) never meets the decisions its predecessor recorded."""
    token_file = os.path.join(checkpoint, "transactional-id-token")
    if not os.path.exists(token_file):
        os.makedirs(checkpoint, exist_ok=True)
        with open(token_file + ".tmp", "w") as f:
            f.write(uuid.uuid4().hex[:12])
        os.replace(token_file + ".tmp", token_file)
    with open(token_file) as f:
        return f.read().strip()


def start_query(writer, starts=STARTS):
    """writer.start(), returned once the query's sources are initialized. A query that failed
    only because Spark stopped waiting for a source's Python process is started again from its
    checkpoint, as a supervisor restarts a failed job; any other failure is left to the caller."""
    for attempt in range(1, starts + 1):
        query = writer.start()
        # Spark's status messages until its sources exist: "Initializing StreamExecution",
        # then "Initializing sources" (StreamExecution.runStream).
        while query.isActive and query.status["message"].startswith("Initializing"):
            time.sleep(0.1)
            CTRL_C.check()  # a job's Ctrl-C: sources take seconds to start on a busy machine
        failure = None if query.isActive else query.exception()
        if failure is None or SOURCE_WORKER_LATE not in str(failure) or attempt == starts:
            return query
        print(f"{query.name or 'query'}: Spark's source worker did not start in time; "
              f"starting the query again ({attempt + 1} of {starts})", file=sys.stderr)


def _quiet_jvm():
    """After Ctrl-C the job says one line: Spark's log off, and the JVM's own stderr too, where
    a query thread that Spark's shutdown interrupts inside its batch prints its uncaught
    exception ("Exception in thread "stream execution thread ..."), seen on busy machines."""
    from pyspark import SparkContext
    sc = SparkContext._active_spark_context  # none left: nothing to silence, nothing to start
    if sc is None:
        return
    try:
        sc.setLogLevel("OFF")
        jvm = sc._jvm
        jvm.java.lang.System.setErr(jvm.java.io.PrintStream(jvm.java.io.OutputStream
                                                            .nullOutputStream()))
    except Exception:  # noqa: BLE001 - a JVM already going away prints nothing more either
        pass


def run(queries):
    """Wait for the queries: to their end under available-now, else until Ctrl-C or SIGTERM;
    stop them cleanly either way. Raises the first query's failure, as soon as it fails.

    After Ctrl-C (exit status 130) or SIGTERM (143), with Spark's log off, a query between two
    micro-batches, or whose batch ends within BATCH_FINISH_S, is stopped; one still inside its
    batch is left to end with the process (Spark's shutdown, as spark-submit's JVM or the
    driver's own exits, kills its tasks), not stopped: stopping a query inside a
    `foreachBatch` batch makes Spark print a StackOverflowError of a thousand lines (it matches
    the batch's whole Py4J traceback against a regular expression). Either way its checkpoint
    holds what it committed, and the next start replays the unfinished batch."""
    # Silenced at the interruption itself, not at the next check(): the batch under way may
    # end meanwhile and Spark log that it fell behind its trigger.
    CTRL_C.when_requested(_quiet_jvm)
    try:
        pending = list(queries)
        while pending:  # awaitTermination raises a query's failure
            try:
                pending = [q for q in pending if not q.awaitTermination(1)]
            finally:  # after Ctrl-C, a failure the signal caused (a Python worker it reached)
                CTRL_C.check()  # is the interruption, not an error of the job's
    except KeyboardInterrupt:
        _quiet_jvm()
        finish_by = time.monotonic() + BATCH_FINISH_S
        for q in queries:
            while q.isActive and q.status["isTriggerActive"] and time.monotonic() < finish_by:
                time.sleep(0.05)
            if not (q.isActive and q.status["isTriggerActive"]):
                q.stop()
        return CTRL_C.exit_status
    finally:
        if not CTRL_C.requested:
            for q in queries:
                q.stop()
        CTRL_C.release()
    for q in queries:
        if q.exception() is not None:
            raise q.exception()
    return 0
