"""Events that arrived too late for their window, counted as a query drops them.

An event-time aggregation with a watermark drops the input rows older than the watermark; Spark
counts them in each micro-batch's progress (`stateOperators[].numRowsDroppedByWatermark`) and
nowhere else. `LateEvents` listens to one query's progress, prints a line for each batch that
dropped rows, and the total once the query has ended, so a run says how much it discarded.
"""
import sys
import threading

from pyspark.sql.streaming import StreamingQueryListener


class LateEvents(StreamingQueryListener):
    """The rows dropped by the watermark in the query named `query`, `what` naming them in the
    printed lines ("late page views")."""

    def __init__(self, spark, query, what, out=None):
        self.query, self.what, self.dropped = query, what, 0
        self._out = out
        self._ids, self._ended = set(), threading.Event()
        self._spark = spark
        spark.streams.addListener(self)

    def onQueryStarted(self, event):
        if event.name == self.query:
            self._ids.add(event.id)

    def onQueryProgress(self, event):
        p = event.progress
        if p.name != self.query:
            return
        dropped = sum(op.numRowsDroppedByWatermark for op in p.stateOperators)
        if dropped:
            self.dropped += dropped
            self._print(f"batch {p.batchId}: {dropped} {self.what} dropped (past the watermark), "
                        f"{self.dropped} in all")

    def onQueryIdle(self, event):
        pass

    def onQueryTerminated(self, event):
        if event.id in self._ids:
            self._ended.set()

    def report(self, timeout=60):
        """Once the query's last progress is in (Spark delivers it before the query's end),
        print the total and stop listening. Returns the total."""
        if self._ids:
            self._ended.wait(timeout)
        self._spark.streams.removeListener(self)
        self._print(f"{self.what} dropped (past the watermark): {self.dropped}")
        return self.dropped

    def _print(self, line):
        print(f"{self.query}: {line}", file=self._out or sys.stdout, flush=True)
