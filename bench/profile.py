"""profile: where the broker and minilog's client spend their CPU on the produce and fetch paths.

`python -m bench profile [--quick]` runs the produce and consume workloads of the benchmarks
while py-spy (`pip install py-spy`) samples the broker process and, separately, this process
(minilog's client: the application thread and the client's event-loop thread together). Idle
samples are left out, so the shares are of CPU time. For each workload it prints the functions
with the most samples in themselves ("self") and under them ("total"), as % of that process's
samples, and keeps them in `bench-results/profile.json` (raw py-spy stacks next to it).

Workloads (one broker each, 1 partition unless said):
- broker ingest: pre-encoded 1 MiB requests of one batch (`wire.py`), and of 64 batches of 16 KiB;
- broker produce: confluent-kafka's producer, 1 KB records, 8 partitions;
- client produce: minilog's producer, 100 B records;
- broker fetch: pre-encoded 1 MiB Fetch requests over the log;
- client consume: minilog's `poll_arrow` and `poll` over 1M records of 100 B.
"""
import collections
import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from . import clients, cluster, wire
from .report import Report, main_args, table

RATE = 250  # samples per second


@contextlib.contextmanager
def sampled(pid, path):
    """py-spy samples process `pid` into `path` (raw collapsed stacks) while the block runs."""
    proc = subprocess.Popen(["py-spy", "record", "--pid", str(pid), "--rate", str(RATE),
                             "--format", "raw", "--output", str(path), "--nonblocking"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(0.5)  # attached before the workload starts
    try:
        yield
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            _, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            err = b""
        if not Path(path).exists():
            if proc.returncode != 0 or err.strip():
                raise RuntimeError(f"py-spy wrote no profile: "
                                   f"{err.decode(errors='replace')[-500:]}")
            Path(path).write_text("")  # no sample at all: a workload shorter than one interval


def _frame_name(frame):
    """'func (path/to/file.py:123)' -> 'file.py:func' (lines folded together)."""
    name, _, where = frame.rpartition(" (")
    file = where.rsplit(":", 1)[0].rstrip(")")
    parts = file.split("/")
    short = "/".join(parts[-2:]) if len(parts) > 1 and parts[-2] in (
        "client", "handlers", "broker", "connector", "asyncio", "protocol") else parts[-1]
    return f"{short}:{name or frame}"


# Frames every sample passes through (threads, event loop, entry points): not worth a row.
_PLUMBING = ("threading.py:", "<frozen ", "asyncio/runners.py:", "asyncio/base_events.py:",
             "asyncio/events.py:", "__main__.py:", "profile.py:", "broker/server/main.py:",
             "client/connection.py:LoopThread._run")


def raw_stacks(path):
    """(stack, samples) of each line of a raw py-spy file (frames joined by ';')."""
    for line in Path(path).read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if stack and n.isdigit():
            yield stack, int(n)


def summarize(path, top=12):
    """(samples, [(function, self %)], [(function, total %)]) of a raw py-spy file."""
    self_count, total_count, samples = collections.Counter(), collections.Counter(), 0
    for stack, n in raw_stacks(path):
        frames = [_frame_name(f) for f in stack.split(";") if f]
        if not frames:
            continue
        samples += n
        self_count[frames[-1]] += n
        for f in set(frames):
            if not f.startswith(_PLUMBING):
                total_count[f] += n
    pct = (lambda c: round(100.0 * c / samples, 1)) if samples else (lambda c: 0.0)
    return (samples, [(f, pct(c)) for f, c in self_count.most_common(top)],
            [(f, pct(c)) for f, c in total_count.most_common(top + 6)])


def _workloads(quick):
    """(name, process to sample: 'broker' or 'client', broker overrides, setup, load)."""
    scale = 1 if not quick else 32
    n100 = 1_000_000 // scale

    def ingest(batches):
        def load(b):
            cluster.create_topic(b.bootstrap, "ingest", 1)
            batch, _ = wire.make_batch(1000, (1 << 20) // batches)
            conn = wire.RawConnection(b.bootstrap)
            try:
                version, frame = conn.produce_frame("ingest", [0], batch * batches)
                conn.pipeline_produce(frame, version, 1024 // scale)
            finally:
                conn.close()
        return load

    def produce(client, size, parts, n):
        def load(b):
            cluster.create_topic(b.bootstrap, "produce", parts)
            prod = clients.producer(client, clients.producer_config(b.bootstrap))
            try:
                prod.produce("produce", clients.value_of(size), n, parts)
            finally:
                prod.close()
        return load

    def fill(b):
        produce("confluent", 100, 1, n100)(b)

    def fetch(b):
        conn = wire.RawConnection(b.bootstrap)
        try:
            end = conn.end_offset("produce", 0)
            for _ in range(3):
                offset = 0
                while offset < end:
                    _, data = conn.fetch("produce", 0, offset)
                    offset = _next_offset(data)
        finally:
            conn.close()

    def consume(arrow):
        return lambda b: clients.read_minilog(b.bootstrap, "produce", 1, n100, arrow=arrow)

    def fill_and_warm(arrow):
        def setup(b):
            fill(b)
            consume(arrow)(b)  # first use imports pyarrow's lazy parts (pandas): not the path
        return setup

    return [
        ("broker ingest, 1 MiB batches", "broker", None, ingest(1)),
        ("broker ingest, 16 KiB batches", "broker", None, ingest(64)),
        ("broker produce, confluent-kafka 1 KB x 8 partitions", "broker", None,
         produce("confluent", 1000, 8, 300_000 // scale)),
        ("client produce, minilog 100 B", "client", None, produce("minilog", 100, 1, n100 // 2)),
        ("broker fetch, 1 MiB requests", "broker", fill, fetch),
        ("client consume, minilog poll_arrow", "client", fill_and_warm(True), consume(True)),
        ("client consume, minilog poll", "client", fill_and_warm(False), consume(False)),
    ]


def _next_offset(data):
    from minilog.connector.records import next_offset_after
    nxt = next_offset_after(data)
    if nxt is None:
        raise RuntimeError("fetch returned no whole batch")
    return nxt


def run(args):
    if shutil.which("py-spy") is None:
        raise SystemExit("profile needs py-spy: pip install py-spy")
    quick = args.quick
    rep = Report("profile", quick, args.out, {"sampler": f"py-spy, {RATE} Hz, idle excluded"})
    with tempfile.TemporaryDirectory(prefix="bench-profile-") as scratch:
        keep = Path(scratch) if rep.out is None else rep.out / "bench-results" / "profile"
        keep.mkdir(parents=True, exist_ok=True)
        _profile_all(rep, quick, keep)


def _profile_all(rep, quick, keep):
    results = []
    for name, who, setup, load in _workloads(quick):
        with cluster.running("minilog") as b:
            if setup is not None:
                setup(b)
            path = keep / (name.replace(" ", "_").replace(",", "").replace("/", "-") + ".txt")
            pid = b.pid if who == "broker" else os.getpid()
            t0 = time.perf_counter()
            with sampled(pid, path):
                load(b)
            samples, selfs, totals = summarize(path)
        results.append({"workload": name, "process": who, "seconds": time.perf_counter() - t0,
                        "samples": samples, "self": selfs, "total": totals, "raw": path.name})
        print(f"\n## {name}: {who} process, {samples} samples in "
              f"{results[-1]['seconds']:.1f} s")
        print(table([{"f": f, "p": p} for f, p in selfs], [("f", "self"), ("p", "%")]))
        print(table([{"f": f, "p": p} for f, p in totals], [("f", "total (inclusive)"),
                                                              ("p", "%")]))
    if rep.out is not None:
        out = rep.out / "bench-results" / "profile.json"
        out.write_text(json.dumps(results, indent=1) + "\n")
        print(f"\nprofiles: {out} (raw stacks in {keep})")


def main(argv=None):
    run(main_args(argv))


if __name__ == "__main__":
    main()
