"""A Jepsen-style test of transactions: a seeded nemesis kills (kill -9, restarted at once) and
pauses (SIGSTOP/SIGCONT) partition leaders, the transaction coordinator and the group
coordinator of a three-broker cluster, while transactional writers commit and abort over 2-4
partitions of an RF=3 topic (min.insync.replicas=2), a read-process-write loop copies a topic
with its offsets committed in each transaction, and a zombie producer is SIGSTOPped inside its
transaction while a new instance takes its transactional id, then resumed. Once every fault is
healed and the cluster settled (every last stable offset caught up with the log end), the
checker (tests/txn_nemesis.py) rebuilds the read_committed view from every broker's log and
finds: the replicas' views agree and the cluster serves that view; every committed transaction
whole and once, no aborted one, no partial one; nothing read while the faults ran that the view
does not hold; the copy exactly once; the zombie fenced and none of its records visible.

The default suite runs one seed for a short while; `-m nemesis_long` runs long ones. Rerun a
failure with the seed it prints: `NEMESIS_SEED=<seed> NEMESIS_SECONDS=<s> python -m pytest
tests/cluster/test_txn_nemesis.py -m nemesis_long`.
"""
import random
import time

import pytest
from clustertools import wait_for
from confluent_kafka import Producer
from nemesis import LONG_SECONDS, long_nemesis, seeds, summary
from txn_nemesis import (
    CommittedReader,
    ReadProcessWrite,
    TxnHistory,
    TxnNemesis,
    TxnWriter,
    Zombie,
    check_txns,
    committed_view_from_disk,
    committed_view_served,
    txn_schedule,
)
from txntools import log_end

TOPIC, SOURCE, COPY, GROUP = "txn", "txn-src", "txn-copy", "txn-rpw"
PARTITIONS, WRITERS, SOURCE_RECORDS = 4, 2, 3000
SHORT_SECONDS = 20.0
SETTINGS = {"transaction.state.log.num.partitions": 1,
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": 1000}


def _settled(c):
    """Every broker live, every partition led with a full ISR."""
    if len(c.metadata().brokers) != len(c.brokers):
        return False
    for topic in (TOPIC, SOURCE, COPY, "__consumer_offsets", "__transaction_state"):
        placement = c.partitions(topic)
        if not placement or any(sorted(r) != isr for _, r, isr in placement.values()):
            return False
    return True


def _stable(c, topic, partitions):
    """Whether the last stable offsets equal the log ends (no transaction left open)."""
    return log_end(c.bootstrap, topic, partitions, isolation="read_committed") == \
        log_end(c.bootstrap, topic, partitions)


def _ends(c, topic, partitions):
    from minilog.connector.client import Consumer, TopicPartition
    with Consumer({"bootstrap.servers": c.bootstrap, "isolation.level": "read_committed"}) as m:
        return {tp.partition: o for tp, o in m.end_offsets(
            [TopicPartition(topic, q) for q in range(partitions)]).items()}


def _fill_source(bootstrap):
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                  "linger.ms": 5})
    for i in range(SOURCE_RECORDS):
        p.produce(SOURCE, b"s-%05d" % i, partition=0)
    assert p.flush(120) == 0
    return [b"s-%05d" % i for i in range(SOURCE_RECORDS)]


def _committed_source_offset(bootstrap):
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as CTP
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP})
    try:
        return max(c.committed([CTP(SOURCE, 0)], timeout=30)[0].offset, 0)
    finally:
        c.close()


