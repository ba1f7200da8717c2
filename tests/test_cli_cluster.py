"""The command line against a three-broker cluster that loses a broker to kill -9, as a user
meets it: `cluster status` in the seconds before the controller fences the broker, and
`consume` afterwards. One cluster for the module, started and stopped with `minilog cluster`."""
import json
import os
import re
import signal
import urllib.request
import uuid

import pytest
from clitools import USAGE, kill_left, ok, one_line_error, process_identity, run
from waiting import wait_until

pytestmark = pytest.mark.timeout(600)
RECORDS = 300
# Fencing a broker whose connections closed takes two heartbeat intervals: 5 s here, so the
# seconds in which a process is gone but its broker not yet fenced are long enough to look at.
SLOW_FENCE = ["-o", "broker.heartbeat.interval.ms=5000", "-o", "broker.session.timeout.ms=30000"]


def _alive(pid):
    """Running, not a zombie waiting for whoever adopted it to reap it."""
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """(data dir, bootstrap, topic with RECORDS records on 3 partitions x 3 replicas)."""
    data = tmp_path_factory.mktemp("cluster") / "c"
    up = run("cluster", "up", "--brokers", 3, "--data-dir", data, *SLOW_FENCE, timeout=300)
    state = json.loads((data / "cluster.json").read_text()) \
        if (data / "cluster.json").exists() else {"brokers": []}
    pids = [b["pid"] for b in state["brokers"]] + \
        ([state["console"]["pid"]] if state.get("console") else [])
    ours = [i for i in map(process_identity, pids) if i is not None]
    try:
        assert up.returncode == 0 and b"warning" not in up.stdout, up.stdout + up.stderr
        bootstrap = re.search(r"bootstrap servers: (\S+)", up.stdout.decode()).group(1)
        topic = f"killed-{uuid.uuid4().hex[:8]}"
        ok("-b", bootstrap, "topics", "create", topic, "--partitions", 3,
           "--replication-factor", 3)
        ok("-b", bootstrap, "produce", topic,
           input="".join(f"record {i}\n" for i in range(RECORDS)).encode(), timeout=120)
        yield data, bootstrap, topic
    finally:
        run("cluster", "down", "--data-dir", data, timeout=120)
        left = kill_left(ours)
        assert not left, f"brokers or console left running: {left}"


def _get(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read().decode()


def test_up_serves_each_nodes_metrics_and_the_console_at_the_urls_it_printed(cluster):
    data, bootstrap, topic = cluster
    state = json.loads((data / "cluster.json").read_text())
    for b in state["brokers"]:
        assert "kafka_server_replicamanager_leadercount" in \
            _get(f"http://127.0.0.1:{b['metrics_port']}/metrics")
    console = f"http://127.0.0.1:{state['console']['port']}"
    page = wait_until(lambda: _try_get(f"{console}/topics"), 60, "the console to answer")
    assert topic in page
    assert f"console: {console}/" in ok("cluster", "status", "--data-dir", data, timeout=120)


def _try_get(url):
    try:
        return _get(url)
    except OSError:
        return None


def _kill_broker(data, node_id):
    pid = next(b["pid"] for b in json.loads((data / "cluster.json").read_text())["brokers"]
               if b["node_id"] == node_id)
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: not _alive(pid), what=f"broker {node_id} to die")


def _names_listed(status, kind):
    """How many partition names the `kind` line lists (the rest it only counts)."""
    line = re.search(rf"^{kind} partitions: .*$", status, re.M).group(0)
    listed = line.split(": ", 2)[2] if line.count(": ") >= 2 else ""
    return len(re.findall(r"\S+-\d+(?=\s|$)", listed.split(" and ")[0]))


def _consistent(status):
    """Fails where the status contradicts itself about broker 1, whose process is gone."""
    assert re.search(r"^broker 1\t.*\tstopped", status, re.M), status
    live = re.search(r"^live brokers: (.*)$", status, re.M).group(1)
    claimed = "1" in live.split(" ")[0].split(",")
    assert not claimed, f"broker 1 stopped yet listed live without a word: {status}"
    if "(and 1: process gone, not fenced yet)" in live:
        under = int(re.search(r"^under-replicated partitions: (\d+)", status, re.M).group(1))
        assert _names_listed(status, "under-replicated") <= 5, status
        offline = int(re.search(r"^offline partitions: (\d+)", status, re.M).group(1))
        assert under + offline >= 3, f"broker 1's replicas count for nothing: {status}"
        return False
    return True  # fenced: the controller's view caught up with the processes


def test_status_right_after_kill_9_never_contradicts_itself(cluster):
    data, bootstrap, topic = cluster
    _kill_broker(data, 1)
    seen_unfenced = []

    def fenced():
        r = run("cluster", "status", "--data-dir", data, timeout=120)
        status = r.stdout.decode()
        assert r.returncode == 1, f"a broker is down, yet exit {r.returncode}: {status}"
        done = _consistent(status)
        if not done:
            seen_unfenced.append(status)
        return done
    wait_until(fenced, timeout=120, what="broker 1 to be fenced", interval=0)
    assert seen_unfenced, "no status in the seconds before the fence: nothing was checked"
    assert "not fenced yet" in seen_unfenced[0] and "process gone" in seen_unfenced[0]


def test_consume_after_a_broker_was_killed_prints_only_the_records(cluster):
    """Three runs, as the issue saw the unobserved task failure in every run after a kill."""
    data, bootstrap, topic = cluster
    for _ in range(3):
        r = run("-b", bootstrap, "consume", topic, "--from-beginning", "--exit", timeout=120)
        assert (r.returncode, r.stderr.decode()) == (0, ""), r.stderr.decode()[-3000:]
        assert sorted(r.stdout.decode().splitlines()) == sorted(
            f"record {i}" for i in range(RECORDS))


@pytest.mark.parametrize("flags", [["-b", "127.0.0.1:9092"], ["-X", "acks=all"]])
def test_global_flags_before_cluster_or_broker_are_refused_in_one_line(flags, tmp_path):
    for command in (["cluster", "status", "--data-dir", tmp_path], ["broker", "start"]):
        err = one_line_error(run(*flags, *command), USAGE)
        assert "does not apply" in err, err
