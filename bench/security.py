"""security: what TLS and SASL cost, as ratios to plaintext on the same broker in the same run.

One broker listens with PLAINTEXT, SSL and SASL_SSL (SCRAM-SHA-512), its certificate from a
throw-away CA (`trustme`). confluent-kafka produces records of 1 KiB (acks=1, linger 5 ms,
256 KiB batches) and reads them back through each listener in turn (interleaved repeats,
each round starting with the next listener, median), and minilog's producer writes the same
records (it hands the TLS layer whole requests, where librdkafka writes one TLS record per
buffer segment: the broker's decryption cost per byte differs by the records' size); then a
new connection is opened through each listener again and again: the time from creating
minilog's client connection to its first answer, TLS and SASL handshakes included (the added
connection set-up time). minilog's consumer and kafka-python (a quarter
of the records) produce and read them back too. The target, TLS over plaintext: >= 0.8 for
minilog's producer and consumer and for kafka-python; confluent-kafka's ratios are reported
beside them, with its CPU, and held to no target (librdkafka's one TLS record per buffer
segment bounds them against any broker).
Each confluent-kafka produce run also counts CPU seconds (this process, its busiest
librdkafka thread, the broker): on two cores the run is as fast as the CPU both sides need
lets it be, and what TLS adds on each side shows which side holds the ratio down. minilog's
produce and consume runs count theirs too (this process: the application's thread and the
client's event-loop thread; the broker), and the load average before and after the run is
kept with the results: on a busy machine the CPU both sides need, not the wall time, is what
TLS changes.
What holds minilog's consumer down (Python 3.11's `ssl` on OpenSSL 3.0, two cores): on a
busy machine the wall-time ratio follows the CPU both sides need (client plus broker: ~0.6 s
per 200,000 records over PLAINTEXT, ~1.1 s over SSL), and OpenSSL's own floor, encrypting and
decrypting ~210 MiB through memory BIOs, is ~0.24 s of it: at that floor the consumer's ratio
would be ~0.74, below the target. The sync consumer decodes in the application's thread while
its loop thread decrypts (faster both ways), but `ssl` decrypts one 16 KiB TLS record per call
and needs the GIL back after each, so the two hardly overlap. docs/BENCHMARKS.md has the
figures.
"""
import asyncio
import math
import os
import sys
import tempfile
import time
from pathlib import Path

from . import clients, cluster
from .report import Report, bars, main_args, median

RECORDS, QUICK_RECORDS = 200_000, 4_000
SIZE = 1024
BATCH = 256 * 1024  # below librdkafka's fetch.message.max.bytes (1 MiB), as with 1 KiB records
CONNECTIONS, QUICK_CONNECTIONS = 30, 5
KAFKA_PYTHON_SHARE = 4  # kafka-python moves a quarter of the records: it is the slowest
# The figures held to a target, TLS over plaintext on the same broker in the same run:
# minilog's own clients and kafka-python. confluent-kafka's are reported beside them.
HELD = ("produce_minilog_s", "consume_minilog_s", "produce_kafka_python_s",
        "consume_kafka_python_s")
TARGET = 0.8
MINILOG_CPU = ("produce_minilog_client_cpu_s", "produce_minilog_broker_cpu_s",
               "consume_minilog_client_cpu_s", "consume_minilog_broker_cpu_s")
PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_SSL")
USER, PASSWORD = "bench", "bench-secret"


class SecureBenchBroker(cluster.MinilogBroker):
    """The bench broker with one listener per protocol (`ports`) and a CA file (`ca`)."""

    def __init__(self):
        import trustme
        ca = trustme.CA()
        certs = Path(tempfile.mkdtemp(prefix="minilog-bench-certs-"))
        self.ca = certs / "ca.pem"
        ca.cert_pem.write_to_path(str(self.ca))
        ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(
            str(certs / "server.pem"))
        self.ports = {p: cluster.free_port() for p in PROTOCOLS}
        super().__init__({
            "listeners": ",".join(f"{p}://127.0.0.1:{n}" for p, n in self.ports.items()),
            "ssl.keystore.location": certs / "server.pem",
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "sasl.scram": f"SCRAM-SHA-512=[name={USER},password={PASSWORD}]"})
        self.port = self.ports["PLAINTEXT"]

    def argv(self):  # every listener from `listeners`, none from --listen
        return [sys.executable, "-m", "minilog.broker", "start", "--data-dir",
                str(self.log_dir), *self.extra]

    def start(self, timeout=60.0):
        super().start(timeout)
        for port in self.ports.values():
            cluster.wait_for_port(port, timeout, self.proc)
        return self

    def settings(self, protocol):
        conf = {"bootstrap.servers": f"127.0.0.1:{self.ports[protocol]}",
                "security.protocol": protocol}
        if protocol != "PLAINTEXT":
            conf["ssl.ca.location"] = str(self.ca)
        if protocol.startswith("SASL"):
            conf.update({"sasl.mechanism": "SCRAM-SHA-512", "sasl.username": USER,
                         "sasl.password": PASSWORD})
        return conf


