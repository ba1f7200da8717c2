"""clickstream: page views per page per minute of event time, each minute written once, when closed.

`pageviews` holds one record per page view, its value JSON with the page, the user and the
event time as an ISO-8601 timestamp with its offset:
`{"page": "/home", "user": "u1", "ts": "2026-11-24T10:00:05Z"}`. Views that are not such JSON
(no page or no readable ts) are skipped.

The job counts views per page in 1-minute event-time windows and writes each window to
`pageviews.per-minute` once, when the watermark has passed its end: append output mode,
through the streaming sink. Key = page, value = JSON `{"window_start", "window_end", "page",
"views"}` with UTC timestamps (`"2026-11-24T10:00:00Z"`).

Spark moves the watermark between micro-batches: a batch's watermark is the latest event time
of the batches before it less `--watermark`, and the batch closes (writes) the windows that end
before it. A view whose window an earlier batch already wrote is dropped, and counted: the job
prints, from Spark's progress (`numRowsDroppedByWatermark`), each micro-batch that dropped views
and the total at the end. The last minutes of a stream stay open until later events arrive.
"""
import sys

from minilog.jobs.interrupts import CTRL_C

CTRL_C.install_for(__name__)  # first: Ctrl-C during the imports below is one line too

from minilog.jobs import pipeline  # noqa: E402
from minilog.jobs.late_events import LateEvents  # noqa: E402

JOB = "clickstream"
PAGEVIEWS, PER_MINUTE = "pageviews", "pageviews.per-minute"


def views_per_minute(pageviews, watermark):
    """Closed 1-minute windows of views per page from a streaming DataFrame of page views."""
    from pyspark.sql import functions as F
    view = F.from_json(F.col("value").cast("string"), "page STRING, user STRING, ts TIMESTAMP",
                       pipeline.UTC_JSON)
    return (pageviews
            .select(view.alias("v")).select("v.page", "v.ts")
            .where(F.col("page").isNotNull() & F.col("ts").isNotNull())
            .withWatermark("ts", watermark)
            .groupBy(F.window("ts", "1 minute"), "page")
            .agg(F.count("*").alias("views"))
            .select(F.col("page").alias("key"),
                    F.to_json(F.struct(F.col("window.start").alias("window_start"),
                                       F.col("window.end").alias("window_end"),
                                       "page", "views"), pipeline.UTC_JSON).alias("value")))


def main(argv=None):
    p = pipeline.parser("clickstream", __doc__.splitlines()[0], {
        "pageviews": PAGEVIEWS, "per-minute": PER_MINUTE})
    p.add_argument("--watermark", default="1 minute",
                   help="how late a view may arrive and still be counted (default 1 minute)")
    args = p.parse_args(argv)
    spark = pipeline.session(JOB)
    out = views_per_minute(pipeline.read_topic(spark, args, args.pageviews_topic, JOB),
                           args.watermark)
    writer = (out.writeStream.outputMode("append").format("minilog")
              .option("kafka.bootstrap.servers", args.bootstrap_servers)
              .option("topic", args.per_minute_topic))
    late = LateEvents(spark, f"{JOB}_per_minute", "late page views")
    try:
        return pipeline.run([pipeline.start(writer, args, spark, JOB, "per-minute")])
    finally:
        late.report()


if __name__ == "__main__":
    sys.exit(main())
