"""log_aggregation: log lines counted by service and level per minute; ERROR lines forwarded.

`logs` holds one record per application log line, its value JSON with the event time as an
ISO-8601 timestamp with its offset, the service, the level and the message:
`{"ts": "2026-11-24T10:00:05Z", "service": "api", "level": "ERROR", "message": "db timeout"}`.
Lines that are not such JSON (no ts, service or level) are skipped.

Two queries:
- `per-minute`: the lines per service and level in each 1-minute event-time window, written to
  `logs.per-minute` as the counts change (update output mode, through `write_each_batch`), so
  the current minute is visible while it lasts. Key = `<service>/<level>/<window start>`,
  value = JSON `{"window_start", "window_end", "service", "level", "lines"}` (UTC timestamps):
  the latest record of a key is its count (the topic can be compacted). A window stops
  changing once the watermark (latest event time seen, less `--watermark`) passes its end;
  its state is then dropped, and later lines for it are dropped and counted (printed, as
  clickstream does).
- `alerts`: every ERROR line, as it arrives, copied unchanged to `alerts` (key = service):
  append output mode through the streaming sink, no windows, so late lines are forwarded too.
"""
import sys

from minilog.jobs.interrupts import CTRL_C

CTRL_C.install_for(__name__)  # first: Ctrl-C during the imports below is one line too

from minilog.datasource import write_each_batch  # noqa: E402
from minilog.jobs import pipeline  # noqa: E402
from minilog.jobs.late_events import LateEvents  # noqa: E402

JOB = "log_aggregation"
LOGS, PER_MINUTE, ALERTS = "logs", "logs.per-minute", "alerts"


def parsed(logs):
    """The log lines with their fields (ts, service, level, value), unreadable ones skipped."""
    from pyspark.sql import functions as F
    line = F.from_json(F.col("value").cast("string"),
                       "ts TIMESTAMP, service STRING, level STRING", pipeline.UTC_JSON)
    return (logs.select(line.alias("line"), "value")
            .select("line.ts", "line.service", F.upper("line.level").alias("level"), "value")
            .where(F.col("ts").isNotNull() & F.col("service").isNotNull()
                   & F.col("level").isNotNull()))


def lines_per_minute(lines, watermark):
    """Lines per service and level in 1-minute windows, as records of `logs.per-minute`."""
    from pyspark.sql import functions as F
    return (lines.withWatermark("ts", watermark)
            .groupBy(F.window("ts", "1 minute"), "service", "level")
            .agg(F.count("*").alias("lines"))
            .select("service", "level", F.to_json(F.struct(
                F.col("window.start").alias("window_start"),
                F.col("window.end").alias("window_end"), "service", "level", "lines"),
                pipeline.UTC_JSON).alias("value"))
            .select(F.concat_ws("/", "service", "level",
                                F.get_json_object("value", "$.window_start")).alias("key"),
                    "value"))


def alerts(lines):
    """The ERROR lines, unchanged, keyed by service."""
    from pyspark.sql import functions as F
    return lines.where(F.col("level") == "ERROR").select(F.col("service").alias("key"), "value")


def main(argv=None):
    p = pipeline.parser("log_aggregation", __doc__.splitlines()[0], {
        "logs": LOGS, "per-minute": PER_MINUTE, "alerts": ALERTS})
    p.add_argument("--watermark", default="1 minute",
                   help="how late a line may arrive and still be counted (default 1 minute)")
    args = p.parse_args(argv)
    spark = pipeline.session(JOB)
    counts = (lines_per_minute(parsed(pipeline.read_topic(spark, args, args.logs_topic, JOB,
                                                          "per-minute")), args.watermark)
              .writeStream.outputMode("update")
              .foreachBatch(write_each_batch({"kafka.bootstrap.servers": args.bootstrap_servers,
                                              "topic": args.per_minute_topic})))
    errors = (alerts(parsed(pipeline.read_topic(spark, args, args.logs_topic, JOB, "alerts")))
              .writeStream.outputMode("append").format("minilog")
              .option("kafka.bootstrap.servers", args.bootstrap_servers)
              .option("topic", args.alerts_topic))
    late = LateEvents(spark, f"{JOB}_per_minute", "late log lines")
    try:
        return pipeline.run([pipeline.start(counts, args, spark, JOB, "per-minute"),
                             pipeline.start(errors, args, spark, JOB, "alerts")])
    finally:
        late.report()


if __name__ == "__main__":
    sys.exit(main())
