"""The exactly-once sink on three brokers (RF=3 topics, RF=3 `__transaction_state`) under the
faults of a running query, in the suite's Spark session (local[2,4]: a task is tried up to four
times, as on a cluster):

- the Python worker of a write task killed with SIGKILL while it writes: Spark retries the task,
  whose `init_transactions` fences the killed attempt and aborts what it wrote;
- the broker that coordinates a task's transaction killed with kill -9 mid-query: the
  coordinator fails over, the query carries on.

Either way a read_committed reader sees every input record once. The moment of each kill is
seeded; rerun one with `EOS_CLUSTER_SEED=<seed>`. `EOS_CLUSTER_GUARANTEE=at-least-once` runs
them against the at-least-once sink, whose retried task writes its rows again: they fail. The broker kill runs last: the module's
cluster keeps two brokers after it.
"""
import os
import random
import signal
import time

import pytest
from clustertools import TestCluster, coordinator_of
from sparkprocs import python_workers
from sparktools import create_topic, produce, unique, wait_for
from txntools import log_end, read_all

from minilog.connector.client import AdminClient, Consumer
from minilog.jobs.pipeline import start_query

pytestmark = pytest.mark.timeout(420)

ROWS = 80  # per input partition; micro-batches of 40 offsets: 4 batches
MARKERS = 4  # per micro-batch at most: two tasks' transactions, each on both output partitions
# 40 kB values: a Python worker's output stream is buffered (64 kB), small rows would reach
# the sink's writer all at once at the end of the task, however slowly they are made
INPUT = sorted(f"{p}-{i}".encode().ljust(40_000, b".") for p in range(2) for i in range(ROWS))
SEED = int(os.environ.get("EOS_CLUSTER_SEED", random.randrange(1 << 30)))
GUARANTEE = os.environ.get("EOS_CLUSTER_GUARANTEE", "exactly-once")  # at-least-once: fails


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = TestCluster(3, tmp_path_factory.mktemp("eos-cluster"), {
        "default.replication.factor": 3, "min.insync.replicas": 2,
        "transaction.state.log.num.partitions": 3, "offsets.topic.num.partitions": 3,
        "transaction.two.phase.commit.enable": "true"}).start()
    yield c
    c.destroy()


@pytest.fixture(scope="module")
def trickling(spark):
    """The session, with Arrow batches of one row between Spark and Python, so that the rows
    reach the sink's writer as slowly as they are made (else Spark hands them over at once)."""
    key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    before = spark.conf.get(key)
    spark.conf.set(key, "1")
    yield spark
    spark.conf.set(key, before)


def start_copy(spark, c, checkpoint, prefix):
    """A copy of a fresh two-partition topic of 2 x ROWS records to a fresh output topic, with
    availableNow; each task hands its rows to the sink one by one, 100 ms apart, so that a
    write (20 rows) lasts about two seconds. (query, output topic)."""
    source = create_topic(c.bootstrap, unique("eos-in"), 2)
    out = create_topic(c.bootstrap, unique("eos-out"), 2)
    produce(c.bootstrap, source, [(int(v[:1]), None, v, []) for v in INPUT])

    def slowly(batches):
        import time as t
        for batch in batches:
            for start in range(batch.num_rows):
                yield batch.slice(start, 1)
                t.sleep(0.1)

    df = (spark.readStream.format("minilog").option("kafka.bootstrap.servers", c.bootstrap)
          .option("subscribe", source).option("startingOffsets", "earliest")
          .option("maxOffsetsPerTrigger", 40).load().select("value")
          .mapInArrow(slowly, "value binary"))
    w = (df.writeStream.format("minilog").option("kafka.bootstrap.servers", c.bootstrap)
         .option("topic", out).option("deliveryGuarantee", GUARANTEE)
         .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True))
    if GUARANTEE == "exactly-once":
        w = w.option("transactionalIdPrefix", prefix)
    query = start_query(w)
    return query, out


def commits(checkpoint):
    d = checkpoint / "commits"
    return len([f for f in d.iterdir() if f.name.isdigit()]) if d.exists() else 0


