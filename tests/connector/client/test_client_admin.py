"""The admin client against real brokers. Tansu lacks some admin APIs: those tests say so."""
import pytest
from clienttools import make_topic, unique
from minilog.connector.client import (
    AdminClient,
    KafkaError,
    NewTopic,
    Producer,
    TopicPartition,
)

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def admin(cluster):
    with AdminClient({"bootstrap.servers": cluster.bootstrap}) as a:
        yield a


def test_create_list_describe_delete_topics(cluster, admin):
    name = unique()
    admin.create_topics([NewTopic(name, 3, 1)])
    assert name in admin.list_topics()
    desc = admin.describe_topics([name])[name]
    assert [p.partition for p in desc.partitions] == [0, 1, 2]
    assert all(p.leader >= 0 and p.replicas and p.isr for p in desc.partitions)
    assert name in admin.describe_topics()
    admin.delete_topics([name])
    assert name not in admin.list_topics()


def test_errors_carry_the_broker_error_name(cluster, admin):
    name = make_topic(cluster.bootstrap)
    with pytest.raises(KafkaError) as exists:
        admin.create_topic(name)
    assert exists.value.name == "TOPIC_ALREADY_EXISTS" and name in str(exists.value)
    with pytest.raises(KafkaError) as unknown:
        admin.describe_topics([unique("missing")])
    assert unknown.value.name == "UNKNOWN_TOPIC_OR_PARTITION"
    with pytest.raises(KafkaError) as gone:
        admin.delete_topics([unique("missing")])
    assert gone.value.name == "UNKNOWN_TOPIC_OR_PARTITION"


def test_list_offsets_earliest_latest_and_by_time(cluster, admin):
    name = make_topic(cluster.bootstrap)
    tp = TopicPartition(name, 0)
    with Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 0}) as p:
        for i in range(5):
            p.send(name, b"x", timestamp=1000 * (i + 1)).result(10)
    assert admin.list_offsets({tp: "earliest"})[tp].offset == 0
    assert admin.list_offsets({tp: "latest"})[tp].offset == 5  # one record per batch here
    if cluster.kind == "tansu":
        pytest.skip("Tansu does not look offsets up by timestamp")
    assert admin.list_offsets({tp: 2500})[tp].offset == 2
    assert admin.list_offsets({tp: "max-timestamp"})[tp].timestamp == 5000


def test_describe_cluster(cluster, admin):
    desc = admin.describe_cluster()
    assert desc.brokers and desc.brokers[0].port == int(cluster.bootstrap.split(":")[1])
    assert desc.controller_id in {b.node_id for b in desc.brokers}


def test_create_partitions(cluster, admin):
    if cluster.kind == "tansu":
        pytest.skip("Tansu does not implement CreatePartitions")
    name = make_topic(cluster.bootstrap, 2)
    admin.create_partitions(name, 4)
    assert len(admin.describe_topics([name])[name].partitions) == 4
    with pytest.raises(KafkaError) as shrink:
        admin.create_partitions(name, 1)
    assert shrink.value.name == "INVALID_PARTITIONS"


def test_topic_and_broker_configs(cluster, admin):
    if cluster.kind == "tansu":
        pytest.skip("Tansu answers DescribeConfigs with no entries")
    name = make_topic(cluster.bootstrap, 1, {"retention.ms": "3600000"})
    configs = admin.describe_configs("topic", name)
    assert configs["retention.ms"].value == "3600000" and not configs["retention.ms"].is_default
    admin.alter_configs("topic", name, set={"retention.bytes": "1048576"},
                        delete=["retention.ms"])
    configs = admin.describe_configs("topic", name)
    assert configs["retention.bytes"].value == "1048576"
    assert configs["retention.ms"].is_default
    broker_id = admin.describe_cluster().brokers[0].node_id
    broker = admin.describe_configs("broker", broker_id)
    assert broker["node.id"].value == str(broker_id)
    assert broker["message.max.bytes"].value == "1048588"  # Kafka's default, not overridden here
    with pytest.raises(KafkaError) as unknown:
        admin.alter_configs("topic", name, set={"no.such.setting": "1"})
    assert unknown.value.name == "INVALID_CONFIG" and "no.such.setting" in str(unknown.value)
    assert "no.such.setting" not in admin.describe_configs("topic", name)


def test_delete_records(cluster, admin):
    if cluster.kind == "tansu":
        pytest.skip("Tansu closes the connection on DeleteRecords")
    name = make_topic(cluster.bootstrap)
    tp = TopicPartition(name, 0)
    with Producer({"bootstrap.servers": cluster.bootstrap}) as p:
        for _ in range(10):
            p.send(name, b"x")
        p.flush(30)
    assert admin.delete_records({tp: 4}) == {tp: 4}
    assert admin.list_offsets({tp: "earliest"})[tp].offset == 4
