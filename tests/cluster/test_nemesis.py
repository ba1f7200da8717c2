"""A Jepsen-style test of replication safety: a seeded nemesis kills (with immediate
restarts), pauses (SIGSTOP/SIGCONT) and isolates partition leaders, the group coordinator and
the active controller of a three-broker cluster, while idempotent acks=all producers write
unique values into a topic of replication factor 3 with min.insync.replicas=2 and a consumer
group reads and commits throughout. Once every fault is healed and the cluster settled:
- every acknowledged value is stored exactly once, at the offset it was acknowledged at, and
  the group read it;
- the replicas agree offset by offset (each broker's log, read from disk after a clean stop);
- no record the group read was later replaced at its offset;
- no committed offset read back (OffsetFetch) was lower than one already acknowledged.

The default suite runs two seeds for a short while; `-m nemesis_long` runs long ones.
Rerun a failure with the seed it prints: `NEMESIS_SEED=<seed> NEMESIS_SECONDS=<s> python -m
pytest tests/cluster/test_nemesis.py -m nemesis_long`.
"""
import time

import pytest
from nemesis import (
    GroupReader,
    LONG_SECONDS,
    Nemesis,
    Writer,
    assert_held,
    check,
    long_nemesis,
    read_cluster,
    schedule,
    seeds,
    stored_history,
)
from clustertools import wait_for

TOPIC, GROUP, PARTITIONS, WRITERS = "jepsen", "jepsen-group", 3, 3
SHORT_SECONDS = 20.0  # per seed; two seeds make 40 s of faults in the default suite


def _settled(c):
    """Every broker live and every partition (ours and the group's) led with a full ISR."""
    if len(c.metadata().brokers) != len(c.brokers):
        return False
    for topic in (TOPIC, "__consumer_offsets"):
        placement = c.partitions(topic)
        if not placement or any(sorted(r) != isr for _, r, isr in placement.values()):
            return False
    return True


def run_nemesis(make_cluster, seed, seconds):
    faults = schedule(seed, seconds, PARTITIONS)
    c = make_cluster(3)
    c.create_topic(TOPIC, partitions=PARTITIONS, rf=3, config={"min.insync.replicas": "2"})
    writers = [Writer(c.bootstrap, TOPIC, n) for n in range(WRITERS)]
    t0 = time.monotonic()  # problems and faults are stamped in seconds since then
    reader = GroupReader(c.bootstrap, TOPIC, GROUP, PARTITIONS, t0)
    nemesis = Nemesis(c, TOPIC, GROUP, faults, seed, t0)
    rerun = (f"seed {seed}, {seconds:.0f}s; rerun with NEMESIS_SEED={seed} "
             f"NEMESIS_SECONDS={seconds:.0f} python -m pytest tests/cluster/test_nemesis.py "
             f"-m nemesis_long")
    try:
        nemesis.start()
        wait_for(lambda: nemesis.done, "the fault schedule to end", timeout=seconds * 4 + 120)
        nemesis.stop()
        wait_for(lambda: _settled(c), "every broker back and every ISR full", timeout=180)
        flushed_by = time.monotonic() + 120
        undelivered = sum(w.stop(flushed_by) for w in writers)
        served = read_cluster(c.bootstrap, TOPIC, PARTITIONS)
        ends = {p: 1 + max((o for q, o in served if q == p), default=-1)
                for p in range(PARTITIONS)}
        wait_for(lambda: reader.read_up_to(ends), f"the group to read up to {ends}")
    except BaseException as e:
        try:
            nemesis.stop()
        finally:
            e.add_note("applied:\n  " + "\n  ".join(nemesis.events))
        raise
    finally:
        for w in writers:
            w.stop(time.monotonic() + 5)
        reader.stop()
    history = stored_history(
        c, TOPIC, PARTITIONS, writers, undelivered, served, reader.ledger.reads,
        reader.ledger.values_read, reader.ledger.problems + ([f"nemesis error: {nemesis.error!r}"] if nemesis.error else []))
    problems = check(history, PARTITIONS)
    report = (f"{rerun}\n{len(history.acked)} acknowledged, {len(reader.ledger.reads)} read, "
              f"{reader.ledger.commits} commits acknowledged\nschedule:\n  "
              + "\n  ".join(map(str, faults)) + "\napplied:\n  " + "\n  ".join(nemesis.events))
    assert_held(problems, report, bool(history.acked and reader.ledger.commits))
    return history


@pytest.mark.timeout(600)
@pytest.mark.parametrize("seed", seeds([5, 6]))
def test_acknowledged_writes_and_commits_survive_the_nemesis(make_cluster, seed):
    run_nemesis(make_cluster, seed, SHORT_SECONDS)


@long_nemesis
def test_acknowledged_writes_and_commits_survive_a_long_nemesis(make_cluster, seed):
    run_nemesis(make_cluster, seed, LONG_SECONDS)
