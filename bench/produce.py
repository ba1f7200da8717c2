"""produce: MB/s and records/s into one broker, against the file ceiling and a peer broker.

Two questions, each answered against baselines measured in the same run:

- **Clients into a broker.** confluent-kafka's producer and minilog's (same settings:
  `clients.PRODUCER`, acks=1) send records of 100 B, 1 KB and 10 KB round-robin to 1 and 8
  partitions of minilog and of Tansu (Rust, in memory). The ceiling is appending the very
  batches the broker stored for that run (read back from its segment files, so the same bytes
  with the same batch sizes) to files with `os.write`, flush policy as the broker's (none:
  page cache, Kafka's default).
- **Broker ingest.** Pre-encoded Produce requests of one ~1 MiB batch, 5 in flight on one
  connection (`wire.py`: no client cost), into minilog with its default flush policy and with
  `log.flush.interval.messages=1` (fsync per append), and into Tansu; against `os.write` of the
  same batch bytes to a growing file (plus `os.fsync` after each for the second policy), one
  ceiling run before each broker run. Issue 8's target: ≥ 0.5.

Throughput counts record values (MB = 10^6 bytes) for the client runs and whole batch bytes
for the ingest runs (both sides of each ratio count the same bytes).
"""
import contextlib
import os
import tempfile
from pathlib import Path

from minilog.connector import batch as batch_format
from minilog.connector.protocol import ApiKey, request

from . import bare_receiver, clients, cluster, wire
from .report import MB, Report, Timer, bars, main_args, median

SIZES = (100, 1000, 10_000)
PARTITIONS = (1, 8)
RECORDS = {100: 200_000, 1000: 32_000, 10_000: 3_200}          # 20, 32, 32 MB of values
QUICK_RECORDS = {100: 20_000, 1000: 4_000, 10_000: 400}
# Of ~1 MiB each: 5 runs + warm-up stay under one 1 GiB segment (a roll's fsync stalls the
# broker for seconds: constant_cost shows it), so this is the steady-state append path.
INGEST_REQUESTS, QUICK_INGEST_REQUESTS = 128, 24
BARE = "bare receiver (recv_into, CRC32C, os.write)"


def stored_batches(broker, topic, partitions):
    """{partition: [batch bytes...]} as stored in the broker's segment files, in log order."""
    out = {}
    for p in range(partitions):
        chunks = []
        for seg in sorted((broker.log_dir / f"{topic}-{p}").glob("*.log")):
            data = seg.read_bytes()
            chunks += [data[pos:pos + h.size] for pos, h in batch_format.iter_batches(data)]
        if not chunks:  # a wrong path would make the "ceiling" a division by nothing
            raise RuntimeError(f"no stored batches of {topic}-{p} under {broker.log_dir}")
        out[p] = chunks
    return out


def last_run(batches, n):
    """The batches (round-robin over partitions, in log order) holding the last `n` records."""
    picked = []
    for p, chunks in batches.items():
        share = n // len(batches) + (1 if p < n % len(batches) else 0)
        got, mine = 0, []
        for chunk in reversed(chunks):
            if got >= share:
                break
            mine.append(chunk)
            got += batch_format.read_header(chunk).record_count
        picked.append(list(reversed(mine)))
    return picked


