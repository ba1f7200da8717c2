"""metrics: what Prometheus metrics cost, as ratios of throughput with `metrics.listener` set
to without, in the same run.

Two brokers, one with metrics on (scraped every second while the benchmark runs, as a
Prometheus would) and one without (no counting at all). confluent-kafka produces records of
100 B (acks=1, linger 5 ms, 16 KiB batches over 4 partitions: many small requests, where
per-request counting costs most) and reads them back; brokers alternate each round and the
median of the rounds counts. The issue's target: produce with metrics >= 0.97 of without.
On a machine shared with other work the throughputs move with the neighbours' load, so the
broker's own CPU time per produced record is measured too: its inverse ratio is the throughput
ratio of a broker that is CPU-bound, and barely depends on what else runs.

Two more figures tell cost from noise: a third broker, also without metrics ("off-again"),
runs every round too, so off-again/off is what the same run's load alone does to a ratio; and
py-spy (when installed) samples the metrics broker through one more produce run, giving the
share of its CPU spent in metrics code, which no neighbour moves.
"""
import shutil
import tempfile
import threading
import urllib.request
from pathlib import Path

from . import clients, cluster
from .profile import raw_stacks, sampled
from .report import Report, bars, main_args, median

RECORDS, QUICK_RECORDS = 2_000_000, 30_000
SIZE = 100
PARTITIONS = 4
BATCH = 16 * 1024
SETTINGS = ("off", "on", "off-again")


class _Scraper:
    """GETs /metrics every second until stopped: the load a Prometheus server adds."""

    def __init__(self, port):
        self.url, self.count = f"http://127.0.0.1:{port}/metrics", 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.wait(1.0):
            with urllib.request.urlopen(self.url, timeout=10) as r:
                r.read()
            self.count += 1

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(15)


def _produce_seconds(bootstrap, topic, n):
    prod = clients.producer("confluent", clients.producer_config(bootstrap, batch_size=BATCH))
    try:
        return clients.timed_produce(prod, topic, clients.value_of(SIZE), n, PARTITIONS)
    finally:
        prod.close()


def run(args):
    quick = args.quick
    repeats = args.repeats or (1 if quick else 5)
    n = QUICK_RECORDS if quick else RECORDS
    rep = Report("metrics", quick, args.out, {"records": n, "value_bytes": SIZE,
                                              "partitions": PARTITIONS, "batch_bytes": BATCH,
                                              "repeats": repeats})
    metrics_port = cluster.free_port()
    brokers = {"off": cluster.MinilogBroker(),
               "on": cluster.MinilogBroker({"metrics.listener":
                                            f"http://127.0.0.1:{metrics_port}"}),
               "off-again": cluster.MinilogBroker()}
    produce = {s: [] for s in SETTINGS}
    consume = {s: [] for s in SETTINGS}
    cpu = {s: [] for s in SETTINGS}  # broker CPU seconds of each produce run
    with cluster.running_broker(brokers["off"]), cluster.running_broker(brokers["on"]), \
            cluster.running_broker(brokers["off-again"]):
        with _Scraper(metrics_port) as scraper:
            for r in range(repeats + 1):  # the first round warms up
                order = SETTINGS[r % 3:] + SETTINGS[:r % 3]  # each goes first in turn
                for s in order:
                    b = brokers[s]
                    topic = f"metrics-{s}-{r}"
                    cluster.create_topic(b.bootstrap, topic, PARTITIONS)
                    cpu0 = b.cpu_seconds()
                    produced = _produce_seconds(b.bootstrap, topic, n)
                    cpu1 = b.cpu_seconds()
                    consumed = clients.read_confluent(b.bootstrap, topic, PARTITIONS, n)
                    if r:
                        produce[s].append(produced)
                        consume[s].append(consumed)
                        cpu[s].append(cpu1 - cpu0)
            share = _metrics_share(brokers["on"], n)
        rep.log(f"{scraper.count} scrapes of /metrics during the run")
    rows = [{"metrics": s, "produce_s": n / median(produce[s]),
             "consume_s": n / median(consume[s]),
             "cpu_us": median(cpu[s]) / n * 1e6} for s in SETTINGS]
    for row in rows:
        rep.log(f"metrics {row['metrics']:9} produce {row['produce_s']:>10,.0f}/s  "
                f"consume {row['consume_s']:>10,.0f}/s  broker CPU "
                f"{row['cpu_us']:.2f} us/record produced")
    rep.section(f"{n:,} records of {SIZE} B over {PARTITIONS} partitions with confluent-kafka, "
                f"{BATCH // 1024} KiB batches (records/s, median of {repeats})", rows,
                [("metrics", "metrics"), ("produce_s", "produce/s"), ("consume_s", "consume/s"),
                 ("cpu_us", "broker CPU µs/record produced")])
    got = {r["metrics"]: r for r in rows}
    rep.ratio("produce metrics on/off", got["on"]["produce_s"], got["off"]["produce_s"],
              "target >= 0.97")
    # Each round ran both brokers back to back: the median of the rounds' own ratios cancels
    # most of the load that moves between rounds.
    paired = median([off / on for on, off in zip(produce["on"], produce["off"])])
    rep.ratio("produce metrics on/off, median of each round's ratio", paired, 1,
              "target >= 0.97")
    control = median([off / again for again, off in zip(produce["off-again"], produce["off"])])
    rep.ratio("produce off-again/off, median of each round's ratio (the noise: same broker "
              "twice)", control, 1)
    rep.ratio("produce metrics on/off, by broker CPU per record", got["off"]["cpu_us"],
              got["on"]["cpu_us"], "target >= 0.97")
    rep.ratio("consume metrics on/off", got["on"]["consume_s"], got["off"]["consume_s"])
    if share is not None:
        rep.log(f"py-spy: {share:.2%} of the metrics-on broker's CPU samples during one more "
                "produce run were in metrics code (hooks, collector, /metrics, prometheus-client)")
        rep.ratio("produce metrics on/off, by profile (1 - metrics share of broker CPU)",
                  1 - share, 1, "target >= 0.97")
    rep.plot("throughput", lambda plt: bars(
        plt, list(SETTINGS), {what: [got[s][f"{what}_s"] for s in SETTINGS]
                              for what in ("produce", "consume")},
        "records/s", f"{n:,} × {SIZE} B records, metrics off, on, off again (confluent-kafka)"))
    rep.finish()


# Frames of metrics code in py-spy's raw stacks: the broker's hooks and collector, the /metrics
# server, prometheus-client.
_METRICS_FRAMES = ("broker/server/metrics.py", "broker/server/metrics_http.py", "prometheus_client/")


def _metrics_share(broker, n):
    """Share of the broker's CPU samples inside metrics code during one produce run, sampled
    by py-spy (None without it): an overhead figure the neighbours' load does not move."""
    if shutil.which("py-spy") is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "on.txt"
        topic = "metrics-on-profiled"
        cluster.create_topic(broker.bootstrap, topic, PARTITIONS)
        with sampled(broker.proc.pid, path):
            _produce_seconds(broker.bootstrap, topic, n)
        total = inside = 0
        for stack, count in raw_stacks(path):
            total += count
            inside += count if any(f in stack for f in _METRICS_FRAMES) else 0
    return inside / total if total else None


def main(argv=None):
    run(main_args(argv))


if __name__ == "__main__":
    main()
