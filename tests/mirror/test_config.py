"""MirrorMaker 2's properties file as MM2 reads it: flows, per-flow overrides of top-level
settings, MM2's defaults, per-cluster client settings; unknown keys refused by name."""
import logging
import subprocess
import sys

import pytest
from minilog.mirror.config import MirrorConfigError, mirror_config, targeting
from minilog.mirror.policy import ReplicationPolicy

BASE = {"clusters": "A, B", "A.bootstrap.servers": "127.0.0.1:9092",
        "B.bootstrap.servers": "127.0.0.1:9093", "A->B.enabled": "true"}


def test_a_flow_takes_mm2s_defaults():
    (flow,) = mirror_config(BASE).flows
    assert (flow.source, flow.target, flow.name) == ("A", "B", "A->B")
    assert flow.source_client == {"bootstrap.servers": "127.0.0.1:9092"}
    assert flow.replication_factor == 2 and flow.policy == ReplicationPolicy("default", ".")
    assert flow.emit_checkpoints_interval == 60 and flow.refresh_topics_interval == 600
    assert flow.sync_topic_configs and not flow.sync_group_offsets
    assert flow.wants_group("billing") and not flow.wants_group("console-consumer-1")


def test_flow_settings_override_top_level_ones():
    (flow,) = mirror_config({**BASE, "topics": "orders, pay.*", "A->B.topics": "audit",
                             "replication.factor": "1", "sync.group.offsets.enabled": "true",
                             "A->B.emit.checkpoints.interval.seconds": "5",
                             "groups.exclude": "test-.*"}).flows
    assert flow.topics == "(?:audit)"
    assert flow.replication_factor == 1 and flow.sync_group_offsets
    assert flow.emit_checkpoints_interval == 5
    assert not flow.wants_group("test-1") and flow.wants_group("console-consumer-1")


def test_only_enabled_flows_run_and_each_direction_is_its_own():
    config = mirror_config({**BASE, "B->A.enabled": "true", "B->A.topics": "x"})
    assert [(f.name, f.topics) for f in config.flows] == [("A->B", "(?:.*)"), ("B->A", "(?:x)")]


def test_cluster_client_settings_go_to_that_clusters_clients_and_shared_ones_to_all():
    (flow,) = mirror_config({**BASE, "A.security.protocol": "SASL_PLAINTEXT",
                             "A.sasl.mechanism": "PLAIN", "A.sasl.username": "u",
                             "A.sasl.password": "p", "A.consumer.fetch.max.bytes": "1000",
                             "client.id": "mm2"}).flows
    assert flow.source_client == {"bootstrap.servers": "127.0.0.1:9092", "client.id": "mm2",
                                  "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                                  "sasl.username": "u", "sasl.password": "p",
                                  "fetch.max.bytes": "1000"}
    assert flow.target_client == {"bootstrap.servers": "127.0.0.1:9093", "client.id": "mm2"}


def test_identity_policy_keeps_names_but_heartbeats():
    (flow,) = mirror_config({**BASE, "replication.policy.class":
                             "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"}).flows
    assert flow.policy.remote_topic("A", "orders") == "orders"
    assert flow.policy.remote_topic("A", "heartbeats") == "A.heartbeats"


def test_offset_syncs_go_where_their_location_says_named_after_the_other_cluster():
    """KIP-716: MirrorSourceConfig.offsetSyncsTopic names the topic after the cluster it is
    not on."""
    (flow,) = mirror_config(BASE).flows
    assert (flow.offset_syncs_location, flow.offset_syncs_topic) == (
        "source", "mm2-offset-syncs.B.internal")
    (flow,) = mirror_config({**BASE, "A->B.offset-syncs.topic.location": "target"}).flows
    assert (flow.offset_syncs_location, flow.offset_syncs_topic) == (
        "target", "mm2-offset-syncs.A.internal")


def test_clusters_keeps_the_flows_into_them_as_mirrormakers_option_does():
    config = mirror_config({**BASE, "B->A.enabled": "true"})
    assert [f.name for f in targeting(config, ["A"]).flows] == ["B->A"]
    assert [f.name for f in targeting(config, None).flows] == ["A->B", "B->A"]
    with pytest.raises(MirrorConfigError, match=r"--clusters: 'C' is not one of clusters"):
        targeting(config, ["C"])
    with pytest.raises(MirrorConfigError, match=r"no enabled flow targets A"):
        targeting(mirror_config(BASE), ["A"])


