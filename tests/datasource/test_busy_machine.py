"""A streaming query on a machine whose cores are saturated: two busy-loop processes for as
long as the query runs (killed by pid after), a small `format("minilog")` copy in micro-batches
run to completion. Spark waits a fixed 10 s for each Python process it starts to connect back
(PythonWorkerFactory; no setting changes it in Spark 4.3); when even the query's restarts
(start_query's at its start, and from its checkpoint after, as the README advises on a busy
machine) do not get one started in time, the failure says that it was that wait.

The first micro-batch is the costly one (Spark starts its Python processes: 28 s of the
query's 42 s with two busy loops, 104 s of 142 s on a machine already at load 5): two batches
show the second reusing them, a third would only add time."""
import contextlib
import subprocess
import sys
import time

import pytest
from sparktools import consume_all, create_topic, minilog_copy, produce, unique

from minilog.jobs.pipeline import SOURCE_WORKER_LATE, STARTS, start_query

HOGS = 2
RECORDS, PER_TRIGGER = 200, 100
SPARK_WORKER_LATE = ("Timed out while waiting for the Python worker to connect back",
                     SOURCE_WORKER_LATE, "CANNOT_OPEN_SOCKET")


@contextlib.contextmanager
def busy_cores():
    """HOGS processes spinning on the CPU for the block's length; killed by their pids."""
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(HOGS)]
    try:
        yield
    finally:
        for h in hogs:
            h.kill()
            h.wait(30)


def worker_late(failure):
    return failure is not None and any(m in str(failure) for m in SPARK_WORKER_LATE)


def run_to_end(writer):
    """The query run to its end, started again from its checkpoint when it failed only because
    Spark stopped waiting for a Python worker (the README's restart policy for a busy machine);
    (the last query, whether it finished, its failure, how many times it was started again)."""
    from pyspark.errors import StreamingQueryException
    for restarts in range(STARTS):
        query = start_query(writer)
        try:
            finished = query.awaitTermination(600)
        except StreamingQueryException:  # awaitTermination raises the query's failure
            finished = True
        finally:
            query.stop()
        if not worker_late(query.exception()):
            break
    return query, finished, query.exception(), restarts


def test_a_streaming_copy_finishes_with_the_cores_saturated(spark, broker, tmp_path):
    source = create_topic(broker.bootstrap, unique("busy-in"), 2)
    sink = create_topic(broker.bootstrap, unique("busy-out"), 2)
    values = [f"v{i}".encode() for i in range(RECORDS)]
    produce(broker.bootstrap, source, [(i % 2, f"k{i}".encode(), v, None)
                                       for i, v in enumerate(values)])
    writer = minilog_copy(spark, broker.bootstrap, source, sink, tmp_path / "ck", PER_TRIGGER)
    began = time.monotonic()
    with busy_cores():
        query, finished, failure, restarts = run_to_end(writer)
    print(f"query ran {time.monotonic() - began:.0f} s with {HOGS} busy loops, started again "
          f"{restarts} times; micro-batches of its last start (ms): "
          f"{[p['durationMs'].get('triggerExecution') for p in query.recentProgress]}")
    if worker_late(failure):
        pytest.fail(f"Spark's Python worker did not connect back within Spark's fixed 10 s "
                    f"(PythonWorkerFactory) with {HOGS} busy-loop processes running, in "
                    f"{STARTS} starts: {str(failure)[:500]}")
    assert failure is None, failure
    assert finished, "the query did not finish in 600 s with the cores saturated"
    copied = sorted(v for *_, v, _h in consume_all(broker.bootstrap, sink, 2))
    if restarts == 0:
        assert len([p for p in query.recentProgress if p["numInputRows"]]) >= 2, \
            f"{RECORDS} records at {PER_TRIGGER} per trigger make two micro-batches"
        assert copied == sorted(values)
    else:  # at-least-once: a batch that failed may have been written before it is replayed
        assert set(copied) == set(values), "records lost or foreign records in the copy"