def run_txn_nemesis(make_cluster, seed, seconds):
    faults = txn_schedule(seed, seconds, PARTITIONS)
    c = make_cluster(3, **SETTINGS)
    for topic, n in ((TOPIC, PARTITIONS), (SOURCE, 1), (COPY, 1)):
        c.create_topic(topic, partitions=n, rf=3, config={"min.insync.replicas": "2"})
    source = _fill_source(c.bootstrap)
    rerun = (f"seed {seed}, {seconds:.0f}s; rerun with NEMESIS_SEED={seed} "
             f"NEMESIS_SECONDS={seconds:.0f} python -m pytest tests/cluster/test_txn_nemesis.py "
             f"-m nemesis_long")
    t0 = time.monotonic()
    writers = [TxnWriter(c.bootstrap, TOPIC, PARTITIONS, n, seed) for n in range(WRITERS)]
    rpw = ReadProcessWrite(c.bootstrap, SOURCE, COPY, GROUP)
    reader = CommittedReader(c.bootstrap, TOPIC, PARTITIONS)
    zombie = Zombie(c, TOPIC, PARTITIONS, random.Random(seed).uniform(1.0, seconds / 2))
    nemesis = TxnNemesis(c, TOPIC, GROUP, faults, seed, t0)
    rpw_ended = False
    try:
        nemesis.start()
        wait_for(lambda: nemesis.done, "the fault schedule to end", timeout=seconds * 4 + 120)
        nemesis.stop()
        zombie.stop()
        for w in writers:
            w.stop()
        rpw_ended = rpw.stop()
        wait_for(lambda: _settled(c), "every broker back and every ISR full", timeout=180)
        for topic, n in ((TOPIC, PARTITIONS), (COPY, 1)):
            wait_for(lambda t=topic, k=n: _stable(c, t, k),
                     f"the last stable offsets of {topic} to catch up", timeout=120)
        ends = _ends(c, TOPIC, PARTITIONS)
        served = committed_view_served(c.bootstrap, TOPIC, PARTITIONS, ends)
        copy = list(committed_view_served(c.bootstrap, COPY, 1, _ends(c, COPY, 1)).values())
        copied_to = _committed_source_offset(c.bootstrap)
    except BaseException as e:
        try:
            nemesis.stop()
        finally:
            e.add_note(f"{rerun}\napplied:\n  " + "\n  ".join(nemesis.events))
        raise
    finally:
        for w in writers:
            w.stop(5)
        zombie.stop(5)
        reader.stop()
    for b in c.brokers:
        b.stop()
    views = {b.node_id: {q: committed_view_from_disk(b.log_dir / f"{TOPIC}-{q}")
                         for q in range(PARTITIONS)} for b in c.brokers}
    txns = [t for w in writers for t in w.txns] + ([zombie.successor] if zombie.successor
                                                    else [])
    history = TxnHistory(
        txns=txns, views=views, served=served, seen=reader.seen, source=source,
        copy=copy, copied_to=copied_to, zombie=zombie.result,
        problems=([f"nemesis error: {nemesis.error!r}"] if nemesis.error else [])
        + ([zombie.error] if zombie.error else []))
    problems = check_txns(history)
    outcomes = {}
    for t in txns:
        outcomes[t.outcome] = outcomes.get(t.outcome, 0) + 1
    report = (f"{rerun}\ntransactions: {outcomes}; writers' fatal errors: "
              f"{[f for w in writers for f in w.fatal]}; read-process-write: {rpw.copied} "
              f"committed, source offset {copied_to}, {'ended' if rpw_ended else 'abandoned'}"
              f"; zombie: {zombie.result} ({'; '.join(zombie.events)})\nschedule:\n  "
              + "\n  ".join(map(str, faults)) + "\napplied:\n  " + "\n  ".join(nemesis.events))
    print(report)  # shown with -s: what a passing run went through
    assert not problems, f"{len(problems)} problem(s):\n{summary(problems)}\n{report}"
    assert outcomes.get("committed") and outcomes.get("aborted") and copied_to, \
        f"the workload made no progress\n{report}"
    assert zombie.result is not None, f"the zombie episode did not run\n{report}"
    return history


@pytest.mark.timeout(600)
@pytest.mark.parametrize("seed", seeds([35]))
def test_transactions_hold_under_the_nemesis(make_cluster, seed):
    run_txn_nemesis(make_cluster, seed, SHORT_SECONDS)


@long_nemesis
def test_transactions_hold_under_a_long_nemesis(make_cluster, seed):
    run_txn_nemesis(make_cluster, seed, LONG_SECONDS)
