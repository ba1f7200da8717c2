"""What a broker of a cluster needs to log in to its peers on a secured first listener, checked
before it starts: each mistake is one ConfigError naming the setting."""
import pytest

from minilog.broker.config import BrokerConfig, ConfigError
from minilog.broker.inter_broker import inter_broker_security

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
    ({"inter.broker.listener.name": "PLAINTEXT"}, "inter.broker.listener.name"),
    ({"security.inter.broker.protocol": "PLAINTEXT"}, "security.inter.broker.protocol"),
])
def test_each_missing_or_contradicting_setting_is_one_error(props, named):
    with pytest.raises(ConfigError, match=named):
        _security(**SASL, **props)
