"""`minilog cluster up --secure`: three brokers on SASL_SSL only, so replication, the Raft
quorum, registrations and forwarded requests all run over TLS with SCRAM logins between brokers
(`broker/server/inter_broker.py`); ACLs on and an admin user. The printed hints work as printed,
three replicas stay in sync, a client without the settings is refused, and status and down work from
the data directory; with a dedicated controller too (its CONTROLLER listener SASL_SSL)."""
import json
import os
import re
import stat
from contextlib import contextmanager
from pathlib import Path

import pytest
from clitools import kill_left, ok, process_identity, run
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from minilog.connector.secure_cluster import client_settings

pytestmark = pytest.mark.timeout(600)


@contextmanager
def _cluster_up(data, *args):
    """`minilog cluster up ... --secure` in `data`: (its output, cluster.json); down and
    every node killed afterwards, whatever happened."""
    up = run("cluster", "up", *args, "--secure", "--data-dir", data, timeout=300)
    state = json.loads((data / "cluster.json").read_text()) \
        if (data / "cluster.json").exists() else {}
    ours = [i for i in (process_identity(b["pid"]) for b in
                        state.get("brokers", []) + state.get("controllers", [])) if i]
    try:
        out = up.stdout.decode()
        assert up.returncode == 0 and "warning" not in out, out + up.stderr.decode()
        yield out, state
    finally:
        run("cluster", "down", "--data-dir", data, timeout=120)
        kill_left(ours)  # only what still runs of this cluster: its pids may be reused


def _assert_private(data, state):
    """No password in a node's command line or in cluster.json; the data directory and
    everything in it (logs, segments, credentials, settings) its owner's alone."""
    password = client_settings(data)["sasl.password"]
    for node in state["brokers"] + state.get("controllers", []):
        cmdline = Path(f"/proc/{node['pid']}/cmdline").read_bytes().decode()
        assert password not in cmdline and "password=" not in cmdline, cmdline
    assert password not in (data / "cluster.json").read_text()
    open_to_others = [f"{oct(stat.S_IMODE(os.stat(p).st_mode))} {p}"
                      for p in [data, *data.rglob("*")]
                      if stat.S_IMODE(os.stat(p).st_mode) & 0o077 and not p.is_symlink()]
    assert open_to_others == [], open_to_others[:10]
    assert stat.S_IMODE((data / "cluster.json").stat().st_mode) == 0o600
    assert stat.S_IMODE(data.stat().st_mode) == 0o700


def test_a_secure_cluster_serves_what_its_hints_say_and_nothing_plain(tmp_path):
    data = tmp_path / "c"
    with _cluster_up(data, "--brokers", 3) as (out, _):
        properties = re.search(r"minilog topics list --command-config (\S+)", out).group(1)
        assert "sasl.password=" in open(properties).read()
        settings = ["--command-config", properties]
        conf = client_settings(data)
        ok("topics", "create", "secured", "--partitions", 1, "--replication-factor", 3,
           *settings)
        ok("produce", "secured", *settings, input=b"one\ntwo\n", timeout=120)
        assert ok("consume", "secured", "--from-beginning", "-e", *settings).split() == \
            ["one", "two"]
        admin = AdminClient(conf)
        assert sorted(admin.list_topics("secured", timeout=30).topics["secured"]
                      .partitions[0].isrs) == [1, 2, 3]
        assert "under-replicated partitions: 0" in ok("cluster", "status", "--data-dir", data)
        bootstrap = re.search(r"bootstrap servers: (\S+)", out).group(1)
        with pytest.raises(KafkaException):  # PLAINTEXT bytes to a TLS port: no answer
            AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=5)
        _assert_private(data, json.loads((data / "cluster.json").read_text()))


def test_a_secure_cluster_with_a_dedicated_controller(tmp_path):
    """The controller listens on CONTROLLER, SASL_SSL too: brokers register, heartbeat and
    forward there logged in as `broker`, which is not a super user but holds the one ACL
    brokers need (CLUSTER_ACTION on the cluster), and a plain client gets nothing from it."""
    data = tmp_path / "c"
    with _cluster_up(data, "--brokers", 2, "--controllers", 1, "--no-console") as (out, state):
        settings = ["--command-config", str(data / "client.properties")]
        ok("topics", "create", "both", "--partitions", 1, "--replication-factor", 2, *settings)
        ok("produce", "both", *settings, input=b"one\ntwo\n", timeout=120)
        assert ok("consume", "both", "--from-beginning", "-e", *settings).split() == \
            ["one", "two"]
        assert "allowed CLUSTER_ACTION" in out
        acls = ok("acls", "list", *settings)
        assert "User:broker" in acls and "CLUSTER_ACTION" in acls, acls
        status = ok("cluster", "status", "--data-dir", data)
        assert "controller: 3" in status and "under-replicated partitions: 0" in status, status
        controller = state["controllers"][0]["port"]
        with pytest.raises(KafkaException):  # PLAINTEXT bytes to its TLS port: no answer
            AdminClient({"bootstrap.servers": f"127.0.0.1:{controller}"}).list_topics(timeout=5)
        _assert_private(data, state)
