"""`minilog demo`: the bank-balance pipeline, end to end, on a bundled local cluster.

It starts minilog on free ports in a temporary directory, writes a stream of bank transactions
(key = account, value = JSON with a signed amount) to `bank.transactions`, and runs the
`bank_balance` Spark job over them for a few micro-batches: Spark reads the topic through
`format("minilog")`, keeps a running balance per account and writes every change to the
compacted topic `bank.balances`. The demo then reads the balances back, checks them against an
independent fold of the transactions it wrote, and shows the job's consumer group catching up
to lag 0. Everything stops on exit, Ctrl-C included; `--keep` leaves the cluster running.
"""
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from minilog.connector.local_cluster import LocalCluster
from minilog.connector.cli_parser import Parser
from minilog.connector.client import AdminClient, Consumer, NewTopic, Producer, TopicPartition
from minilog.connector.tables import describe_topics
from minilog.jobs.interrupts import CTRL_C

TRANSACTIONS, BALANCES, GROUP = "bank.transactions", "bank.balances", "bank-balance"
JAVA_MAJOR = 17
INSTALL_JAVA = ("install Java 17 (`apt-get install openjdk-17-jre-headless`, or "
                "`brew install openjdk@17`) and point JAVA_HOME at it (e.g. "
                "`export JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64`)")


def java_problem() -> str | None:
    """Why Spark could not start its JVM here, in one line, or None: the java Spark runs
    (JAVA_HOME's, else the PATH's, as spark-class chooses) must answer `-version` with 17+."""
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    where = f"JAVA_HOME={home}" if home else "PATH"
    if java is None or not os.access(java, os.X_OK):
        return f"minilog demo needs Java {JAVA_MAJOR} to run Spark, and {where} has none: " \
               f"{INSTALL_JAVA}"
    try:
        answer = subprocess.run([java, "-version"], capture_output=True, text=True,
                                timeout=60).stderr
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"minilog demo cannot run {java} ({e}): {INSTALL_JAVA}"
    found = re.search(r'version "(\d+)(?:\.(\d+))?', answer)
    major = found and (int(found.group(2) or 0) if found.group(1) == "1" else int(found.group(1)))
    if not major or major < JAVA_MAJOR:
        seen = answer.strip().splitlines()[0] if answer.strip() else "no version"
        return f"minilog demo needs Java {JAVA_MAJOR} or newer to run Spark; {java} is " \
               f"{seen!r}: {INSTALL_JAVA}"
    return None


def generate(n, accounts, seed):
    rng = random.Random(seed)
    names = [f"account-{i:03d}" for i in range(accounts)]
    for i in range(n):
        yield rng.choice(names), {"id": i, "amount": rng.randint(-500, 1000)}


def create_topics(bootstrap, partitions, replicas, out):
    """The two topics, each partition on `replicas` brokers; with more than one, a write is
    acknowledged once two copies hold it (acks=all, min.insync.replicas=2), as in production."""
    durable = {"min.insync.replicas": "2"} if replicas > 1 else {}
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        existing = set(admin.list_topics())
        admin.create_topics([t for t in (
            NewTopic(TRANSACTIONS, partitions, replicas, config=durable),
            NewTopic(BALANCES, partitions, replicas,
                     config={"cleanup.policy": "compact", **durable}))
            if t.name not in existing])
        if replicas > 1:
            describe_topics(admin, [TRANSACTIONS], out)


def progress(done, total, out, width=30):
    if out.isatty():
        bar = "#" * (width * done // total)
        out.write(f"\r  [{bar:<{width}}] {done:,}/{total:,} transactions")
        if done == total:
            out.write("\n")
        out.flush()


def write_transactions(bootstrap, n, accounts, seed, out):
    """Send the transactions; return {account: balance}, the independent fold to check."""
    expected = {}
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 10,
                         "compression.type": "zstd"})
    try:
        for i, (account, txn) in enumerate(generate(n, accounts, seed), 1):
            expected[account] = expected.get(account, 0) + txn["amount"]
            producer.send(TRANSACTIONS, key=account.encode(), value=json.dumps(txn).encode())
            if i % 1000 == 0 or i == n:
                progress(i, n, out)
        producer.flush(60)
    finally:
        producer.close()
    return expected


def read_balances(bootstrap, partitions):
    """The newest value of each key in the compacted balances topic."""
    tps = [TopicPartition(BALANCES, p) for p in range(partitions)]
    consumer = Consumer({"bootstrap.servers": bootstrap})
    try:
        ends = consumer.end_offsets(tps)
        latest = {}
        for tp in tps:
            for batch in consumer.fetch_range_arrow(tp, 0, ends[tp], timeout=30,
                                                    include_headers=False):
                for key, value in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist()):
                    latest[key.decode()] = json.loads(value)
        return latest
    finally:
        consumer.close()


def group_lag(bootstrap, partitions):
    tps = [(TRANSACTIONS, p) for p in range(partitions)]
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        ends = admin.list_offsets({tp: "latest" for tp in tps})
        committed = admin.list_group_offsets(GROUP, tps)
    return sum(ends[tp].offset - (committed[tp].offset if committed.get(tp) else 0)
               for tp in ends)


