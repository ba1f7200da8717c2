"""`minilog cluster up` never starts a cluster's brokers twice: it holds the cluster directory's
lock while it works, and a node whose data directory a running broker holds is running,
whatever cluster.json says."""
import json
import os

import pytest
from clitools import USAGE, kill_left, one_line_error, process_identity, run

from minilog.broker.storage.dir_lock import DirectoryLock

pytestmark = pytest.mark.timeout(300)


def test_up_while_another_up_holds_the_directory_is_one_line_and_starts_nothing(tmp_path):
    data = tmp_path / "c"
    held = DirectoryLock(data)  # what a concurrent `minilog cluster up` holds while it works
    try:
        r = run("cluster", "up", "--brokers", 1, "--no-console", "--data-dir", data)
    finally:
        held.release()
        if (data / "cluster.json").exists():  # it started a cluster: stop it before failing
            run("cluster", "down", "--data-dir", data, timeout=120)
    err = one_line_error(r, USAGE)
    assert err == (f"minilog cluster: {data.resolve()} is in use by another `minilog cluster "
                   f"up` (pid {os.getpid()})\n")
    assert not (data / "cluster.json").exists() and not (data / "broker-1").exists()


def test_up_on_a_directory_whose_broker_runs_says_so_without_cluster_json(tmp_path):
    data = tmp_path / "c"
    up = run("cluster", "up", "--brokers", 1, "--no-console", "--data-dir", data, timeout=240)
    state_file = data / "cluster.json"
    state = json.loads(state_file.read_text()) if state_file.exists() else {"brokers": []}
    ours = [i for i in (process_identity(b["pid"]) for b in state["brokers"]) if i]
    try:
        assert up.returncode == 0, up.stderr.decode()
        pid = state["brokers"][0]["pid"]
        state_file.rename(data / "cluster.json.aside")  # lost: only the broker's lock tells
        again = run("cluster", "up", "--brokers", 1, "--no-console", "--data-dir", data,
                    timeout=240)
        err = one_line_error(again, USAGE)
        assert err == (f"minilog cluster: the cluster in {data} is already running: node 1 "
                       f"(pid {pid}); its cluster.json is missing, stop those processes first\n")
        assert process_identity(pid) == ours[0]
    finally:
        if (data / "cluster.json.aside").exists():
            (data / "cluster.json.aside").rename(state_file)
        run("cluster", "down", "--data-dir", data, timeout=120)
        left = kill_left(ours)
    assert not left, f"brokers left running: {left}"
