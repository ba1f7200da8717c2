"""`minilog demo`, the README's first command, as a user runs it: the bank-balance pipeline
through Spark on a bundled local cluster, verified; nothing left behind, Ctrl-C included; a
missing Java is one line."""
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient
from sparktools import consume_all

ENTRY = "import sys; from minilog.connector.cli import main; sys.exit(main())"


def demo(*args, **kwargs):
    return subprocess.Popen([sys.executable, "-c", ENTRY, "demo", *args], text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kwargs)


def descendants(pid):
    """Every live process below `pid` (brokers start their own sessions, so go by parent)."""
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(stat.parent.name)] = int(fields[1])
    out, todo = set(), [pid]
    while todo:
        p = todo.pop()
        kids = [c for c, pp in parents.items() if pp == p]
        out.update(kids)
        todo += kids
    return out


def alive(pid):
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_demo_runs_the_spark_pipeline_verifies_it_and_keeps_the_cluster():
    """`--keep`: the same run, then the cluster stays up for other clients: three brokers,
    every partition of both topics on all three."""
    p = demo("--transactions", "3000", "--accounts", "5", "--keep")
    out, err = p.communicate(timeout=600)
    pids = [int(x) for x in re.search(r"stop it with: kill ([\d ]+)", out).group(1).split()] \
        if "stop it with" in out else []
    try:
        assert p.returncode == 0, out + err
        assert "balances verified" in out, out
        assert sum(line.strip().startswith("account-") for line in out.splitlines()) == 5
        assert "micro-batch" in out and "lag 0" in out, out
        bootstrap = re.search(r"keeps running at (\S+) ", out).group(1)
        balances = consume_all(bootstrap, "bank.balances", 3, 5)  # a client we did not write
        assert {k.decode() for _, _, k, _, _ in balances} == {f"account-{i:03d}" for i in range(5)}
        assert f'option("kafka.bootstrap.servers", "{bootstrap}")' in out
        metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=30)
        assert sorted(metadata.brokers) == [1, 2, 3]
        for topic in ("bank.transactions", "bank.balances"):
            parts = metadata.topics[topic].partitions.values()
            assert [sorted(p.replicas) for p in parts] == [[1, 2, 3]] * 3, out
            assert len({p.leader for p in parts}) == 3  # leadership spread over the brokers
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGTERM)
    assert pids, out


@pytest.mark.parametrize("moment", ["starting Spark", "micro-batch"])
def test_ctrl_c_stops_the_broker_and_spark_and_leaves_nothing(moment):
    """Interrupted while Spark starts, or while the query runs."""
    p = demo("--transactions", "30000", "--accounts", "5")
    deadline = time.monotonic() + 300
    for line in p.stdout:
        if moment in line or time.monotonic() > deadline:
            break
    time.sleep(3)  # the JVM (and its Python workers) well under way: they must go too
    below = descendants(p.pid)
    assert below, "the demo started no processes"
    p.send_signal(signal.SIGINT)
    p.communicate(timeout=120)
    assert p.returncode != 0
    end = time.monotonic() + 60
    while any(alive(c) for c in below) and time.monotonic() < end:
        time.sleep(0.5)
    left = [c for c in below if alive(c)]
    for c in left:
        os.kill(c, signal.SIGKILL)
    assert not left, f"processes left behind after Ctrl-C: {left}"


def test_missing_java_is_one_line_and_exit_1(tmp_path):
    bindir = tmp_path / "bin"  # a PATH with python but no java
    bindir.mkdir()
    os.symlink(sys.executable, bindir / "python")
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = str(bindir)
    assert shutil.which("java", path=env["PATH"]) is None
    p = demo(env=env)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 1
    assert err.strip().count("\n") == 0 and "Java 17" in err, err