def start_spark(out):
    """Spark in local mode; from here on Ctrl-C stops between two Spark calls (interrupts.py)."""
    from minilog.jobs import pipeline
    print("starting Spark (local mode) ...", file=out, flush=True)
    spark = pipeline.session("minilog-demo")
    spark.sparkContext.setLogLevel("ERROR")
    CTRL_C.check()
    return spark


def stop_spark():
    """Stop Spark and its JVM: the demo started them, and nothing may outlive it, Ctrl-C
    included (the JVM ignores SIGINT and does not exit with its Python parent). After Ctrl-C
    the JVM is ended without stopping the query first: a query stopped inside a micro-batch
    prints Spark's tracebacks of the batch it aborts, and the demo keeps nothing of it."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession
    try:
        # Only a context that finished starting can be asked anything: a JVM interrupted
        # mid-start would keep a call waiting.
        if SparkContext._active_spark_context is not None and not CTRL_C.requested:
            spark = SparkSession.getActiveSession()
            for q in spark.streams.active if spark is not None else ():
                q.stop()
            SparkContext._active_spark_context.stop()
    except Exception:  # noqa: BLE001 - interrupted mid-start: the JVM goes below regardless
        pass
    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None)
    if proc is not None and proc.poll() is None:
        proc.kill() if CTRL_C.requested else proc.terminate()
        try:
            proc.wait(30)
        except Exception:  # noqa: BLE001 - a JVM deaf to SIGTERM gets SIGKILL
            proc.kill()
    for pid in spark_children():  # interrupted before pyspark knew its JVM's process
        _terminate(pid)


def spark_children():
    """Our own child processes that are Spark's JVM (Linux: read from /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) != os.getpid():
                continue
            cmdline = (stat.parent / "cmdline").read_bytes()
        except (OSError, ValueError, IndexError):
            continue
        if b"org.apache.spark" in cmdline or b"spark-submit" in cmdline:
            found.append(int(stat.parent.name))
    return found


def _terminate(pid):
    try:
        os.kill(pid, signal.SIGTERM)
        for _ in range(100):
            if os.waitpid(pid, os.WNOHANG)[0]:
                return
            time.sleep(0.1)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass


def run_job(spark, bootstrap, n, checkpoint, out):
    """bank_balance through Spark, availableNow, in about three micro-batches."""
    from minilog.jobs import bank_balance
    args = bank_balance.parse([
        "--bootstrap-servers", bootstrap, "--checkpoint", checkpoint, "--trigger",
        "available-now", "--max-offsets-per-trigger", str(max(1, n // 3)), "--group-id", GROUP])
    query = bank_balance.start(spark, args)
    shown = 0
    while query.isActive or shown < len(query.recentProgress):
        for p in query.recentProgress[shown:]:
            if p["numInputRows"]:
                print(f"  micro-batch {p['batchId']}: {p['numInputRows']:,} transactions "
                      f"({p['processedRowsPerSecond']:,.0f}/s)", file=out, flush=True)
        shown = len(query.recentProgress)
        try:
            query.awaitTermination(0.5)
        finally:  # after Ctrl-C, a failure the signal caused (a Python worker it reached) is
            CTRL_C.check()  # the interruption, not an error of the job's
    if query.exception() is not None:
        raise query.exception()


def show_balances(bootstrap, partitions, out):
    balances = read_balances(bootstrap, partitions)
    print(f"  {'account':<14}{'balance':>12}{'transactions':>14}", file=out)
    for account, b in sorted(balances.items()):
        print(f"  {account:<14}{b['balance']:>12,}{b['transactions']:>14,}", file=out)
    lag, deadline = group_lag(bootstrap, partitions), time.monotonic() + 60
    while lag and time.monotonic() < deadline:
        CTRL_C.check()
        time.sleep(0.5)
        lag = group_lag(bootstrap, partitions)
    print(f"consumer group {GROUP!r}: lag {lag} (see `minilog groups describe {GROUP}`)",
          file=out)
    return {a: b["balance"] for a, b in balances.items()}


def run(bootstrap, args, out=sys.stdout):
    partitions = args.partitions
    create_topics(bootstrap, partitions, args.replication_factor, out)
    print(f"writing {args.transactions:,} transactions for {args.accounts} accounts to "
          f"{TRANSACTIONS} ...", file=out, flush=True)
    expected = write_transactions(bootstrap, args.transactions, args.accounts, args.seed, out)
    # The checkpoint outlives Spark: after Ctrl-C the JVM is ended with its query still
    # running, and a query whose checkpoint was removed under it prints Java's tracebacks.
    with tempfile.TemporaryDirectory(prefix="minilog-demo-checkpoint-") as checkpoint:
        try:
            spark = start_spark(out)
            started = time.monotonic()
            run_job(spark, bootstrap, args.transactions, checkpoint, out)
            print(f"bank_balance ran in {time.monotonic() - started:.1f}s; balances in "
                  f"{BALANCES}:", file=out)
            got = show_balances(bootstrap, partitions, out)
        finally:
            stop_spark()
    CTRL_C.check()  # a Ctrl-C recorded after the query ended still stops the demo
    if got != expected:
        print("MISMATCH: the balances differ from an independent fold of the transactions",
              file=out)
        return 1
    # "balances verified" is what the fresh-install test of the README's first command looks
    # for (tests/test_fresh_install.py): keep that line whatever the demo runs on.
    print("balances verified: Spark's balances equal an independent fold of the "
          "transactions", file=out)
    return 0


def start_cluster(cluster, out=sys.stdout):
    cluster.start()
    for b in cluster.brokers:
        metrics = f" (Prometheus metrics at {b.metrics_url})" if b.metrics_url else ""
        print(f"started minilog broker {b.node_id} at {b.bootstrap}{metrics}", file=out,
              flush=True)
    if len(cluster.brokers) > 1:
        if not cluster.wait_until_live(60):
            raise RuntimeError(f"the brokers did not form a cluster within 60s; see the logs "
                               f"in {cluster.data_dir}")
        print(f"the {len(cluster.brokers)} brokers formed a cluster: each is a voter of the "
              f"Raft controller quorum that places replicas and elects leaders",
              file=out, flush=True)


def how_to_connect(cluster, out):
    """Ways in that work with what `pip install minilog` brought (the minilog command line,
    pyspark), then the other clients with how to get them."""
    b = cluster.bootstrap
    print(f"""
the cluster keeps running at {b} (data in {cluster.data_dir}); connect with:
  minilog -b {b} consume {BALANCES} --from-beginning --exit
  minilog -b {b} groups describe {GROUP}
  minilog cluster status --data-dir {cluster.data_dir}
  web console: `minilog -b {b} console`, then open http://127.0.0.1:8080/
  spark.readStream.format("minilog").option("kafka.bootstrap.servers", "{b}").option("subscribe", "{TRANSACTIONS}").load()
or with other Kafka clients, once installed:
  kcat -b {b} -C -t {BALANCES} -e          (kcat: `apt-get install kcat` or `brew install kcat`)
  python -c "from confluent_kafka import Consumer; c = Consumer({{'bootstrap.servers': '{b}', 'group.id': 'me', 'auto.offset.reset': 'earliest'}}); c.subscribe(['{BALANCES}']); print(c.consume(10, 10))"          (`pip install confluent-kafka`)
stop it with: minilog cluster down --data-dir {cluster.data_dir}""", file=out)


def build_parser() -> Parser:
    parser = Parser(prog="minilog demo", description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap-server", "-b", metavar="HOST:PORT",
                        help="run on this cluster instead of starting a local one")
    parser.add_argument("--transactions", type=int, default=20000, metavar="N",
                        help=f"bank transactions written to {TRANSACTIONS} (default 20000)")
    parser.add_argument("--accounts", type=int, default=10, metavar="N",
                        help="accounts the transactions are spread over (default 10)")
    parser.add_argument("--partitions", type=int, default=3, metavar="N",
                        help=f"partitions of {TRANSACTIONS} and {BALANCES} (default 3)")
    parser.add_argument("--seed", type=int, default=4,
                        help="seed of the random transactions: the same seed writes the same "
                             "ones (default 4)")
    parser.add_argument("--brokers", type=int, default=3, metavar="N",
                        help="brokers of the local cluster (default 3: a replicated cluster)")
    parser.add_argument("--replication-factor", type=int, metavar="N",
                        help="copies of each partition (default: 3, or the number of brokers "
                             "if fewer; 1 with --bootstrap-server)")
    parser.add_argument("--keep", action="store_true",
                        help="leave the local cluster running, as a `minilog cluster` in a "
                             "directory it names (status, down, up again), and say how to "
                             "connect to it")
    return parser


def main(argv=None):
    CTRL_C.install()
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.brokers < 1:
        parser.error("--brokers must be at least 1")
    problem = java_problem()
    if problem:
        print(problem, file=sys.stderr)
        return 1
    if args.bootstrap_server:
        args.replication_factor = args.replication_factor or 1
        return run(args.bootstrap_server, args)
    args.replication_factor = args.replication_factor or min(3, args.brokers)
    if not 1 <= args.replication_factor <= args.brokers:
        parser.error(f"--replication-factor must be between 1 and the {args.brokers} brokers")
    cluster = LocalCluster(args.brokers, data_dir=tempfile.mkdtemp(prefix="minilog-demo-")
                           if args.keep else None, metrics=True)
    keep = False
    try:
        start_cluster(cluster)
        if args.keep:
            cluster.save_state()
        code = run(cluster.bootstrap, args)
        if args.keep:
            how_to_connect(cluster, sys.stdout)
            keep = True
        return code
    except KeyboardInterrupt:  # CTRL_C said so in one line
        return CTRL_C.exit_status
    finally:
        if not keep:
            cluster.stop()
            if args.keep:
                shutil.rmtree(cluster.data_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