@pytest.mark.parametrize("props, message", [
    ({**BASE, "offset-syncs.topic.location": "B"},
     r"offset-syncs.topic.location must be source or target, got 'B'"),
    ({**BASE, "A->B.topic": "x"}, r"unknown key: A->B.topic \(did you mean A->B.topics\?\)"),
    ({**BASE, "A.bootstrap.server": "h:1"},
     r"unknown key: A.bootstrap.server \(did you mean A.bootstrap.servers\?\)"),
    ({**BASE, "refresh.topic.interval.seconds": "5", "bogus": "1"}, r"unknown keys: .*refresh"
     r".topic.interval.seconds \(did you mean refresh.topics.interval.seconds\?\), bogus"),
    ({**BASE, "A->C.enabled": "true"}, r"'C' is not one of clusters \(A, B\)"),
    ({**BASE, "A->B.enabled": "yes"}, r"A->B.enabled must be true or false"),
    ({**BASE, "topics": "orders, ("}, r"topics: '\(' is not a valid regex"),
    ({**BASE, "replication.factor": "0"}, r"replication.factor must be -1"),
    ({**BASE, "replication.policy.class": "com.example.Mine"}, r"not a policy minilog implements"),
    ({k: v for k, v in BASE.items() if k != "B.bootstrap.servers"},
     r"B.bootstrap.servers is required"),
    ({k: v for k, v in BASE.items() if k != "A->B.enabled"}, r"no flow is enabled"),
    ({"A.bootstrap.servers": "h:1"}, r"clusters is required"),
    ({**BASE, "A.acks": "most"}, r"cluster A: acks must be 0, 1 or all"),
])
def test_bad_files_are_one_clear_error(props, message):
    with pytest.raises(MirrorConfigError, match=message):
        mirror_config(props)


def test_settings_without_effect_are_named_in_one_warning(caplog):
    with caplog.at_level(logging.WARNING, "minilog.mirror"):
        mirror_config({**BASE, "tasks.max": "4", "A->B.sync.topic.acls.enabled": "false",
                       "B.config.storage.replication.factor": "1"})
    (line,) = [r.getMessage() for r in caplog.records]
    assert line == ("settings with no effect in minilog mirror: A->B.sync.topic.acls.enabled, "
                    "B.config.storage.replication.factor, tasks.max")


def test_the_command_line_says_what_is_wrong_in_one_line(tmp_path):
    path = tmp_path / "mm2.properties"
    path.write_text("clusters = A, B\nA.bootstrap.servers = 127.0.0.1:1\n"
                    "B.bootstrap.servers = 127.0.0.1:2\nA->B.enabled = true\nA->B.topicz = x\n")
    done = subprocess.run([sys.executable, "-m", "minilog.connector.cli", "mirror", str(path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr == ("minilog mirror: unknown key: A->B.topicz (did you mean "
                           "A->B.topics?)\n")
    missing = subprocess.run([sys.executable, "-m", "minilog.connector.cli", "mirror",
                              str(tmp_path / "none.properties")], capture_output=True, text=True,
                             timeout=120)
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1
    assert "cannot read" in missing.stderr
    path.write_text("clusters = A, B\nA.bootstrap.servers = 127.0.0.1:1\n"
                    "B.bootstrap.servers = 127.0.0.1:2\nA->B.enabled = true\n")
    elsewhere = subprocess.run([sys.executable, "-m", "minilog.connector.cli", "mirror",
                                str(path), "--clusters", "C"], capture_output=True, text=True,
                               timeout=120)
    assert (elsewhere.returncode, elsewhere.stderr) == (
        2, "minilog mirror: --clusters: 'C' is not one of clusters (A, B)\n")
    before = subprocess.run([sys.executable, "-m", "minilog.connector.cli", "mirror",
                             "--clusters", "B", "C", str(path)], capture_output=True, text=True,
                            timeout=120)  # the option first: the file is still the file
    assert (before.returncode, before.stderr) == (
        2, "minilog mirror: --clusters: 'C' is not one of clusters (A, B)\n")
