"""`minilog cluster up --secure`: three brokers on SASL_SSL only, so replication, the Raft
quorum, registrations and forwarded requests all run over TLS with SCRAM logins between brokers
(`broker/inter_broker.py`); ACLs on and an admin user. The printed hints work as printed, three
replicas stay in sync, a client without the settings is refused, and status and down work from
the data directory."""
import json
import os
import re
import signal

import pytest
from clitools import ok, run
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from minilog.broker.secure_cluster import client_settings

pytestmark = pytest.mark.timeout(600)


def test_a_secure_cluster_serves_what_its_hints_say_and_nothing_plain(tmp_path):
    data = tmp_path / "c"
    up = run("cluster", "up", "--brokers", 3, "--secure", "--data-dir", data, timeout=300)
    pids = [b["pid"] for b in json.loads((data / "cluster.json").read_text())["brokers"]] \
        if (data / "cluster.json").exists() else []
    try:
        out = up.stdout.decode()
        assert up.returncode == 0 and "warning" not in out, out + up.stderr.decode()
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
    finally:
        run("cluster", "down", "--data-dir", data, timeout=120)
        for pid in pids:
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_secure_with_dedicated_controllers_is_refused_in_one_line(tmp_path):
    r = run("cluster", "up", "--brokers", 1, "--controllers", 1, "--secure",
            "--data-dir", tmp_path / "c")
    err = r.stderr.decode()
    assert (r.returncode, err.count("\n")) == (2, 1) and "--controllers" in err, err
