"""consume: records/s reading one large topic, minilog's consumer against confluent-kafka's.

The topic (one partition, 1M records of 100 B; quick: 20k) is written once by confluent-kafka's
producer (acks=1, linger 5 ms, 1 MB batches), then read from offset 0 to the end, again and
again, by each reader in turn (interleaved repeats, median):

- confluent-kafka `Consumer.consume(num_messages=10000)`: Message objects, librdkafka in C;
- minilog `Consumer.poll_arrow()`: pyarrow RecordBatches in the schema of Spark's Kafka source;
- minilog `Consumer.fetch_range_arrow(tp, 0, end)`: the Spark executors' path;
- minilog `Consumer.poll(max_records=10000)`: a list of ConsumerRecord tuples.

A read is timed from `assign` (positions given, no offset lookup) until the last record is
handed to the application; neither side touches the records after that. The same readers
(confluent-kafka and minilog's Arrow path) also read the same data from Tansu, the peer broker.
Issue 8's target: our Arrow path ahead of confluent-kafka.
"""
from . import clients, cluster
from .report import Report, bars, main_args, median

RECORDS, QUICK_RECORDS = 1_000_000, 20_000
SIZE = 100
READERS = {
    "confluent consume": lambda bs, t, n: clients.read_confluent(bs, t, 1, n),
    "minilog poll_arrow": lambda bs, t, n: clients.read_minilog(bs, t, 1, n, arrow=True),
    "minilog fetch_range_arrow": lambda bs, t, n: clients.read_minilog_range(bs, t, 1, n),
    "minilog poll": lambda bs, t, n: clients.read_minilog(bs, t, 1, n, arrow=False),
}
PEER_READERS = ("confluent consume", "minilog poll_arrow")


def _fill(bootstrap, topic, n):
    cluster.create_topic(bootstrap, topic, 1)
    prod = clients.producer("confluent", clients.producer_config(bootstrap))
    try:
        prod.produce(topic, clients.value_of(SIZE), n, 1)
    finally:
        prod.close()


def _measure(rep, broker, readers, n, repeats):
    _fill(broker.bootstrap, "big", n)
    times = {r: [] for r in readers}
    for r in readers:  # warm-up
        READERS[r](broker.bootstrap, "big", n)
    for _ in range(repeats):
        for r in readers:
            times[r].append(READERS[r](broker.bootstrap, "big", n))
    rows = []
    for r in readers:
        t = median(times[r])
        rows.append({"broker": broker.kind, "reader": r, "records": n, "records_s": n / t,
                     "min": n / max(times[r]), "max": n / min(times[r]),
                     "mb_s": n * SIZE / t / 1e6})
        rep.log(f"{broker.kind:8} {r:26} {n / t:>12,.0f} records/s")
    return rows


def run(args):
    quick = args.quick
    repeats = args.repeats or (1 if quick else 3)
    n = QUICK_RECORDS if quick else RECORDS
    peer = cluster.tansu_available()
    rep = Report("consume", quick, args.out, {"records": n, "value_bytes": SIZE, "partitions": 1,
                                              "repeats": repeats})
    with cluster.running("minilog") as b:
        rows = _measure(rep, b, list(READERS), n, repeats)
    if peer:
        with cluster.running("tansu") as b:
            rows += _measure(rep, b, PEER_READERS, n, repeats)
    rep.section(f"Reading {n:,} records of {SIZE} B from one partition (records/s, median "
                "[min-max])", rows,
                [("broker", "broker"), ("reader", "reader"), ("records_s", "records/s"),
                 ("min", "min"), ("max", "max"), ("mb_s", "MB/s")])
    got = {(r["broker"], r["reader"]): r["records_s"] for r in rows}
    base = got[("minilog", "confluent consume")]
    for r in READERS:
        if r != "confluent consume":
            note = "target > 1" if r == "minilog poll_arrow" else ""
            rep.ratio(f"consume {r}/confluent (minilog broker)", got[("minilog", r)], base, note)
    if peer:
        for r in PEER_READERS:
            rep.ratio(f"consume minilog/tansu ({r})", got[("minilog", r)], got[("tansu", r)])
    brokers = ["minilog"] + (["tansu"] if peer else [])
    rep.plot("readers", lambda plt: bars(
        plt, list(READERS), {b: [got.get((b, r)) for r in READERS] for b in brokers},
        "records/s", f"reading {n:,} × {SIZE} B records, one partition"))
    rep.finish()


def main(argv=None):
    run(main_args(argv))


if __name__ == "__main__":
    main()