def wait_mid_write(c, query, out, checkpoint, rng):
    """Wait for a seeded moment inside a write: after 1 or 2 committed micro-batches, once the
    next one's first records are in the log (more than the up to 4 markers that the last
    commit may still be adding). What was waited for, for a failure message."""
    target = rng.randint(1, 2)
    wait_for(lambda: commits(checkpoint) >= target or not query.isActive,
             f"{target} micro-batches committed", deadline=240)
    with Consumer({"bootstrap.servers": c.bootstrap}) as consumer:
        before = log_end(c.bootstrap, out, 2, consumer)
        wait_for(lambda: (log_end(c.bootstrap, out, 2, consumer) > before + MARKERS + 2
                          or not query.isActive),
                 "the next micro-batch's first records", deadline=240, step=0.01)
    assert query.isActive, f"seed {SEED}: the query ended before the fault"
    return f"after {target} commits, mid-write"


def task_transactional_id(c, prefix, partition):
    """The transactional id of the query's task `partition`: `<prefix>-<run>-<partition>`,
    the run being the writer's own (the sink's tasks have written by now)."""
    with AdminClient({"bootstrap.servers": c.bootstrap}) as admin:
        ids = [t.transactional_id for t in admin.list_transactions()
               if t.transactional_id.startswith(f"{prefix}-")
               and t.transactional_id.endswith(f"-{partition}")]
    assert len(ids) == 1, f"seed {SEED}: the transactional ids of task {partition}: {ids}"
    return ids[0]


def finish(query, c, out):
    """Wait for the query's end; what a read_committed reader then sees of `out`."""
    try:
        assert query.awaitTermination(300), f"seed {SEED}: the query did not finish"
    finally:
        query.stop()
    assert query.exception() is None, f"seed {SEED}: {query.exception()}"
    return read_all(c.bootstrap, out, "read_committed", len(INPUT), partitions=2)


def test_a_write_task_whose_python_worker_is_killed_is_retried_and_fenced(trickling, cluster,
                                                                          tmp_path):
    rng = random.Random(SEED)
    query, out = start_copy(trickling, cluster, tmp_path / "ck", unique("retried"))
    moment = wait_mid_write(cluster, query, out, tmp_path / "ck", rng)
    killed = python_workers()
    for pid in killed:
        os.kill(pid, signal.SIGKILL)
    assert killed, f"seed {SEED}: no Python worker to kill"
    got = finish(query, cluster, out)
    dups = len(got) - len(set(got))
    assert sorted(got) == INPUT, (f"seed {SEED}, workers killed {moment}: {len(got)} read, "
                                  f"{dups} duplicates, {len(set(INPUT) - set(got))} missing")
    # the killed attempt's records are in the log, aborted: the kill did land mid-write
    written = read_all(cluster.bootstrap, out, "read_uncommitted", len(INPUT) + 1,
                       partitions=2, quiet_s=0.5)
    assert len(written) > len(INPUT), (f"seed {SEED}: no write was interrupted "
                                       f"(log end {log_end(cluster.bootstrap, out, 2)})")


def test_the_sink_writes_each_record_once_through_the_kill_of_a_coordinator(trickling, cluster,
                                                                            tmp_path):
    rng = random.Random(SEED + 1)
    prefix = unique("coordinated")
    partition = rng.randint(0, 1)
    query, out = start_copy(trickling, cluster, tmp_path / "ck", prefix)
    t0 = time.monotonic()
    moment = wait_mid_write(cluster, query, out, tmp_path / "ck", rng)
    txn_id = task_transactional_id(cluster, prefix, partition)
    coordinator = coordinator_of(cluster, txn_id)
    cluster.broker(coordinator).kill()
    got = finish(query, cluster, out)
    dups = len(got) - len(set(got))
    assert sorted(got) == INPUT, (
        f"seed {SEED}, coordinator {coordinator} of {txn_id} killed {moment} "
        f"({time.monotonic() - t0:.1f}s in): {len(got)} read, {dups} duplicates, "
        f"{len(set(INPUT) - set(got))} missing")
    assert coordinator_of(cluster, txn_id) != coordinator