def file_ceiling(per_file, directory, fsync=False):
    """Seconds to append each list of chunks to its own file, interleaved, with os.write
    (and os.fsync after each write when `fsync`)."""
    fds = [os.open(Path(directory) / f"ceiling-{i}.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
           for i in range(len(per_file))]
    try:
        order = [(fd, chunks[i]) for i in range(max(map(len, per_file)))
                 for fd, chunks in zip(fds, per_file) if i < len(chunks)]
        with Timer() as t:
            for fd, chunk in order:
                os.write(fd, chunk)
                if fsync:
                    os.fsync(fd)
        return t.seconds
    finally:
        for fd in fds:
            os.close(fd)


def recycle_page_cache(directory, nbytes):
    """Write `nbytes` to a scratch file and delete it, so the next writer's page cache comes
    from recently freed pages.

    On this virtual machine a page of memory the guest has not used lately costs ~1.3 ms per
    MiB on first touch (the host backs it then), freed page-cache pages are reused at ~4 GB/s:
    whichever of two writers runs first takes the cheap pages. Recycling before each timed run
    gives the ceiling and the broker the same memory to write into.
    """
    path = Path(directory) / "ceiling-recycle"
    block = bytes(1 << 20)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        for _ in range(-(-nbytes // len(block))):
            os.write(fd, block)
    finally:
        os.close(fd)
        path.unlink()


def _clear(directory):
    for f in Path(directory).glob("ceiling-*"):
        f.unlink()


def _client_cells(rep, brokers, sizes, partitions, counts, repeats, scratch):
    rows = []
    for b in brokers:
        for parts in partitions:
            for size in sizes:
                n, value = counts[size], clients.value_of(size)
                topics = {c: f"p{parts}-s{size}-{c}" for c in clients.PRODUCE_CLIENTS}
                for topic in topics.values():
                    cluster.create_topic(b.bootstrap, topic, parts)
                prods = {c: clients.producer(c, clients.producer_config(b.bootstrap))
                         for c in clients.PRODUCE_CLIENTS}
                times = {c: [] for c in clients.PRODUCE_CLIENTS}
                ceil, batch_bytes = {c: [] for c in clients.PRODUCE_CLIENTS}, {}
                try:
                    for c, prod in prods.items():  # warm-up: connections, metadata, buffers
                        clients.timed_produce(prod, topics[c], value, max(n // 10, parts), parts)
                    for _ in range(repeats):      # interleaved, so drift hits all alike
                        for c, prod in prods.items():
                            # the same recycled memory for every client (see recycle_page_cache):
                            # the previous ceiling's files would otherwise decide who is fast
                            recycle_page_cache(scratch, 2 * n * size + (64 << 20))
                            times[c].append(clients.timed_produce(prod, topics[c], value, n, parts))
                            if b.kind == "minilog":  # the batches this run stored, to a file
                                run = last_run(stored_batches(b, topics[c], parts), n)
                                ceil[c].append(file_ceiling(run, scratch))
                                chunks = [x for per in run for x in per]
                                batch_bytes[c] = sum(map(len, chunks)) / max(len(chunks), 1)
                finally:
                    for prod in prods.values():
                        prod.close()
                    _clear(scratch)
                for c in clients.PRODUCE_CLIENTS:
                    t = median(times[c])
                    row = {"broker": b.kind, "client": c, "partitions": parts, "size": size,
                           "records": n, "records_s": n / t, "mb_s": n * size / t / MB,
                           "mb_s_min": n * size / max(times[c]) / MB,
                           "mb_s_max": n * size / min(times[c]) / MB}
                    if ceil[c]:
                        row["batch_bytes"] = batch_bytes[c]
                        row["ceiling_mb_s"] = n * size / median(ceil[c]) / MB
                    rows.append(row)
                    rep.log(f"{b.kind:8} {c:9} p{parts} {size:>6} B: {row['records_s']:>11,.0f} "
                            f"rec/s {row['mb_s']:8.1f} MB/s")
    return rows


def _ingest_cells(rep, requests, repeats, scratch):
    """Raw ingest against the file ceiling, a ceiling run before each broker run (interleaved,
    so noise from the rest of the machine hits both), the ceiling file growing like the log."""
    batch, _ = wire.make_batch(1000, 1 << 20)
    total = requests * len(batch)
    # Distinct buffers (64 MiB of them), as the broker writes fresh data: the same 1 MiB
    # written again and again would stay in the CPU caches and flatter the ceiling.
    copies = [bytes(bytearray(batch)) for _ in range(min(requests, 64))]
    chunks = [copies[i % len(copies)] for i in range(requests)]
    rows = []

    def row(label, times):
        rows.append({"target": label, "batch_bytes": len(batch), "requests": requests,
                     "mb_s": total / median(times) / MB, "mb_s_min": total / max(times) / MB,
                     "mb_s_max": total / min(times) / MB,
                     "p50_ms": None, "max_ms": None})
        rep.log(f"ingest {label}: {rows[-1]['mb_s']:.0f} MB/s")
        return rows[-1]

    def measure(label, target, ceiling=None, fsync=False, handshake=True):
        """`target()`: a context manager yielding the bootstrap of what receives the requests."""
        times, ceil, lat = [], [], []
        with target() as bootstrap:
            conn = wire.RawConnection(bootstrap, handshake=handshake)
            try:
                version, frame = conn.produce_frame("ingest", [0], batch)
                conn.pipeline_produce(frame, version, max(requests // 8, 5))  # warm-up
                for _ in range(repeats):
                    if ceiling is not None:
                        recycle_page_cache(scratch, total + (64 << 20))
                        ceil.append(file_ceiling([chunks], scratch, fsync))
                    recycle_page_cache(scratch, total + (64 << 20))
                    with Timer() as t:
                        lat += conn.pipeline_produce(frame, version, requests)
                    times.append(t.seconds)
            finally:
                conn.close()
                _clear(scratch)
        if ceiling is not None:
            row(ceiling, ceil)
        r = row(label, times)
        r["p50_ms"], r["max_ms"] = median(lat) * 1000, max(lat) * 1000

    @contextlib.contextmanager
    def broker(kind, overrides=None):
        with cluster.running(kind, overrides=overrides) as b:
            cluster.create_topic(b.bootstrap, "ingest", 1)
            yield b.bootstrap

    def bare():
        # our codec's newest Produce version: what the receiver is told to expect
        frame = wire.produce_frame(request(ApiKey.PRODUCE).versions[1], "ingest", [0], batch)
        return bare_receiver.running(scratch, frame, batch)

    measure("minilog (page cache)", lambda: broker("minilog"),
            ceiling="file ceiling (page cache)")
    measure(BARE, bare, handshake=False)
    measure("minilog (log.flush.interval.messages=1)",
            lambda: broker("minilog", {"log.flush.interval.messages": 1}),
            ceiling="file ceiling (fsync each batch)", fsync=True)
    if cluster.tansu_available():
        measure("tansu (memory)", lambda: broker("tansu"))
    return rows


def run(args):
    quick = args.quick
    repeats = args.repeats or (1 if quick else 3)
    counts = QUICK_RECORDS if quick else RECORDS
    requests = QUICK_INGEST_REQUESTS if quick else INGEST_REQUESTS
    kinds = ["minilog"] + (["tansu"] if cluster.tansu_available() else [])
    rep = Report("produce", quick, args.out, {
        "repeats": repeats, "records_per_run": counts, "client_settings": clients.PRODUCER,
        "ingest_requests_per_run": requests, "brokers": kinds})
    with tempfile.TemporaryDirectory(prefix="bench-ceiling-") as scratch:
        ingest = _ingest_cells(rep, requests, max(repeats, 1 if quick else 5), scratch)
        with contextlib.ExitStack() as stack:
            brokers = [stack.enter_context(cluster.running(k)) for k in kinds]
            rows = _client_cells(rep, brokers, SIZES, PARTITIONS, counts, repeats, scratch)

    rep.section("Broker ingest: pre-encoded 1 MiB batches, 5 in flight, one partition (MB/s of "
                "batch bytes, median [min-max])", ingest,
                [("target", "target"), ("batch_bytes", "batch B"), ("requests", "requests/run"),
                 ("mb_s", "MB/s"), ("mb_s_min", "min"), ("mb_s_max", "max"),
                 ("p50_ms", "request p50 ms"), ("max_ms", "slowest ms")])
    rep.section("Clients into one broker, acks=1 (MB/s of record values, median of repeats)", rows,
                [("broker", "broker"), ("client", "client"), ("partitions", "parts"),
                 ("size", "value B"), ("records_s", "records/s"), ("mb_s", "MB/s"),
                 ("mb_s_min", "min"), ("mb_s_max", "max"), ("batch_bytes", "stored batch B"),
                 ("ceiling_mb_s", "ceiling MB/s")])

    by = {(r["target"]): r["mb_s"] for r in ingest}
    rep.ratio("ingest minilog/ceiling, 1 MiB batches, page cache",
              by["minilog (page cache)"], by["file ceiling (page cache)"], "target >= 0.5")
    rep.ratio("ingest minilog/ceiling, 1 MiB batches, fsync each",
              by["minilog (log.flush.interval.messages=1)"], by["file ceiling (fsync each batch)"])
    rep.ratio("ingest bare receiver/ceiling, 1 MiB batches (the bound for a validating "
              "receiver in Python)", by[BARE], by["file ceiling (page cache)"])
    rep.ratio("ingest minilog/bare receiver, 1 MiB batches", by["minilog (page cache)"], by[BARE])
    if "tansu (memory)" in by:
        rep.ratio("ingest minilog/tansu, 1 MiB batches", by["minilog (page cache)"],
                  by["tansu (memory)"])
    cell = {(r["broker"], r["client"], r["partitions"], r["size"]): r for r in rows}
    for parts in PARTITIONS:
        for size in SIZES:
            conf = cell[("minilog", "confluent", parts, size)]
            ours = cell[("minilog", "minilog", parts, size)]
            what = f"{size} B p{parts}"
            rep.ratio(f"produce minilog/ceiling {what} (confluent-kafka client)", conf["mb_s"],
                      conf["ceiling_mb_s"])
            rep.ratio(f"produce minilog-client/confluent {what} (minilog broker)", ours["mb_s"],
                      conf["mb_s"])
            rep.ratio(f"produce minilog-send_arrow/confluent {what} (minilog broker)",
                      cell[("minilog", "minilog-arrow", parts, size)]["mb_s"], conf["mb_s"])
            if ("tansu", "confluent", parts, size) in cell:
                rep.ratio(f"produce minilog/tansu {what} (confluent-kafka client)", conf["mb_s"],
                          cell[("tansu", "confluent", parts, size)]["mb_s"])
                rep.ratio(f"produce minilog/tansu {what} (minilog client)", ours["mb_s"],
                          cell[("tansu", "minilog", parts, size)]["mb_s"])

    labels = [f"{s} B\np{p}" for p in PARTITIONS for s in SIZES]

    def series(broker, client):
        return [cell.get((broker, client, p, s), {}).get("mb_s") for p in PARTITIONS for s in SIZES]
    lines = {"confluent → minilog": series("minilog", "confluent"),
             "minilog client → minilog": series("minilog", "minilog"),
             "minilog send_arrow → minilog": series("minilog", "minilog-arrow")}
    if "tansu" in kinds:
        lines["confluent → tansu"] = series("tansu", "confluent")
        lines["minilog client → tansu"] = series("tansu", "minilog")
    lines["file ceiling (confluent's batches)"] = [
        cell[("minilog", "confluent", p, s)]["ceiling_mb_s"] for p in PARTITIONS for s in SIZES]

    def draw(plt):
        bars(plt, labels, lines, "MB/s of values (log scale)", "produce, acks=1, one broker")
        plt.yscale("log")
    rep.plot("clients", draw)
    rep.plot("ingest", lambda plt: bars(plt, ["1 MiB batches"], {r["target"]: [r["mb_s"]] for r in ingest},
                                        "MB/s", "broker ingest vs file ceiling"))
    rep.finish()


def main(argv=None):
    run(main_args(argv))


if __name__ == "__main__":
    main()
