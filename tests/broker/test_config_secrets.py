"""No answer, table or log line shows a password-type setting: DescribeConfigs gives each a null
value and is_sensitive=true whoever asks (a super user included, as in Kafka), `minilog configs
describe` prints `null`, and the broker's log holds none of the secrets it was started with."""
import pytest
from brokers import free_port
from clitools import USAGE, ok, one_line_error, run
from confluent_kafka.admin import AdminClient as CKAdmin
from confluent_kafka.admin import ConfigResource
from kafka.admin import ConfigResource as KPConfigResource
from kafka.admin import ConfigResourceType, KafkaAdminClient
from security_tools import (
    PASSWORD,
    SecureBroker,
    kafka_python_settings,
    librdkafka_settings,
    make_certificates,
)

# Passwords nobody may read back, each set on the broker below.
SECRETS = {
    "ssl.key.password": "key-pass-3141",
    "ssl.keystore.password": "keystore-pass-2718",
    "ssl.truststore.password": "truststore-pass-1618",
    "listener.name.sasl_ssl.ssl.key.password": "listener-key-pass-1414",
}
ADMIN_PASSWORD = "admin-secret"  # security_tools' PLAIN admin, a super user here
SENSITIVE = {*SECRETS, "sasl.scram", "listener.name.sasl_plaintext.plain.sasl.jaas.config",
             "listener.name.sasl_ssl.plain.sasl.jaas.config"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    certs = make_certificates(tmp_path_factory.mktemp("certs"))
    extra = [a for k, v in SECRETS.items() for a in ("-o", f"{k}={v}")]
    extra += ["-o", "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
              "-o", "super.users=User:admin"]
    b = SecureBroker(certs, extra=extra).start()
    yield b
    b.cleanup()


def _secrets_in(text: str) -> list:
    return [s for s in (*SECRETS.values(), ADMIN_PASSWORD, PASSWORD) if s in text]


def test_confluent_kafka_super_user_gets_null_and_sensitive_for_every_password(broker):
    conf = librdkafka_settings(broker, "SASL_SSL", "PLAIN", user="admin", password=ADMIN_PASSWORD)
    admin = CKAdmin(conf)
    resource = ConfigResource(ConfigResource.Type.BROKER, "1")
    entries = admin.describe_configs([resource])[resource].result(60)
    for name in SENSITIVE:
        assert (entries[name].value, entries[name].is_sensitive) == (None, True), name
    assert not _secrets_in(repr({k: e.value for k, e in entries.items()}))
    assert entries["ssl.client.auth"].value == "none" and not entries["ssl.client.auth"].is_sensitive


def test_kafka_python_sees_the_same(broker):
    conf = kafka_python_settings(broker, "SASL_PLAINTEXT", "SCRAM-SHA-512")
    conf.update(sasl_plain_username="admin", sasl_plain_password=ADMIN_PASSWORD,
                sasl_mechanism="PLAIN")
    admin = KafkaAdminClient(**conf, request_timeout_ms=30000)
    try:
        found = admin.describe_configs([KPConfigResource(ConfigResourceType.BROKER, "1")],
                                       config_filter="all")
    finally:
        admin.close()
    assert not _secrets_in(repr(found))
    entries = next(iter(next(iter(found.values())).values()))
    for name in SENSITIVE:
        e = entries[name]
        assert (e["value"], e["is_sensitive"], e["config_type"]) == (None, True, "PASSWORD"), name


def test_configs_describe_prints_null_and_the_log_holds_no_secret(broker, tmp_path):
    conf = librdkafka_settings(broker, "SASL_PLAINTEXT", "PLAIN", user="admin",
                               password=ADMIN_PASSWORD)
    args = [a for k, v in conf.items() if k != "bootstrap.servers" for a in ("-X", f"{k}={v}")]
    out = ok("configs", "describe", "--entity-type", "brokers", "--entity-name", "1", "--all",
             "-b", conf["bootstrap.servers"], *args)
    assert "  ssl.keystore.password=null sensitive=true" in out.splitlines()
    assert "  sasl.scram=null sensitive=true" in out.splitlines()
    assert not _secrets_in(out)
    assert not _secrets_in(broker.log_path.read_text())


@pytest.mark.parametrize("key, value", [
    ("sasl.scram", "SCRAM-SHA-256=[name=alice,pasword=hunter2-secret]"),
    ("listener.name.sasl_plaintext.plain.sasl.jaas.config",
     'PlainLoginModule required user_alice="hunter2-secret')])
def test_a_malformed_secret_is_refused_without_echoing_it(tmp_path, key, value):
    r = run("broker", "start", "--data-dir", tmp_path, "-o",
            f"listeners=SASL_PLAINTEXT://127.0.0.1:{free_port()}",
            "-o", "sasl.enabled.mechanisms=PLAIN", "-o", f"{key}={value}")
    err = one_line_error(r, USAGE)
    assert "hunter2" not in err and key.split(".")[-2] in err, err
