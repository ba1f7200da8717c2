"""constant_cost: does a read or a write cost more once the log holds gigabytes?

One minilog broker, one partition, segments of 256 MiB (Kafka's default is 1 GiB; smaller
segments put several of them, and their indexes, behind every lookup). The log is filled by
pre-encoded Produce requests (`wire.py`, no client cost) of 1 MiB, each holding 64 batches of
16 records of 1 KB (16 KiB batches: the index has an entry per batch), 5 in flight. Throughput
is taken per window of the log (256 MiB; quick: 32 MiB): it must not fall as the log grows.
The slowest request of each window shows stalls (a segment roll fsyncs the old segment); the
broker's CPU time per MB tells a broker that works harder from one that waits (disk, machine).

The baseline, measured window by window in the same run: the same bytes appended with
`os.write` to plain files that roll (and are fsynced) at the same size. On this machine the
kernel's write path itself slows as gigabytes go into the page cache (system time per MB
triples), so the constant-cost test is minilog relative to that baseline.

Then Fetch requests (1 MiB max, no long poll) at random offsets near the start (first 5% of
offsets), in the middle and at the tail (last 5%), interleaved in random order, are timed from
send to last byte received: the tail must cost what the start costs. The whole log fits in the
page cache here (see the machine's RAM), so this measures the broker's lookups and copies, not
the disk.
"""
import os
import random
import tempfile
from pathlib import Path

from . import cluster, wire
from .report import MB, Report, Timer, bars, lines, main_args, median, percentile

SEGMENT = 256 << 20
TOTAL, QUICK_TOTAL = 3 << 30, 256 << 20
WINDOW, QUICK_WINDOW = 256 << 20, 32 << 20
FETCHES, QUICK_FETCHES = 300, 60
REQUEST = 1 << 20
BATCHES_PER_REQUEST = 64


