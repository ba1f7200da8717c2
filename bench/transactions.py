"""transactions: what transactions cost a reader and a writer, on one broker.

- Reading: one partition of 2,000,000 records of 100 B written in transactions of 1,000, one in ten aborted
  (10% aborted records, each transaction closed by its marker), read from offset 0 to the end
  by a read_committed and a read_uncommitted consumer in turn (interleaved repeats, the first
  level alternating, each reader's runs together; median, and the median of each repeat's
  ratio: the machine is shared, and its load changes between repeats more than within one).
  Both read the same log to its end; the read_committed one hands out 10% fewer records, so
  the figure compared is log offsets per second (the time to reach the end). Readers: minilog's
  `poll_arrow` (aborted batches dropped per batch) and confluent-kafka's `consume`.
- Writing: records/s of confluent-kafka's producer, transactional and committing every 1,000
  records (`begin_transaction`, 1,000 `produce`, `commit_transaction`), against the same
  producer idempotent (`enable.idempotence`, acks=all), 500,000 records each into a fresh
  one-partition topic.
"""
import time

from . import clients, cluster
from .report import Report, bars, main_args, median

RECORDS, QUICK_RECORDS = 2_000_000, 10_000  # read (minilog reads 500,000 in about 0.1 s)
WRITES, QUICK_WRITES = 500_000, 10_000
PER_TXN, ABORT_EVERY = 1_000, 10
SIZE = 100
BROKER = {"transaction.state.log.num.partitions": 4, "offsets.topic.num.partitions": 4}
READERS = {
    "minilog poll_arrow": lambda bs, t, n, s: clients.read_minilog(bs, t, 1, n, True,
                                                                   settings=s),
    "confluent consume": lambda bs, t, n, s: clients.read_confluent(bs, t, 1, n, settings=s),
}


def _producer(bootstrap, **more):
    import confluent_kafka
    return confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                                     "batch.size": 1_000_000, "log_level": 3,
                                     "queue.buffering.max.messages": 1_000_000, **more})


def _produce(p, topic, value, n):
    for _ in range(n):
        try:
            p.produce(topic, value, partition=0)
        except BufferError:
            p.poll(0.005)
            p.produce(topic, value, partition=0)


def write_transactional(bootstrap, topic, n, abort_every=0):
    """Seconds to write `n` records in transactions of PER_TXN, every `abort_every`-th
    aborted (0: none); the number of records committed."""
    p = _producer(bootstrap, **{"transactional.id": f"bench-{topic}"})
    p.init_transactions(60)
    value, committed, t0 = clients.value_of(SIZE), 0, time.perf_counter()
    for i in range(n // PER_TXN):
        p.begin_transaction()
        _produce(p, topic, value, PER_TXN)
        if abort_every and i % abort_every == abort_every - 1:
            p.flush(60)  # in the log, then aborted (abort_transaction drops what is unsent)
            p.abort_transaction(60)
        else:
            p.commit_transaction(60)
            committed += PER_TXN
    return time.perf_counter() - t0, committed


def write_idempotent(bootstrap, topic, n):
    p = _producer(bootstrap, **{"enable.idempotence": True, "acks": "all"})
    _produce(p, topic, b"warm-up", 1)  # its producer id and connections, before the clock
    p.flush(60)
    t0 = time.perf_counter()
    _produce(p, topic, clients.value_of(SIZE), n)
    if p.flush(60):
        raise RuntimeError("idempotent producer: records not delivered in 60 s")
    return time.perf_counter() - t0


def _reads(rep, b, n, repeats):
    cluster.create_topic(b.bootstrap, "aborted", 1)
    _, committed = write_transactional(b.bootstrap, "aborted", n, ABORT_EVERY)
    cases = [(r, iso, committed if iso == "read_committed" else n)
             for r in READERS for iso in ("read_uncommitted", "read_committed")]
    times = {(r, iso): [] for r, iso, _ in cases}
    for reader in READERS:  # one reader at a time: another's threads and buffers stay out
        mine = [case for case in cases if case[0] == reader]
        for r, iso, want in mine:  # warm-up
            READERS[r](b.bootstrap, "aborted", want, {"isolation.level": iso})
        for i in range(repeats):  # the two levels in turn, the first one alternating
            for r, iso, want in mine[::-1] if i % 2 else mine:
                times[(r, iso)].append(READERS[r](b.bootstrap, "aborted", want,
                                                  {"isolation.level": iso}))
    rows = []
    for r, iso, want in cases:
        t = median(times[(r, iso)])
        rows.append({"reader": r, "isolation": iso, "records": want, "offsets_s": n / t,
                     "min": n / max(times[(r, iso)]), "max": n / min(times[(r, iso)])})
        rep.log(f"{r:20} {iso:17} {n / t:>12,.0f} offsets/s")
    for r in READERS:  # each repeat's two runs are neighbours: the machine's load moves both
        paired = median([u / c for u, c in zip(times[(r, "read_uncommitted")],
                                               times[(r, "read_committed")])])
        rep.ratio(f"{r}: read_committed/read_uncommitted, 10% aborted, median of each "
                  "repeat's ratio", paired, 1, "target >= 0.95")
    return rows


def _writes(rep, b, n, repeats):
    times = {"idempotent": [], "transactional (commit every 1,000)": []}
    for i in range(repeats + 1):  # the first round warms up
        for kind in times:
            topic = f"w-{kind[:4]}-{i}"
            cluster.create_topic(b.bootstrap, topic, 1)
            t = (write_idempotent(b.bootstrap, topic, n) if kind == "idempotent"
                 else write_transactional(b.bootstrap, topic, n)[0])
            if i:
                times[kind].append(t)
    rows = []
    for kind, ts in times.items():
        rows.append({"producer": kind, "records_s": n / median(ts), "min": n / max(ts),
                     "max": n / min(ts)})
        rep.log(f"{kind:36} {n / median(ts):>12,.0f} records/s")
    rep.ratio("produce transactional (commit every 1,000)/idempotent",
              rows[1]["records_s"], rows[0]["records_s"])
    return rows


def run(args):
    repeats = args.repeats or (1 if args.quick else 3)
    n = QUICK_RECORDS if args.quick else RECORDS
    w = QUICK_WRITES if args.quick else WRITES
    rep = Report("transactions", args.quick, args.out,
                 {"records": n, "written": w, "value_bytes": SIZE, "per_transaction": PER_TXN,
                  "aborted": f"1 in {ABORT_EVERY}", "repeats": repeats})
    with cluster.running("minilog", BROKER) as b:
        reads = _reads(rep, b, n, repeats)
        writes = _writes(rep, b, w, repeats)
    rep.section(f"Reading {n:,} offsets of one partition, 10% of them aborted (log offsets/s, "
                "median [min-max])", reads,
                [("reader", "reader"), ("isolation", "isolation"), ("records", "records"),
                 ("offsets_s", "offsets/s"), ("min", "min"), ("max", "max")])
    rep.section(f"Writing {w:,} records of {SIZE} B with confluent-kafka (records/s, median "
                "[min-max])", writes,
                [("producer", "producer"), ("records_s", "records/s"), ("min", "min"),
                 ("max", "max")])
    got = {(r["reader"], r["isolation"]): r["offsets_s"] for r in reads}
    levels = ("read_uncommitted", "read_committed")
    rep.plot("read-committed", lambda plt: bars(
        plt, list(READERS), {iso: [got[(r, iso)] for r in READERS] for iso in levels},
        "log offsets/s", f"reading {n:,} offsets, 10% in aborted transactions"))
    rep.finish()


def main(argv=None):
    run(main_args(argv))


if __name__ == "__main__":
    main()
