"""txn_markers: how long a transaction stays in PrepareCommit, and what that costs librdkafka.

Three brokers (every one a voter), a three-partition topic and `__transaction_state` at RF=3
with min.insync.replicas=2. Three confluent-kafka transactional producers, in threads, each
repeat a pair: a transaction writing one record to each partition, committed; then the next
one begun, a record written, and aborted 0-60 ms later (a seeded random delay). Until the
coordinator has written the commit's markers and CompleteCommit, the next transaction's
AddPartitionsToTxn is answered CONCURRENT_TRANSACTIONS and an EndTxn(abort) INVALID_TXN_STATE,
which librdkafka treats as fatal: counted are the pairs that ended in a fatal error (the
producer is then replaced). Issue 35's target: at most 1 % of the pairs.

The PrepareCommit duration is read back from `__transaction_state` afterwards: for each
transactional id, the time between a PREPARE_COMMIT record and the COMPLETE_COMMIT after it
(each record carries the coordinator's clock when it was written; the same for aborts).
"""
import random
import tempfile
import threading
import time

from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from minilog.connector.local_cluster import LocalCluster

from .report import Report, main_args, percentile

SETTINGS = {"broker.session.timeout.ms": 3000, "broker.heartbeat.interval.ms": 300,
            "offsets.topic.num.partitions": 3, "transaction.state.log.num.partitions": 3,
            "transaction.state.log.replication.factor": 3, "transaction.state.log.min.isr": 2,
            "min.insync.replicas": 2, "default.replication.factor": 3}
PRODUCERS, PAIRS, QUICK_PAIRS = 3, 300, 30
PARTITIONS = 3
TOPIC = "pairs"
ABORT_AFTER_S = (0.0, 0.060)


def _producer(bootstrap: str, txn_id: str) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 1,
                  "log_level": 0})
    p.init_transactions(60)
    return p


def _pairs(bootstrap: str, txn_id: str, n: int, seed: int, out: dict) -> None:
    """`n` commit-then-abort pairs; out[error name] counts the fatal ones."""
    rnd = random.Random(seed)
    p = _producer(bootstrap, txn_id)
    for i in range(n):
        try:
            p.begin_transaction()
            for part in range(PARTITIONS):
                p.produce(TOPIC, b"c%d" % i, partition=part)
            p.commit_transaction(60)
            p.begin_transaction()
            p.produce(TOPIC, b"a%d" % i, partition=i % PARTITIONS)
            time.sleep(rnd.uniform(*ABORT_AFTER_S))  # the workload's pause, not a wait
            p.abort_transaction(60)
            out["ok"] = out.get("ok", 0) + 1
        except KafkaException as e:
            err = e.args[0]
            key = ("fatal " if err.fatal() else "other ") + err.name()
            out[key] = out.get(key, 0) + 1
            if err.fatal():
                p = _producer(bootstrap, txn_id)
            elif err.txn_requires_abort():
                p.abort_transaction(60)
    p.flush(10)


def prepare_durations(bootstrap: str) -> dict[str, list[float]]:
    """{"commit": [ms], "abort": [ms]}: PREPARE_* to COMPLETE_* in `__transaction_state`."""
    from minilog.broker.coordinator.transaction import txn_state as s
    from minilog.broker.coordinator.transaction.txn_state import parse_txn_key, parse_txn_value
    from minilog.connector.client import Consumer, TopicPartition
    tps = [TopicPartition("__transaction_state", i)
           for i in range(SETTINGS["transaction.state.log.num.partitions"])]
    records = []
    with Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"}) as c:
        ends = c.end_offsets(tps)
        c.assign(tps)
        got = dict.fromkeys(tps, 0)
        deadline = time.monotonic() + 60
        while any(got[tp] < ends[tp] for tp in tps) and time.monotonic() < deadline:
            for m in c.poll(1.0):
                got[TopicPartition(m.topic, m.partition)] = m.offset + 1
                records.append(m)
    started: dict[str, tuple[str, int]] = {}
    out = {"commit": [], "abort": []}
    for m in sorted(records, key=lambda m: (m.partition, m.offset)):
        txn_id = parse_txn_key(m.key)
        if txn_id is None or m.value is None:
            continue
        md = parse_txn_value(txn_id, m.value)
        if md.state in (s.PREPARE_COMMIT, s.PREPARE_ABORT):
            started[txn_id] = (md.state, md.update_ms)
        elif md.state in (s.COMPLETE_COMMIT, s.COMPLETE_ABORT) and txn_id in started:
            state, at = started.pop(txn_id)
            kind = "commit" if state == s.PREPARE_COMMIT else "abort"
            if (md.state == s.COMPLETE_COMMIT) == (kind == "commit"):
                out[kind].append(float(md.update_ms - at))
    return out


def main(argv=None):
    args = main_args(argv)
    quick = args.quick
    n = QUICK_PAIRS if quick else PAIRS
    rep = Report("txn_markers", quick, args.out, {"producers": PRODUCERS, "pairs": n})
    extra = [x for k, v in SETTINGS.items() for x in ("-o", f"{k}={v}")]
    with tempfile.TemporaryDirectory(prefix="minilog-bench-txn-") as tmp, \
            LocalCluster(3, data_dir=tmp, extra=extra) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        deadline = time.monotonic() + 120
        while len(admin.list_topics(timeout=5).brokers) < 3 and time.monotonic() < deadline:
            time.sleep(0.2)
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])[TOPIC].result(60)
        outs = [{} for _ in range(PRODUCERS)]
        threads = [threading.Thread(target=_pairs, args=(cluster.bootstrap, f"pair-{i}",
                                                          n // PRODUCERS, 35 + i, outs[i]))
                   for i in range(PRODUCERS)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        seconds = time.perf_counter() - t0
        durations = prepare_durations(cluster.bootstrap)
    totals: dict[str, int] = {}
    for o in outs:
        for k, v in o.items():
            totals[k] = totals.get(k, 0) + v
    fatal = sum(v for k, v in totals.items() if k.startswith("fatal"))
    rows = [{"pairs": n, "fatal": fatal, "fatal_pct": 100.0 * fatal / n,
             "outcomes": ", ".join(f"{k} {v}" for k, v in sorted(totals.items())),
             "seconds": seconds}]
    for kind, ms in durations.items():
        rows.append({"prepare": kind, "count": len(ms), "p50_ms": percentile(ms, 50),
                     "p99_ms": percentile(ms, 99), "max_ms": max(ms, default=float("nan"))})
    rep.section("commit-then-abort pairs", rows[:1],
                [("pairs", "pairs"), ("fatal", "fatal"), ("fatal_pct", "fatal %"),
                 ("seconds", "s"), ("outcomes", "outcomes")])
    rep.section("PREPARE_* to COMPLETE_* in __transaction_state", rows[1:],
                [("prepare", "prepare"), ("count", "n"), ("p50_ms", "p50 ms"),
                 ("p99_ms", "p99 ms"), ("max_ms", "max ms")])
    rep.finish()
    return rows


if __name__ == "__main__":
    main()
