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

from clitools import (CLI, Interruptible, nodes_stopped, ok, one_line_error, process_identity,
                      run)


def demo(*args, **kwargs):
    return subprocess.Popen([*CLI, "demo", *args], text=True,
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
    data_dir = re.search(r"cluster down --data-dir (\S+)", out)
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
        assert data_dir, out
        kept_cluster_is_an_ordinary_cluster(data_dir.group(1), out)
    finally:
        if data_dir:
            run("cluster", "down", "--data-dir", data_dir.group(1), timeout=120)
            shutil.rmtree(data_dir.group(1), ignore_errors=True)


def kept_cluster_is_an_ordinary_cluster(data_dir, out):
    """`minilog cluster status|down|up` on the directory the demo names; every `minilog` line
    of its connection hints runs as printed; the other clients' lines say how to get them."""
    status = ok("cluster", "status", "--data-dir", data_dir)
    assert status.count("running (pid") == 3 and "live brokers: 1,2,3" in status, status
    pids = [int(x) for x in re.findall(r"running \(pid (\d+)\)", status)]
    for line in out.splitlines():
        if line.strip().startswith("minilog ") and "cluster down" not in line:
            ok(*line.split()[1:], timeout=120)
        if line.strip().startswith(("kcat ", "python -c")):
            assert "install" in line, line
    down = ok("cluster", "down", "--data-dir", data_dir, timeout=120)
    assert nodes_stopped(down) == 3, down
    assert not any(alive(pid) for pid in pids)
    up = ok("cluster", "up", "--data-dir", data_dir, timeout=120)
    assert up.count("listening") == 3, up
    assert nodes_stopped(ok("cluster", "down", "--data-dir", data_dir, timeout=120)) == 3


@pytest.mark.parametrize("moment, how", [("starting Spark", "ctrl-c"), ("micro-batch", "ctrl-c"),
                                         ("micro-batch", "sigterm")])
def test_ctrl_c_is_one_line_exit_130_and_leaves_nothing(moment, how):
    """Interrupted while Spark starts, or while the query runs: Ctrl-C (SIGINT to the process
    group, as a terminal sends it) prints one line, the demo exits 130, and its brokers, Spark's
    JVM and Python workers are gone. SIGTERM to the demo's process alone (`kill PID`, a
    supervisor) does the same with exit 143: the JVM it launched does not outlive it."""
    p = Interruptible([*CLI, "demo", "--transactions", "30000", "--accounts", "5"])
    p.wait_for(moment)
    if moment == "starting Spark":  # the JVM under way: it must go too. Once a micro-batch
        time.sleep(3)  # is reported, its JVM and Python workers run, and the rest is quick
    below = [i for i in map(process_identity, descendants(p.proc.pid)) if i]
    assert below, "the demo started no processes"
    p.ctrl_c() if how == "ctrl-c" else p.terminate()
    assert p.finish() == (130 if how == "ctrl-c" else 143), p.text()[-3000:]
    # The JVM announces its incubator module when it starts, Ctrl-C or not.
    said = [line for line in p.after_ctrl_c() if "Using incubator modules" not in line]
    assert said == ["interrupted: stopping" if how == "ctrl-c" else "terminated: stopping"], \
        p.text()[-5000:]
    end = time.monotonic() + 60  # (a pid compared with its start time: it may be reused)
    while any(process_identity(pid) == (pid, t) for pid, t in below) and time.monotonic() < end:
        time.sleep(0.5)
    left = [pid for pid, t in below if process_identity(pid) == (pid, t)]
    for pid in left:
        os.kill(pid, signal.SIGKILL)
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


def _old_java(tmp_path):
    """A JAVA_HOME whose java answers as Java 11 does."""
    home = tmp_path / "jdk-11"
    (home / "bin").mkdir(parents=True)
    java = home / "bin" / "java"
    java.write_text('#!/bin/sh\necho \'openjdk version "11.0.22" 2024-01-16\' >&2\n')
    java.chmod(0o755)
    return home


@pytest.mark.parametrize("java_home", ["empty", "java 11"])
def test_an_unusable_java_home_is_one_line_before_anything_starts(java_home, tmp_path):
    """JAVA_HOME pointing at no java, or at Java 11: one line naming Java 17 and JAVA_HOME,
    exit 1, and no broker started nor record written first."""
    home = tmp_path if java_home == "empty" else _old_java(tmp_path)
    r = subprocess.run([*CLI, "demo", "--transactions", "100"], capture_output=True, text=True,
                       timeout=300, env={**os.environ, "JAVA_HOME": str(home)})
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stdout == "", r.stdout
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
    assert "Java 17" in r.stderr and "JAVA_HOME" in r.stderr, r.stderr


def test_demo_help_describes_every_option():
    r = run("demo", "--help")
    assert r.returncode == 0
    text = r.stdout.decode()
    for option in ("--bootstrap-server", "--transactions", "--accounts", "--partitions",
                   "--seed", "--brokers", "--replication-factor", "--keep"):
        # argparse's layout: the option, its metavar and aliases, then its description on
        # the same line or on the more indented lines below
        entry = re.search(rf"^  {option}( [A-Z_:]+)?(, -\w+( [A-Z_:]+)?)?"
                          rf"(?P<rest>.*\n(?: {{10,}}.*\n)*)", text, re.M)
        assert entry and len(entry.group("rest").split()) >= 3, (option, text)


@pytest.mark.parametrize("flags", [["-b", "127.0.0.1:1"], ["--bootstrap-server=127.0.0.1:1"]])
def test_a_global_bootstrap_flag_before_demo_is_its_cluster(flags):
    """`minilog -b HOST:PORT demo` runs the demo on that cluster (here: nobody listens, so it
    says so in one line), and `minilog -b ... demo --help` is the demo's help."""
    helped = run(*flags, "demo", "--help")
    assert helped.returncode == 0 and b"--transactions" in helped.stdout, helped.stderr
    r = run(*flags, "demo", "--transactions", "10", timeout=120)
    one_line_error(r, 1)
