"""Admin APIs through confluent-kafka's and kafka-python's admin clients against a real broker."""
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
)


@pytest.fixture(scope="module")
def admin(broker):
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def _produce(bootstrap, topic, values, partition=0, timestamps=None):
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i, v in enumerate(values):
        p.produce(topic, value=v, partition=partition,
                  timestamp=timestamps[i] if timestamps else 0)
    assert p.flush(10) == 0


def test_describe_and_incrementally_alter_topic_configs(admin):
    admin.create_topics([NewTopic("cfg", 1, 1, config={"retention.ms": "60000"})])["cfg"].result(10)
    res = ConfigResource(ConfigResource.Type.TOPIC, "cfg")
    configs = admin.describe_configs([res])[res].result(10)
    assert configs["retention.ms"].value == "60000"
    assert not configs["retention.ms"].is_default
    assert configs["segment.bytes"].is_default
    alter = ConfigResource(ConfigResource.Type.TOPIC, "cfg", incremental_configs=[
        ConfigEntry("retention.ms", "120000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND)])
    admin.incremental_alter_configs([alter])[alter].result(10)
    configs = admin.describe_configs([res])[res].result(10)
    assert configs["retention.ms"].value == "120000"
    assert configs["cleanup.policy"].value == "delete,compact"
    bad = ConfigResource(ConfigResource.Type.TOPIC, "cfg", incremental_configs=[
        ConfigEntry("retention.ms", "later", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(Exception, match="retention.ms"):
        admin.incremental_alter_configs([bad])[bad].result(10)


def test_broker_configs_are_described(admin, broker):
    res = ConfigResource(ConfigResource.Type.BROKER, "1")
    configs = admin.describe_configs([res])[res].result(10)
    assert configs["num.partitions"].value == "1"
    assert configs["message.max.bytes"].value == "1048588"


def test_describe_cluster_names_this_broker(admin, broker):
    desc = admin.describe_cluster().result(10)
    assert [n.port for n in desc.nodes] == [broker.port]
    assert desc.controller.id == 1 and desc.cluster_id


def test_create_partitions_then_delete_topic(admin, broker):
    admin.create_topics([NewTopic("grow", 2, 1)])["grow"].result(10)
    admin.create_partitions([NewPartitions("grow", 5)])["grow"].result(10)
    md = admin.list_topics("grow", timeout=10)
    assert len(md.topics["grow"].partitions) == 5
    _produce(broker.bootstrap, "grow", [b"x"], partition=4)
    admin.delete_topics(["grow"])["grow"].result(10)
    deadline = time.monotonic() + 5
    while "grow" in admin.list_topics(timeout=10).topics and time.monotonic() < deadline:
        time.sleep(0.1)
    assert "grow" not in admin.list_topics(timeout=10).topics
    assert not list(broker.log_dir.glob("grow-*"))


def test_delete_records_moves_log_start_and_consumers_follow(admin, broker):
    admin.create_topics([NewTopic("trim", 1, 1)])["trim"].result(10)
    _produce(broker.bootstrap, "trim", [b"v%d" % i for i in range(10)])
    result = admin.delete_records([TopicPartition("trim", 0, 6)])
    assert result[TopicPartition("trim", 0, 6)].result(10).low_watermark == 6
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "x", "enable.auto.commit": False})
    assert c.get_watermark_offsets(TopicPartition("trim", 0), 10) == (6, 10)
    c.close()


def test_list_offsets_earliest_latest_and_max_timestamp(admin, broker):
    admin.create_topics([NewTopic("times", 1, 1)])["times"].result(10)
    stamps = [5000, 9000, 7000, 8000]
    _produce(broker.bootstrap, "times", [b"a", b"b", b"c", b"d"], timestamps=stamps)
    tp = TopicPartition("times", 0)
    got = {name: admin.list_offsets({tp: spec})[tp].result(10) for name, spec in [
        ("earliest", OffsetSpec.earliest()), ("latest", OffsetSpec.latest()),
        ("max", OffsetSpec.max_timestamp()), ("t", OffsetSpec.for_timestamp(7500))]}
    assert got["earliest"].offset == 0 and got["latest"].offset == 4
    assert (got["max"].offset, got["max"].timestamp) == (1, 9000)
    assert (got["t"].offset, got["t"].timestamp) == (1, 9000)


def test_log_append_time_topic_stamps_broker_time(admin, broker):
    admin.create_topics([NewTopic("stamped", 1, 1, config={"message.timestamp.type": "LogAppendTime"})]
                        )["stamped"].result(10)
    before = int(time.time() * 1000)
    _produce(broker.bootstrap, "stamped", [b"a", b"b"], timestamps=[1, 2])
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "x", "enable.auto.commit": False})
    c.assign([TopicPartition("stamped", 0, 0)])
    msgs = []
    deadline = time.monotonic() + 10
    while len(msgs) < 2 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            msgs.append(m)
    c.close()
    assert len(msgs) == 2
    for m in msgs:
        ts_type, ts = m.timestamp()
        assert ts_type == 2  # TIMESTAMP_LOG_APPEND_TIME
        assert before - 1000 <= ts <= int(time.time() * 1000) + 1000


def test_kafka_python_admin_client(broker):
    from kafka.admin import ConfigResource as KConfigResource
    from kafka.admin import ConfigResourceType, KafkaAdminClient
    from kafka.admin import NewPartitions as KNewPartitions
    from kafka.admin import NewTopic as KNewTopic
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        created = admin.create_topics([KNewTopic("kp-admin", 2, 1,
                                                 topic_configs={"retention.ms": "3600000"})])
        assert [(t["name"], t["error_code"], t["num_partitions"]) for t in created["topics"]] == \
            [("kp-admin", 0, 2)]
        assert "kp-admin" in admin.list_topics()
        described = admin.describe_topics(["kp-admin"])
        assert len(described[0]["partitions"]) == 2
        grown = admin.create_partitions({"kp-admin": KNewPartitions(3)})
        assert [(r.name, r.error_code) for r in grown.results] == [("kp-admin", 0)]
        assert len(admin.describe_topics(["kp-admin"])[0]["partitions"]) == 3
        cfg = admin.describe_configs([KConfigResource(ConfigResourceType.TOPIC, "kp-admin")])
        assert cfg["topic"]["kp-admin"]["retention.ms"]["value"] == "3600000"
        admin.delete_topics(["kp-admin"])
        assert "kp-admin" not in admin.list_topics()
    finally:
        admin.close()


def test_describe_log_dirs_gives_each_partition_size(admin, broker):
    """kafka-python's describe_log_dirs (all topics, as kafka-log-dirs.sh asks) and minilog's
    admin client (named partitions) see the bytes the segments hold: empty is 0, and two
    batches of 1000-byte values are at least 2000 bytes."""
    from kafka.admin import KafkaAdminClient

    from minilog.connector.client import AdminClient as MinilogAdmin
    admin.create_topics([NewTopic("sized", 2, 1)])["sized"].result(10)
    _produce(broker.bootstrap, "sized", [b"x" * 1000, b"y" * 1000])
    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        answer = kp.describe_log_dirs()
    finally:
        kp.close()
    [(log_dir,)] = [b["log_dirs"] for b in answer]
    theirs = {p["partition_index"]: p["partition_size"] for t in log_dir["topics"]
              if t["name"] == "sized" for p in t["partitions"]}
    ours = MinilogAdmin({"bootstrap.servers": broker.bootstrap})
    try:
        sizes = ours.partition_sizes([("sized", 0), ("sized", 1)])
    finally:
        ours.close()
    assert log_dir["error_code"] == 0
    assert 2000 < sizes[("sized", 0)] < 2400 and sizes[("sized", 1)] == 0
    assert theirs == {0: sizes[("sized", 0)], 1: 0}
