"""The exactly-once sink under the fault it exists for: the Spark driver killed with SIGKILL.

A streaming copy job (its own driver process: Python, JVM, Python workers) is killed at a seeded
moment (a random pause after a micro-batch: between micro-batches, mid-write, mid-commit; or
as soon as a micro-batch's first records reach the log), restarted from its checkpoint, then
run to the end (`EOS_FAULT_KILLS=3` kills it three times; each kill costs a Spark start, over a
minute on a loaded machine, so the default suite kills once). The last run, which nothing
kills, runs in the suite's Spark session (`finish_copy`): another driver than the killed one,
without a JVM start of its own. The sink prepares its
transactions with KIP-939's two-phase commit, so nothing the killed job prepared times out:
the restarted driver finishes what the query decided and aborts what it left open. A
read_committed consumer must then see every input record exactly once. The seed is printed on
failure; rerun one with `EOS_FAULT_SEED=<seed> python -m pytest
tests/datasource/test_exactly_once_faults.py`. `EOS_FAULT_GUARANTEE=at-least-once` runs the same
faults against the at-least-once sink (each kill then followed by a wait longer than the
transaction timeout), which writes duplicates: the test then fails, as it should.
"""
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from eos_copy_job import finish_copy
from sparkprocs import environment, kill_marked, marked
from sparktools import create_topic, produce, unique
from txntools import SMALL, log_end, read_all

from brokers import MinilogBroker

JOB = Path(__file__).with_name("eos_copy_job.py")
KILLS = int(os.environ.get("EOS_FAULT_KILLS", 1))
# per input partition; micro-batches of 40 offsets (20 of each partition): each kill comes
# within 3 micro-batches of the last, and 2 more are left for the last run
RECORDS = 20 * (3 * KILLS + 2)
TXN_TIMEOUT_S = 10  # the sink's transaction.timeout.ms; a killed job stays down longer
CLEANUP = ["-o", "transaction.abort.timed.out.transaction.cleanup.interval.ms=500",
           "-o", "transaction.two.phase.commit.enable=true"]


def commits(checkpoint):
    d = checkpoint / "commits"
    return len([f for f in d.iterdir() if f.name.isdigit()]) if d.exists() else 0


def tail(log, chars=3000):
    """The end of the job's output, for a failure message."""
    return log.read_text(errors="replace")[-chars:]


def kill_9(mark):
    for pid in marked(mark):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def start(args, mark, log):
    with open(log, "ab") as out:
        return subprocess.Popen([sys.executable, str(JOB), *args], env=environment(mark),
                                stdout=out, stderr=subprocess.STDOUT)


@pytest.mark.timeout(420)
def test_driver_killed_at_random_moments_then_restarted_writes_every_record_once(spark,
                                                                                tmp_path):
    seed = int(os.environ.get("EOS_FAULT_SEED", random.randrange(1 << 30)))
    guarantee = os.environ.get("EOS_FAULT_GUARANTEE", "exactly-once")
    rng = random.Random(seed)
    print(f"eos fault seed {seed}")
    broker = MinilogBroker(extra=SMALL + CLEANUP).start()
    mark, log, checkpoint = uuid.uuid4().hex, tmp_path / "job.log", tmp_path / "ck"
    try:
        source = create_topic(broker.bootstrap, unique("fault-in"), 2)
        out = create_topic(broker.bootstrap, unique("fault-out"), 2)
        produce(broker.bootstrap, source, [(p, None, f"{p}-{i}".encode(), [])
                                           for p in range(2) for i in range(RECORDS)])
        two_phase = guarantee == "exactly-once"
        args = [broker.bootstrap, source, out, str(checkpoint), guarantee,
                "2pc" if two_phase else str(TXN_TIMEOUT_S * 1000)]
        kills, t0 = [], time.monotonic()
        for _ in range(KILLS):
            job = start(args + ["run"], mark, log)
            target = commits(checkpoint) + rng.randint(1, 2)
            end = time.monotonic() + 180
            while commits(checkpoint) < target and job.poll() is None:
                assert time.monotonic() < end, f"seed {seed}: no progress\n{tail(log)}"
                time.sleep(0.05)
            assert job.poll() is None, f"seed {seed}: the job stopped\n{tail(log)}"
            if rng.random() < 0.5:  # at a random moment
                pause = rng.uniform(0.0, 1.5)
                time.sleep(pause)
                moment = f"{pause:.2f} s later"
            else:  # once the next micro-batch's first records are in the log, mid-write
                before = log_end(broker.bootstrap, out, 2)
                while log_end(broker.bootstrap, out, 2) == before and job.poll() is None:
                    assert time.monotonic() < end, f"seed {seed}: no new records\n{tail(log)}"
                    time.sleep(0.01)
                moment = "mid-write"
            kills.append((commits(checkpoint), moment))
            kill_9(mark)
            down_until = time.monotonic() + TXN_TIMEOUT_S + 1
            job.wait(30)
            print(f"killed at {time.monotonic() - t0:.1f}s after {kills[-1]}")
            # at-least-once: down longer than the transaction timeout, the coordinator aborts
            # what the job left open, and the log's last stable offset reaches its end
            while not two_phase and (time.monotonic() < down_until
                   or log_end(broker.bootstrap, out, 2, isolation="read_committed")
                   < log_end(broker.bootstrap, out, 2)):
                assert time.monotonic() < down_until + 60, f"seed {seed}: nothing timed out"
                time.sleep(0.2)
        failed = finish_copy(spark, *args, timeout=240)
        assert failed is None, f"seed {seed}: the last run failed: {failed}"
        print(f"finished at {time.monotonic() - t0:.1f}s")
        got = read_all(broker.bootstrap, out, "read_committed", 2 * RECORDS, partitions=2)
        expected = sorted(f"{p}-{i}".encode() for p in range(2) for i in range(RECORDS))
        dups = len(got) - len(set(got))
        assert sorted(got) == expected, (
            f"seed {seed} ({guarantee}, killed (commits, moment) {kills}): {len(got)} "
            f"records read, {dups} duplicates, {len(set(expected) - set(got))} missing")
    finally:
        kill_marked(mark)
        broker.cleanup()
