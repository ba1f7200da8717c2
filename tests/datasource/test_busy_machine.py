"""A streaming query on a machine whose cores are saturated: two busy-loop processes for the
test's length (killed by pid after), a small `format("minilog")` copy in micro-batches run to
completion. Spark waits a fixed 10 s for each Python process it starts to connect back
(PythonWorkerFactory; no setting changes it in Spark 4.3); when even the query's restarts
(start_query) do not get one started in time, the failure says that it was that wait."""
import subprocess
import sys

import pytest
from sparktools import consume_all, create_topic, minilog_copy, produce, unique

from minilog.jobs.pipeline import SOURCE_WORKER_LATE, start_query

HOGS = 2
SPARK_WORKER_LATE = ("Timed out while waiting for the Python worker to connect back",
                     SOURCE_WORKER_LATE, "CANNOT_OPEN_SOCKET")


@pytest.fixture
def busy_cores():
    """Two processes spinning on the CPU until the test ends; killed by their pids."""
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(HOGS)]
    try:
        yield [h.pid for h in hogs]
    finally:
        for h in hogs:
            h.kill()
            h.wait(30)


def test_a_streaming_copy_finishes_with_the_cores_saturated(spark, broker, tmp_path,
                                                            busy_cores):
    source = create_topic(broker.bootstrap, unique("busy-in"), 2)
    sink = create_topic(broker.bootstrap, unique("busy-out"), 2)
    produce(broker.bootstrap, source,
            [(i % 2, f"k{i}".encode(), f"v{i}".encode(), None) for i in range(300)])
    writer = minilog_copy(spark, broker.bootstrap, source, sink, tmp_path / "ck", 100)
    query = start_query(writer)
    try:
        finished = query.awaitTermination(600)
        failure = query.exception()
    finally:
        query.stop()
    if failure is not None and any(m in str(failure) for m in SPARK_WORKER_LATE):
        pytest.fail(f"Spark's Python worker did not connect back within Spark's fixed 10 s "
                    f"(PythonWorkerFactory) with {HOGS} busy-loop processes running: "
                    f"{str(failure)[:500]}")
    assert failure is None, failure
    assert finished, "the query did not finish in 600 s with the cores saturated"
    assert len([p for p in query.recentProgress if p["numInputRows"]]) >= 3, \
        "300 records at 100 per trigger make three micro-batches"
    copied = consume_all(broker.bootstrap, sink, 2, expect=300)
    assert sorted(v for *_, v, _h in copied) == sorted(f"v{i}".encode() for i in range(300))
