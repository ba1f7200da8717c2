"""What a node of a cluster needs to log in to its peers: on the inter-broker listener for other
brokers, on the controller listener for the quorum, checked before it starts: each mistake is
one ConfigError naming the setting."""
import pytest

from minilog.broker.server.config import BrokerConfig, ConfigError
from minilog.broker.server.inter_broker import controller_security, inter_broker_security

VOTERS = {"controller.quorum.voters": "1@127.0.0.1:9093", "node.id": "1"}
SASL = {**VOTERS, "listeners": "SASL_PLAINTEXT://127.0.0.1:9093,PLAINTEXT://127.0.0.1:9094",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256"}
LOGIN = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
         'username="broker" password="broker-secret";')


def _security(**props):
    return inter_broker_security(BrokerConfig.from_props(props))


def test_a_plaintext_first_listener_needs_nothing():
    assert _security(**VOTERS) is None


def test_the_listener_jaas_entry_is_the_brokers_login():
    found = _security(**SASL, **{"sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256",
                                 "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config":
                                     LOGIN})
    assert (found.mechanism, found.username, found.password, found.tls) == \
        ("SCRAM-SHA-256", "broker", "broker-secret", None)


@pytest.mark.parametrize("props, named", [
    ({}, "sasl.mechanism.inter.broker.protocol"),
    ({"sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256"}, "sasl.jaas.config"),
    ({"inter.broker.listener.name": "INTERNAL"}, "inter.broker.listener.name"),
    ({"security.inter.broker.protocol": "SSL"}, "security.inter.broker.protocol"),
    ({"inter.broker.listener.name": "PLAINTEXT", "security.inter.broker.protocol": "PLAINTEXT"},
     "only one of"),
])
def test_each_missing_or_contradicting_setting_is_one_error(props, named):
    with pytest.raises(ConfigError, match=named):
        _security(**SASL, **props)


def test_the_inter_broker_listener_need_not_be_the_first():
    assert _security(**SASL, **{"inter.broker.listener.name": "PLAINTEXT"}) is None
    config = BrokerConfig.from_props({**SASL, "security.inter.broker.protocol": "PLAINTEXT"})
    assert config.inter_broker_listener.port == 9094


CONTROLLER_LOGIN = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
                    'username="broker" password="controller-secret";')
SPLIT = {"node.id": "1", "controller.quorum.voters": "1@127.0.0.1:9095",
         "listeners": "PLAINTEXT://127.0.0.1:9093,INTERNAL://127.0.0.1:9094,"
                      "CONTROLLER://127.0.0.1:9095",
         "listener.security.protocol.map":
             "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_SSL,CONTROLLER:SASL_SSL",
         "inter.broker.listener.name": "INTERNAL",
         "sasl.enabled.mechanisms": "SCRAM-SHA-256,PLAIN",
         "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256",
         "sasl.mechanism.controller.protocol": "PLAIN",
         "listener.name.internal.scram-sha-256.sasl.jaas.config": LOGIN,
         "listener.name.controller.plain.sasl.jaas.config": CONTROLLER_LOGIN}


def test_brokers_and_controllers_are_reached_each_on_their_own_listener():
    config = BrokerConfig.from_props(SPLIT)
    assert [lst.name for lst in config.listeners] == ["PLAINTEXT", "INTERNAL", "CONTROLLER"]
    assert [lst.name for lst in config.broker_listeners] == ["PLAINTEXT", "INTERNAL"]
    brokers, controllers = inter_broker_security(config), controller_security(config)
    assert (brokers.mechanism, brokers.password) == ("SCRAM-SHA-256", "broker-secret")
    assert (controllers.mechanism, controllers.password) == ("PLAIN", "controller-secret")


def test_a_broker_only_node_reaches_controllers_with_the_mapped_protocol():
    props = {**SPLIT, "node.id": "2", "process.roles": "broker",
             "listeners": "PLAINTEXT://127.0.0.1:9096,INTERNAL://127.0.0.1:9097"}
    found = controller_security(BrokerConfig.from_props(props))
    assert (found.mechanism, found.username) == ("PLAIN", "broker")


def test_a_controller_listener_cannot_carry_broker_traffic():
    with pytest.raises(ConfigError, match="controller listener"):
        inter_broker_security(BrokerConfig.from_props(
            {**SPLIT, "inter.broker.listener.name": "CONTROLLER"}))
