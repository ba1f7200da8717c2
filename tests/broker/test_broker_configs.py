"""Dynamic broker configs with confluent-kafka, as `kafka-configs.sh --entity-type brokers`
changes them: per broker and cluster-wide default, Kafka's precedence and config sources,
read-only and unknown settings refused with Kafka's codes, kept across a restart."""
import pytest
from brokers import MinilogBroker
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)

from minilog.connector.client import AdminClient as MinilogAdmin
from minilog.connector.protocol import ErrorCode

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def node():
    b = MinilogBroker().start()
    try:
        yield b
    finally:
        b.cleanup()


def _admin(node):
    return AdminClient({"bootstrap.servers": node.bootstrap})


def _alter(admin, name, *changes):
    """IncrementalAlterConfigs of broker `name` ("" for the cluster default); changes are
    (key, value, op)."""
    resource = ConfigResource(ResourceType.BROKER, name, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=op) for k, v, op in changes])
    return admin.incremental_alter_configs([resource])[resource].result(30)


def _describe(admin, name):
    resource = ConfigResource(ResourceType.BROKER, name)
    return admin.describe_configs([resource])[resource].result(30)


def _error_code(admin, name, *changes):
    with pytest.raises(KafkaException) as raised:
        _alter(admin, name, *changes)
    return raised.value.args[0].code()


SET, DELETE, APPEND = AlterConfigOpType.SET, AlterConfigOpType.DELETE, AlterConfigOpType.APPEND


def test_a_broker_setting_and_the_cluster_default_take_effect_in_kafkas_order(node):
    admin = _admin(node)
    admin.create_topics([NewTopic("plain", 1, 1)])["plain"].result(30)
    # the cluster default's empty name: librdkafka refuses it, so minilog's own client
    with MinilogAdmin({"bootstrap.servers": node.bootstrap}) as own:
        own.alter_configs("broker", "", set={"log.retention.ms": 7200000,
                                             "background.threads": 9}, timeout=30)
        default = own.describe_configs("broker", "", timeout=30)["log.retention.ms"]
    assert (default.value, default.source) == \
        ("7200000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
    _alter(admin, "1", ("log.retention.ms", "3600000", SET),
           ("log.cleanup.policy", "compact", APPEND))
    own = _describe(admin, "1")
    assert (own["log.retention.ms"].value, own["log.retention.ms"].source) == \
        ("3600000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    assert not own["log.retention.ms"].is_read_only and own["log.dirs"].is_read_only
    assert own["log.cleanup.policy"].value == "delete,compact"
    assert own["background.threads"].source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
    topic = ConfigResource(ResourceType.TOPIC, "plain")
    assert admin.describe_configs([topic])[topic].result(30)["retention.ms"].value == "3600000"
    _alter(admin, "1", ("log.retention.ms", "", DELETE))  # back to the cluster default
    assert _describe(admin, "1")["log.retention.ms"].value == "7200000"


def test_read_only_unknown_and_bad_values_are_refused_with_kafkas_codes(node):
    admin = _admin(node)
    assert _error_code(admin, "1", ("log.dirs", "/elsewhere", SET)) == ErrorCode.INVALID_REQUEST
    assert _error_code(admin, "1", ("log.retention.mss", "1", SET)) == ErrorCode.INVALID_CONFIG
    assert _error_code(admin, "1", ("log.retention.ms", "soon", SET)) == ErrorCode.INVALID_CONFIG


def test_dynamic_settings_survive_a_restart(node):
    admin = _admin(node)
    _alter(admin, "1", ("message.max.bytes", "2000000", SET))
    node.restart()
    found = _describe(_admin(node), "1")["message.max.bytes"]
    assert (found.value, found.source) == ("2000000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
