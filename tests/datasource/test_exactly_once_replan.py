"""The exactly-once sink decides per micro-batch for the whole query, whatever the replay's plan.

Each test runs the streaming copy job (`eos_copy_job.py`, its own driver process) and stops its
driver at a named point of the commit of micro-batch 1 (`MINILOG_SINK_HALT`: the decision is
recorded and n of the batch's transactions are committed; the committing process writes a
file and waits; `prepared`: the tasks prepared, the decision not recorded), kills every
process of the job with SIGKILL, restarts it from its checkpoint with another number of
writing tasks (`minPartitions`), and counts the output with a read_committed confluent-kafka
consumer. The sink's prepared transactions use KIP-939's two-phase commit: they wait for the
restarted driver, however long it takes to start. The restarts that nothing kills run in the
suite's Spark session (`finish_copy`): another driver than the killed one, without a JVM start
of their own (a driver start is most of such a test's time)."""
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from eos_copy_job import finish_copy
from sparkprocs import environment, kill_marked, marked
from sparktools import create_topic, produce, unique
from txntools import SMALL, read_all
from waiting import wait_until

from brokers import MinilogBroker
from minilog.connector.client import AdminClient

JOB = Path(__file__).with_name("eos_copy_job.py")
RECORDS = 50  # per input partition; micro-batches of 40 offsets: 0 and 1 whole, 2 the rest
INPUT = sorted(f"{p}-{i}".encode() for p in range(2) for i in range(RECORDS))
HALT_BATCH = 1


@pytest.fixture(scope="module")
def broker():
    b = MinilogBroker(extra=SMALL + ["-o", "transaction.two.phase.commit.enable=true"]).start()
    yield b
    b.cleanup()


class Job:
    """The copy job of one checkpoint: started, halted, killed, restarted."""

    def __init__(self, broker, source, out, tmp_path, name, prefix=None):
        self.broker, self.source, self.out, self.prefix = broker, source, out, prefix
        self.checkpoint, self.log = tmp_path / f"{name}-ck", tmp_path / f"{name}.log"
        self.halted = tmp_path / f"{name}.halted"
        self.mark = uuid.uuid4().hex

    def args(self, min_partitions):
        return [self.broker.bootstrap, self.source, self.out, str(self.checkpoint),
                "exactly-once", "2pc", str(min_partitions)] + ([self.prefix] if self.prefix else [])

    def start(self, min_partitions, halt_after):
        """availableNow, its own driver: stop at batch 1's commit once `halt_after` are
        committed."""
        args = self.args(min_partitions)
        args[6:6] = ["finish"]
        more = {"MINILOG_SINK_HALT": f"{HALT_BATCH}:{halt_after}:{self.halted}"}
        with open(self.log, "ab") as out:
            return subprocess.Popen([sys.executable, str(JOB), *args],
                                    env=environment(self.mark, **more),
                                    stdout=out, stderr=subprocess.STDOUT)

    def halt_and_kill(self, min_partitions, committed):
        """Run until the named point of batch 1's commit (`committed` transactions committed,
        or "prepared"), then kill the driver there."""
        job = self.start(min_partitions, committed)
        try:
            wait_until(lambda: self.halted.exists() or job.poll() is not None, 300,
                       "the commit of batch 1 to reach its halt")
            assert self.halted.exists(), f"the job ended first:\n{self.tail()}"
        finally:
            for pid in marked(self.mark):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            job.wait(60)
            kill_marked(self.mark)

    def finish(self, spark, min_partitions):
        """Restart from the checkpoint in `spark` and copy the rest: None, or why it failed."""
        return finish_copy(spark, *self.args(min_partitions))

    def tail(self, chars=3000):
        return self.log.read_text(errors="replace")[-chars:]


def topics(broker):
    source = create_topic(broker.bootstrap, unique("replan-in"), 2)
    produce(broker.bootstrap, source, [(p, None, f"{p}-{i}".encode(), [])
                                       for p in range(2) for i in range(RECORDS)])
    return source, create_topic(broker.bootstrap, unique("replan-out"), 2)


def committed_rows(broker, out, expected):
    return read_all(broker.bootstrap, out, "read_committed", expected, partitions=2)


@pytest.mark.timeout(900)
def test_killed_after_every_commit_and_replayed_with_more_tasks_writes_once(spark, broker,
                                                                            tmp_path):
    """Batch 1 committed by both of its tasks' transactions, Spark's commit log not written;
    the replay runs four tasks (two of them transactional ids that never saw batch 1)."""
    source, out = topics(broker)
    job = Job(broker, source, out, tmp_path, "q")
    job.halt_and_kill(min_partitions=2, committed=2)
    assert len(committed_rows(broker, out, 80)) == 80  # batches 0 and 1
    assert job.finish(spark, min_partitions=4) is None
    assert sorted(committed_rows(broker, out, len(INPUT))) == INPUT


@pytest.mark.timeout(900)
def test_killed_after_some_commits_and_replayed_with_fewer_tasks_writes_once(spark, broker,
                                                                             tmp_path):
    """Batch 1 written by four tasks, two of their transactions committed; the replay runs
    two tasks: the other two recorded transactions are committed, the replay writes nothing."""
    source, out = topics(broker)
    job = Job(broker, source, out, tmp_path, "q")
    job.halt_and_kill(min_partitions=4, committed=2)
    # batch 0, and the part of batch 1's two committed transactions below the first record
    # of the two still prepared (the last stable offset)
    assert 40 <= len(committed_rows(broker, out, 40)) <= 60
    assert job.finish(spark, min_partitions=2) is None
    assert sorted(committed_rows(broker, out, len(INPUT))) == INPUT


@pytest.mark.timeout(900)
def test_a_prefix_used_by_another_query_is_refused(spark, broker, tmp_path):
    """Query A stops after committing batch 1; query B, given A's transactionalIdPrefix, is
    refused with one clear error; A restarted finishes with every row once."""
    source, out = topics(broker)
    prefix = unique("shared")
    a = Job(broker, source, out, tmp_path, "a", prefix)
    a.halt_and_kill(min_partitions=2, committed=2)
    b = Job(broker, source, out, tmp_path, "b", prefix)
    refused = b.finish(spark, min_partitions=2)
    assert f"transactionalIdPrefix '{prefix}' is used by the query" in (refused or ""), refused
    assert a.finish(spark, min_partitions=4) is None
    assert sorted(committed_rows(broker, out, len(INPUT))) == INPUT


@pytest.mark.timeout(900)
def test_killed_before_the_decision_the_orphans_are_aborted_on_restart(spark, broker,
                                                                       tmp_path):
    """Batch 1's two tasks prepared, the driver killed before recording the decision: their
    transactions (two-phase: no timeout) hold every read_committed reader at batch 0 until
    the restarted query aborts them and writes batch 1 again."""
    source, out = topics(broker)
    prefix = unique("orphans")
    job = Job(broker, source, out, tmp_path, "q", prefix)
    job.halt_and_kill(min_partitions=2, committed="prepared")
    with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
        orphans = [t.transactional_id for t in admin.list_transactions(states=["Ongoing"])
                   if t.transactional_id.startswith(f"{prefix}-")]
    assert len(orphans) == 2, orphans
    assert len(committed_rows(broker, out, 40)) == 40  # batch 0; batch 1 is held back
    assert job.finish(spark, min_partitions=4) is None
    assert sorted(committed_rows(broker, out, len(INPUT))) == INPUT
    with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
        states = {t: d.state for t, d in admin.describe_transactions(orphans).items()}
    assert set(states.values()) == {"CompleteAbort"}, states