def _produce_run(broker, protocol, topic, n, client="confluent"):
    """(seconds, CPU seconds of this process, of its busiest librdkafka thread, of the broker)
    to produce `n` records. On two cores what both sides spend together bounds the run's
    speed, and so does any one thread's CPU time: it cannot overlap with itself."""
    cfg = {**broker.settings(protocol), **clients.PRODUCER, "batch.size": BATCH}
    prod = clients.producer(client, cfg)
    try:
        ours, threads, theirs = _own_cpu_seconds(), _rdkafka_threads(), broker.cpu_seconds()
        took = clients.timed_produce(prod, topic, clients.value_of(SIZE), n, 1)
        theirs = broker.cpu_seconds() - theirs if theirs is not None else math.nan
        busiest = max((t - threads.get(tid, 0.0) for tid, t in _rdkafka_threads().items()),
                      default=math.nan)
        return took, _own_cpu_seconds() - ours, busiest, theirs
    finally:
        prod.close()


def _rotated(items, by):
    """`items` turned left `by` places: each round starts with the next listener, so none
    always runs after the others' writes (the page cache writing back the gigabyte the round
    produced so far) or always right after a pause."""
    k = by % len(items)
    return items[k:] + items[:k]


def _load_average():
    """The 1, 5 and 15 minute load averages, rounded; None where the system has none."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def _own_cpu_seconds():
    """CPU time of this process, all threads (librdkafka's included)."""
    t = os.times()
    return t.user + t.system


def _rdkafka_threads():
    """{thread id: CPU seconds} of this process's librdkafka threads (named `rdk:...`), from
    /proc; empty where there is none."""
    found = {}
    for stat in Path("/proc/self/task").glob("*/stat"):
        try:
            raw = stat.read_text()
        except OSError:  # the thread ended
            continue
        if raw[raw.find("(") + 1:].startswith("rdk:"):
            found[stat.parent.name] = cluster.stat_cpu_seconds(raw)
    return found


def _with_cpu(broker, run):
    """(what `run()` returns, CPU seconds this process spent meanwhile, the broker's)."""
    ours, theirs = _own_cpu_seconds(), broker.cpu_seconds()
    got = run()
    theirs = broker.cpu_seconds() - theirs if theirs is not None else math.nan
    return got, _own_cpu_seconds() - ours, theirs


def _consume_seconds(broker, protocol, topic, n, client="confluent"):
    conf = broker.settings(protocol)
    if client == "minilog":
        return clients.read_minilog(conf["bootstrap.servers"], topic, 1, n, False,
                                    settings=conf)
    return clients.read_confluent(conf["bootstrap.servers"], topic, 1, n, settings=conf)


_KAFKA_PYTHON_NAMES = {"bootstrap.servers": "bootstrap_servers",
                       "security.protocol": "security_protocol", "ssl.ca.location": "ssl_cafile",
                       "sasl.mechanism": "sasl_mechanism", "sasl.username": "sasl_plain_username",
                       "sasl.password": "sasl_plain_password"}


def _kafka_python_seconds(broker, protocol, topic, n):
    """(seconds to produce, seconds to read back) `n` records with kafka-python (acks=1,
    linger 5 ms, 256 KiB batches, as the others)."""
    import kafka
    conf = {_KAFKA_PYTHON_NAMES[k]: v for k, v in broker.settings(protocol).items()}
    value = clients.value_of(SIZE)
    prod = kafka.KafkaProducer(**conf, acks=1, linger_ms=5, batch_size=BATCH,
                               max_request_size=4 * BATCH)
    try:
        t0 = time.perf_counter()
        for _ in range(n):
            prod.send(topic, value, partition=0)
        prod.flush(60)
        produced = time.perf_counter() - t0
    finally:
        prod.close(10)
    cons = kafka.KafkaConsumer(**conf, enable_auto_commit=False, auto_offset_reset="earliest",
                               fetch_max_bytes=8 * 1024 * 1024,
                               max_partition_fetch_bytes=4 * 1024 * 1024)
    try:
        tp = kafka.TopicPartition(topic, 0)
        cons.assign([tp])
        cons.seek(tp, 0)
        got, t0 = 0, time.perf_counter()
        deadline = t0 + 120
        while got < n:
            got += sum(len(b) for b in cons.poll(500, max_records=10_000).values())
            if time.perf_counter() > deadline:
                raise TimeoutError(f"kafka-python read {got} of {n} records")
        return produced, time.perf_counter() - t0
    finally:
        cons.close()


def _connect_seconds(broker, protocol, times):
    """Seconds for minilog's client to open a connection and get its ApiVersions answer, the
    TLS and SASL handshakes included, `times` times."""
    from minilog.connector.client.config import Config
    from minilog.connector.client.connection import BrokerConnection
    from minilog.connector.client.security import client_security
    conf = broker.settings(protocol)
    security = client_security(Config("admin", conf))

    async def once():
        t0 = time.perf_counter()
        conn = await BrokerConnection("127.0.0.1", broker.ports[protocol],
                                      security=security).connect()
        took = time.perf_counter() - t0
        conn.close()
        return took

    async def all_of():
        return [await once() for _ in range(times)]
    return asyncio.run(all_of())


def run(args):
    quick = args.quick
    repeats = args.repeats or (1 if quick else 3)
    n = QUICK_RECORDS if quick else RECORDS
    connections = QUICK_CONNECTIONS if quick else CONNECTIONS
    # a first round warms up, not kept; a quick run's figures mean nothing, so it has none
    warmup = 0 if quick else 1
    rep = Report("security", quick, args.out, {"records": n, "value_bytes": SIZE,
                                               "repeats": repeats, "mechanism": "SCRAM-SHA-512",
                                               "load_average_before": _load_average()})
    produce = {p: [] for p in PROTOCOLS}
    cpu = {p: [] for p in PROTOCOLS}  # CPU seconds of each confluent produce: (client, its
    # busiest librdkafka thread, broker)
    produce_minilog = {p: [] for p in PROTOCOLS}
    consume_minilog = {p: [] for p in PROTOCOLS}
    cpu_minilog = {p: [] for p in PROTOCOLS}  # CPU seconds of minilog's runs: (produce:
    # client, broker, consume: client, broker)
    kafka_python = {p: [] for p in PROTOCOLS}  # (produce seconds, consume seconds)
    kp_n = max(1, n // KAFKA_PYTHON_SHARE)
    consume = {p: [] for p in PROTOCOLS}
    with cluster.running_broker(SecureBenchBroker()) as b:
        for r in range(warmup + repeats):
            for p in _rotated(PROTOCOLS, r):
                topic = f"sec-{p.lower()}-{r}"
                cluster.create_topic(b.bootstrap, topic, 1)
                seconds, *spent = _produce_run(b, p, topic, n)
                took = (seconds, _consume_seconds(b, p, topic, n))
                cluster.create_topic(b.bootstrap, f"{topic}-m", 1)
                produced, produce_client, _, produce_broker = _produce_run(
                    b, p, f"{topic}-m", n, "minilog")
                consumed, consume_client, consume_broker = _with_cpu(
                    b, lambda: _consume_seconds(b, p, f"{topic}-m", n, "minilog"))
                ours = (produced, consumed)
                cluster.create_topic(b.bootstrap, f"{topic}-k", 1)
                kp = _kafka_python_seconds(b, p, f"{topic}-k", kp_n)
                if r >= warmup:
                    produce[p].append(took[0])
                    cpu[p].append(spent)
                    consume[p].append(took[1])
                    produce_minilog[p].append(ours[0])
                    consume_minilog[p].append(ours[1])
                    cpu_minilog[p].append((produce_client, produce_broker, consume_client,
                                           consume_broker))
                    kafka_python[p].append(kp)
        connect = {p: _connect_seconds(b, p, connections) for p in PROTOCOLS}
    rows = []
    for p in PROTOCOLS:
        rows.append({"protocol": p, "produce_s": n / median(produce[p]),
                     "consume_s": n / median(consume[p]),
                     "produce_minilog_s": n / median(produce_minilog[p]),
                     "consume_minilog_s": n / median(consume_minilog[p]),
                     "produce_kafka_python_s": kp_n / median(t for t, _ in kafka_python[p]),
                     "consume_kafka_python_s": kp_n / median(t for _, t in kafka_python[p]),
                     "produce_mb_s": n * SIZE / median(produce[p]) / 1e6,
                     "consume_mb_s": n * SIZE / median(consume[p]) / 1e6,
                     "connect_ms": median(connect[p]) * 1000,
                     "client_cpu_s": median(c for c, _, _ in cpu[p]),
                     "rdkafka_thread_cpu_s": median(c for _, c, _ in cpu[p]),
                     "broker_cpu_s": median(c for _, _, c in cpu[p]),
                     "cores_busy": median((ours + theirs) / t
                                          for (ours, _, theirs), t in zip(cpu[p], produce[p])),
                     **{key: median(c[i] for c in cpu_minilog[p])
                        for i, key in enumerate(MINILOG_CPU)}})
        rep.log(f"{p:10} produce {rows[-1]['produce_s']:>10,.0f}/s  consume "
                f"{rows[-1]['consume_s']:>10,.0f}/s  connect {rows[-1]['connect_ms']:.1f} ms  "
                f"produce CPU client {rows[-1]['client_cpu_s']:.2f} s (busiest librdkafka "
                f"thread {rows[-1]['rdkafka_thread_cpu_s']:.2f} s) broker "
                f"{rows[-1]['broker_cpu_s']:.2f} s")
    rep.section(f"{n:,} records of {SIZE} B through each listener with confluent-kafka "
                f"(records/s, median; produce also with minilog's producer), and minilog's "
                f"client connection set-up (ms, median of "
                f"{connections})", rows,
                [("protocol", "protocol"), ("produce_s", "produce/s"),
                 ("produce_mb_s", "produce MB/s"), ("produce_minilog_s", "produce/s, minilog"),
                 ("consume_s", "consume/s"),
                 ("consume_mb_s", "consume MB/s"), ("consume_minilog_s", "consume/s, minilog"),
                 ("produce_kafka_python_s", "produce/s, kafka-python"),
                 ("consume_kafka_python_s", "consume/s, kafka-python"),
                 ("connect_ms", "connect ms")])
    rep.section("CPU seconds of each confluent-kafka produce run (median): this process (the "
                "Python loop calling produce() and librdkafka's threads), the busiest "
                "librdkafka thread (the one that encrypts and writes), the broker, and the "
                "cores client and broker kept busy on average (CPU over wall seconds)", rows,
                [("protocol", "protocol"), ("client_cpu_s", "client CPU s"),
                 ("rdkafka_thread_cpu_s", "librdkafka thread CPU s"),
                 ("broker_cpu_s", "broker CPU s"), ("cores_busy", "cores busy")])
    rep.section("CPU seconds of minilog's produce and consume runs (median): this process "
                "(the application's thread and the client's event-loop thread) and the broker; "
                "what a protocol adds to PLAINTEXT's is its cost on that side", rows,
                [("protocol", "protocol"),
                 ("produce_minilog_client_cpu_s", "produce: client CPU s"),
                 ("produce_minilog_broker_cpu_s", "produce: broker CPU s"),
                 ("consume_minilog_client_cpu_s", "consume: client CPU s"),
                 ("consume_minilog_broker_cpu_s", "consume: broker CPU s")])
    got = {r["protocol"]: r for r in rows}
    for p in PROTOCOLS[1:]:
        for what in HELD:
            rep.ratio(f"{what[:-2].replace('_', ' ')} {p}/PLAINTEXT", got[p][what],
                      got["PLAINTEXT"][what], f"target >= {TARGET}")
        for what in ("produce_s", "consume_s"):
            rep.ratio(f"confluent-kafka {what[:-2]} {p}/PLAINTEXT", got[p][what],
                      got["PLAINTEXT"][what], "reported beside them: librdkafka writes one "
                      "TLS record per buffer segment, whatever the broker; see its CPU above")
    rep.params["load_average_after"] = _load_average()
    rep.log(f"load average (1, 5, 15 min) before {rep.params['load_average_before']}, after "
            f"{rep.params['load_average_after']} on {os.cpu_count()} cores")
    rep.plot("throughput", lambda plt: bars(
        plt, list(PROTOCOLS), {what: [got[p][f"{what}_s"] for p in PROTOCOLS]
                               for what in ("produce", "consume")},
        "records/s", f"{n:,} × {SIZE} B records through each listener (confluent-kafka)"))
    rep.finish()


def main(argv=None):
    run(main_args(argv))


if __name__ == "__main__":
    main()
