"""Settings Kafka 3.9 deprecates but still accepts (removed in 4.0): taken, ignored, and
named in one warning line, as librdkafka's test 0092 needs (it sets the topic's
message.format.version through AlterConfigs), with confluent-kafka against a real broker."""
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic


@pytest.fixture(scope="module")
def old_broker(tmp_path_factory):
    from brokers import MinilogBroker
    b = MinilogBroker(tmp_path_factory.mktemp("deprecated"), extra=[
        "-o", "log.message.format.version=2.8", "-o",
        "log.message.timestamp.difference.max.ms=3600000"]).start()
    yield b
    b.cleanup()


def test_deprecated_broker_settings_start_the_broker_with_one_warning(old_broker):
    lines = [line for line in old_broker.log().splitlines() if "Deprecated Kafka settings" in line]
    assert len(lines) == 1
    assert "log.message.format.version" in lines[0]
    assert "log.message.timestamp.difference.max.ms" in lines[0]


def test_a_topics_message_format_version_is_accepted_and_ignored(old_broker):
    admin = AdminClient({"bootstrap.servers": old_broker.bootstrap})
    admin.create_topics([NewTopic("mixed-msgver", 1, 1, config={
        "message.format.version": "0.10.0"})])["mixed-msgver"].result(10)
    res = ConfigResource(ConfigResource.Type.TOPIC, "mixed-msgver",
                         set_config={"message.format.version": "0.9.0"})
    admin.alter_configs([res])[res].result(10)  # AlterConfigs, as librdkafka's 0092
    described = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC,
                                                       "mixed-msgver")])
    [configs] = [f.result(10) for f in described.values()]
    assert configs["message.format.version"].value == "0.9.0"
    p = Producer({"bootstrap.servers": old_broker.bootstrap, "linger.ms": 0})
    for i in range(5):
        p.produce("mixed-msgver", value=b"m%d" % i, key=b"k")
    assert p.flush(10) == 0
    c = Consumer({"bootstrap.servers": old_broker.bootstrap, "group.id": "msgver",
                  "enable.auto.commit": False})
    c.assign([TopicPartition("mixed-msgver", 0, 0)])
    got = []
    try:
        for _ in range(40):
            m = c.poll(0.5)
            if m is not None and not m.error():
                got.append(m.value())
            if len(got) == 5:
                break
    finally:
        c.close()
    assert got == [b"m%d" % i for i in range(5)]
    warned = [line for line in old_broker.log().splitlines()
              if "message.format.version=" in line and "mixed-msgver" in line]
    assert len(warned) == 2  # created with 0.10.0, altered to 0.9.0


def test_an_unknown_topic_config_is_still_refused(old_broker):
    admin = AdminClient({"bootstrap.servers": old_broker.bootstrap})
    with pytest.raises(Exception, match="message.format.versio"):
        admin.create_topics([NewTopic("typo-msgver", 1, 1, config={
            "message.format.versio": "0.10.0"})])["typo-msgver"].result(10)