class _FileLog:
    """The baseline: the same requests appended to plain files that roll at the same segment
    size, each full file fsynced at its roll, as the broker does with its segments."""

    def __init__(self, directory, segment):
        self.dir, self.segment, self.n, self.size, self.fd = Path(directory), segment, 0, 0, None
        self._open()

    def _open(self):
        self.fd = os.open(self.dir / f"{self.n:020d}.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND)

    def append(self, data):
        if self.size + len(data) > self.segment:
            os.fsync(self.fd)
            os.close(self.fd)
            self.n, self.size = self.n + 1, 0
            self._open()
        os.write(self.fd, data)
        self.size += len(data)

    def close(self):
        os.close(self.fd)


def _fill(rep, broker, conn, total, window, segment, scratch):
    """Windows of broker appends, each followed by the same bytes appended to the file log."""
    batch, per_batch = wire.make_batch(1000, REQUEST // BATCHES_PER_REQUEST)
    records = batch * BATCHES_PER_REQUEST  # several batches in one partition's record set
    version, frame = conn.produce_frame("log", [0], records)
    per_window = max(1, window // len(records))
    # 64 MiB of distinct buffers, as fresh request data would be (not one cache-hot buffer).
    copies = [bytes(bytearray(records)) for _ in range(64)]
    files = _FileLog(scratch, segment)
    windows, written = [], 0
    try:
        conn.pipeline_produce(frame, version, 5)
        written += 5 * len(records)
        for i in range(5):
            files.append(copies[i])
        while written < total:
            cpu = broker.cpu_seconds()
            with Timer() as t:
                lat = conn.pipeline_produce(frame, version, per_window)
            cpu = broker.cpu_seconds() - cpu if cpu is not None else None
            with Timer() as f:
                for i in range(per_window):
                    files.append(copies[i % len(copies)])
            size = per_window * len(records)
            written += size
            w = {"log_gb": written / 1e9, "mb_s": size / t.seconds / MB,
                 "file_mb_s": size / f.seconds / MB, "p50_ms": median(lat) * 1000,
                 "max_ms": max(lat) * 1000,
                 "cpu_ms_per_mb": None if cpu is None else cpu * 1000 / (size / MB)}
            w["vs_file"] = w["mb_s"] / w["file_mb_s"]
            windows.append(w)
            rep.log(f"log at {written / 1e9:5.2f} GB: minilog {w['mb_s']:5.0f} MB/s (slowest "
                    f"request {w['max_ms']:.0f} ms), files {w['file_mb_s']:5.0f} MB/s")
    finally:
        files.close()
    return windows, len(batch), per_batch


def _fetch_latencies(conn, end, count, seed=8):
    rng = random.Random(seed)
    span = max(1, end // 20)
    regions = {"start": (0, span), "middle": (end // 2 - span // 2, end // 2 + span // 2),
               "tail": (end - span, end - 1)}
    plan = [name for name in regions for _ in range(count)]
    rng.shuffle(plan)
    got = {name: [] for name in regions}
    for name in plan:
        lo, hi = regions[name]
        elapsed, data = conn.fetch("log", 0, rng.randint(lo, hi))
        if not data:
            raise RuntimeError(f"empty fetch in the {name} of the log")
        got[name].append(elapsed * 1000)
    return got


def run(args):
    quick = args.quick
    total, window = (QUICK_TOTAL, QUICK_WINDOW) if quick else (TOTAL, WINDOW)
    count = args.repeats * 100 if args.repeats else (QUICK_FETCHES if quick else FETCHES)
    segment = SEGMENT // 8 if quick else SEGMENT
    rep = Report("constant_cost", quick, args.out, {
        "log_bytes": total, "window_bytes": window, "segment_bytes": segment,
        "request_bytes": REQUEST, "batches_per_request": BATCHES_PER_REQUEST,
        "fetches_per_region": count})
    with cluster.running("minilog", overrides={"log.segment.bytes": segment}) as b, \
            tempfile.TemporaryDirectory(prefix="bench-filelog-") as scratch:
        cluster.create_topic(b.bootstrap, "log", 1)
        conn = wire.RawConnection(b.bootstrap)
        try:
            windows, batch_bytes, per_batch = _fill(rep, b, conn, total, window, segment,
                                                       scratch)
            end = conn.end_offset("log", 0)
            lat = _fetch_latencies(conn, end, count)
        finally:
            conn.close()
        segments = len(list((b.data_dir / "log-0").glob("*.log")))
    fetch_rows = [{"region": name, "fetches": len(v), "p50": median(v), "p99": percentile(v, 99),
                   "max": max(v)} for name, v in lat.items()]
    for r in fetch_rows:
        rep.log(f"fetch at {r['region']:6}: p50 {r['p50']:.2f} ms, p99 {r['p99']:.2f} ms")
    rep.params.update({"batch_bytes": batch_bytes, "records_per_batch": per_batch,
                       "log_end_offset": end, "segments": segments})
    rep.section(f"Produce throughput per {window >> 20} MiB window as the log grows to "
                f"{total / 1e9:.1f} GB ({segments} segments)", windows,
                [("log_gb", "log GB"), ("mb_s", "minilog MB/s"), ("file_mb_s", "files MB/s"),
                 ("vs_file", "minilog/files"), ("p50_ms", "request p50 ms"),
                 ("max_ms", "slowest request ms"), ("cpu_ms_per_mb", "broker CPU ms/MB")])
    rep.section(f"Fetch latency (1 MiB max) over {end:,} offsets (ms)", fetch_rows,
                [("region", "where"), ("fetches", "fetches"), ("p50", "p50"), ("p99", "p99"),
                 ("max", "max")])
    k = max(1, min(3, len(windows) // 3))
    first, last = median([w["mb_s"] for w in windows[:k]]), median([w["mb_s"] for w in windows[-k:]])
    rep.ratio(f"produce last/first {k} windows", last, first)
    rel_first = median([w["vs_file"] for w in windows[:k]])
    rel_last = median([w["vs_file"] for w in windows[-k:]])
    rep.ratio(f"produce (minilog/files) last/first {k} windows", rel_last, rel_first,
              "constant cost: about 1")
    by = {r["region"]: r for r in fetch_rows}
    rep.ratio("fetch p50 tail/start", by["tail"]["p50"], by["start"]["p50"], "about 1")
    rep.ratio("fetch p99 tail/start", by["tail"]["p99"], by["start"]["p99"], "about 1")
    rep.plot("produce", lambda plt: lines(
        plt, [w["log_gb"] for w in windows],
        {"minilog, 1 MiB requests": [w["mb_s"] for w in windows],
         "plain files, same bytes and rolls": [w["file_mb_s"] for w in windows]},
        "log size (GB)", "MB/s in the window", "produce throughput as the log grows"))
    rep.plot("fetch", lambda plt: bars(
        plt, list(by), {"p50": [by[n]["p50"] for n in by], "p99": [by[n]["p99"] for n in by]},
        "ms", f"fetch latency along a {total / 1e9:.1f} GB log"))
    rep.finish()


def main(argv=None):
    run(main_args(argv))


if __name__ == "__main__":
    main()
