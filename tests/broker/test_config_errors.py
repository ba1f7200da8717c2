"""A bad topic config is answered in Kafka's words (INVALID_CONFIG with LogConfig's and
ConfigDef's messages), which clients and their test suites show or match as they are: through
CreateTopics, AlterConfigs and IncrementalAlterConfigs, seen by confluent-kafka and
kafka-python; nothing is created or changed."""
import uuid

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

INVALID_CONFIG = 40

# (config, Kafka's error message): LogConfig.validateNames, ConfigDef.parseType, its Range,
# ValidString and ValidList validators (texts of apache/kafka's ConfigDef and LogConfig).
BAD = [
    ({"bad_option": "1"}, "Unknown topic config name: bad_option"),
    ({"retention.ms": "abc"},
     "Invalid value abc for configuration retention.ms: Not a number of type LONG"),
    ({"segment.bytes": "3000000000"},
     "Invalid value 3000000000 for configuration segment.bytes: Not a number of type INT"),
    ({"retention.ms": "-2"}, "Invalid value -2 for configuration retention.ms: Value must be at "
                             "least -1"),
    ({"message.timestamp.type": "Now"},
     "Invalid value Now for configuration message.timestamp.type: String must be one of: "
     "CreateTime, LogAppendTime"),
    ({"cleanup.policy": "compact,forever"},
     "Invalid value forever for configuration cleanup.policy: String must be one of: compact, "
     "delete"),
]


@pytest.fixture(scope="module")
def admin(broker):
    return AdminClient({"bootstrap.servers": broker.bootstrap})


@pytest.fixture(scope="module")
def topic(admin):
    name = f"cfg-errors-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(name, 1, 1, config={"retention.ms": "60000"})])[name].result(30)
    return name


def _error(future):
    with pytest.raises(KafkaException) as failure:
        future.result(30)
    error = failure.value.args[0]
    return error.code(), error.str()


@pytest.mark.parametrize("config, message", BAD)
def test_create_topics_answers_kafkas_text(admin, config, message):
    name = f"refused-{uuid.uuid4().hex[:8]}"
    assert _error(admin.create_topics([NewTopic(name, 1, 1, config=config)])[name]) == (
        INVALID_CONFIG, message)
    assert name not in admin.list_topics(timeout=30).topics


@pytest.mark.parametrize("config, message", BAD)
def test_incremental_alter_configs_answers_kafkas_text(admin, topic, config, message):
    res = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
        for k, v in config.items()])
    assert _error(admin.incremental_alter_configs([res])[res]) == (INVALID_CONFIG, message)
    described = ConfigResource(ConfigResource.Type.TOPIC, topic)
    assert admin.describe_configs([described])[described].result(30)["retention.ms"].value == \
        "60000"


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")
@pytest.mark.parametrize("config, message", BAD)
def test_legacy_alter_configs_answers_kafkas_text(admin, topic, config, message):
    res = ConfigResource(ConfigResource.Type.TOPIC, topic, set_config=config)
    assert _error(admin.alter_configs([res])[res]) == (INVALID_CONFIG, message)


def test_kafka_python_sees_kafkas_text(broker, topic):
    from kafka.admin import ConfigResource as KConfigResource
    from kafka.admin import ConfigResourceType, KafkaAdminClient, NewTopic as KNewTopic
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        created = admin.create_topics([KNewTopic("kp-refused", 1, 1,
                                                 topic_configs={"bad_option": "1"})],
                                      raise_errors=False)
        assert [(t["error_code"], t["error_message"]) for t in created["topics"]] == [
            (INVALID_CONFIG, "Unknown topic config name: bad_option")]
        altered = admin.alter_configs([KConfigResource(ConfigResourceType.TOPIC, topic,
                                                       configs={"retention.ms": "abc"})],
                                      raise_on_unknown=False)
        assert altered == {"topic": {topic: "[Error 40] InvalidConfigurationError: Invalid "
                                            "value abc for configuration retention.ms: Not a "
                                            "number of type LONG"}}
    finally:
        admin.close()
