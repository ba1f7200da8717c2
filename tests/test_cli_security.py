"""The command line on a secured broker: settings from --command-config and -X, and SCRAM
users managed with `minilog users`, then used by clients we did not write."""
import pytest
from clitools import FAILED, USAGE, ok, one_line_error, run
from confluent_kafka import Producer as CKProducer
from security_tools import librdkafka_settings


@pytest.fixture(scope="module")
def admin_config(secure_broker, tmp_path_factory):
    """A client properties file as Kafka's tools take it: SASL_SSL with SCRAM."""
    conf = librdkafka_settings(secure_broker, "SASL_SSL", "SCRAM-SHA-512")
    path = tmp_path_factory.mktemp("client") / "client.properties"
    lines = [f"{k}={v}" for k, v in conf.items() if not k.startswith("sasl.")]
    lines += ["sasl.mechanism=SCRAM-SHA-512",
              "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule \\",
              f'    required username="{conf["sasl.username"]}" '
              f'password="{conf["sasl.password"]}";']
    path.write_text("\n".join(lines) + "\n")
    return path


def test_produce_and_consume_with_a_command_config_file(admin_config):
    ok("produce", "cli-secure", "--command-config", admin_config, input=b"one\ntwo\n")
    out = ok("consume", "cli-secure", "--command-config", admin_config, "--from-beginning",
             "-e")
    assert out.splitlines() == ["one", "two"]


def test_settings_given_with_x_on_the_command_line(secure_broker):
    conf = librdkafka_settings(secure_broker, "SASL_PLAINTEXT", "PLAIN")
    args = [a for k, v in conf.items() if k != "bootstrap.servers" for a in ("-X", f"{k}={v}")]
    ok("topics", "create", "cli-x", "-b", conf["bootstrap.servers"], *args)
    assert "cli-x" in ok("topics", "list", "-b", conf["bootstrap.servers"], *args).split()


def test_users_add_list_remove_and_the_new_user_logs_in(secure_broker, admin_config):
    ok("users", "add", "bob", "--password", "bob-secret", "--command-config", admin_config)
    listed = ok("users", "list", "--command-config", admin_config)
    assert "bob\tSCRAM-SHA-256 (iterations=4096), SCRAM-SHA-512 (iterations=4096)" in listed
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        conf = librdkafka_settings(secure_broker, "SASL_SSL", mechanism, user="bob",
                                   password="bob-secret")
        producer = CKProducer(conf)
        producer.produce("by-bob", b"hi")
        assert producer.flush(60) == 0
    ok("users", "remove", "bob", "--command-config", admin_config)
    assert "bob" not in ok("users", "list", "--command-config", admin_config)
    conf = librdkafka_settings(secure_broker, "SASL_SSL", "SCRAM-SHA-256", user="bob",
                               password="bob-secret")
    r = run("topics", "list", *[a for k, v in conf.items() for a in ("-X", f"{k}={v}")])
    assert "SASL_AUTHENTICATION_FAILED" in one_line_error(r, FAILED)


def test_a_wrong_password_is_one_line(secure_broker, admin_config):
    r = run("topics", "list", "--command-config", admin_config, "-X", "sasl.password=nope")
    # sasl.jaas.config names the password, as it does in Kafka's clients, and wins
    assert r.returncode == 0
    conf = librdkafka_settings(secure_broker, "SASL_SSL", "PLAIN", password="nope")
    r = run("topics", "list", *[a for k, v in conf.items() for a in ("-X", f"{k}={v}")])
    assert "Authentication failed" in one_line_error(r, FAILED)


def test_a_missing_command_config_file_is_one_line():
    r = run("topics", "list", "--command-config", "/nonexistent/client.properties")
    assert "cannot read" in one_line_error(r, USAGE)


def test_an_unknown_user_cannot_be_removed(admin_config):
    r = run("users", "remove", "nobody", "--mechanism", "SCRAM-SHA-256",
            "--command-config", admin_config)
    assert "RESOURCE_NOT_FOUND" in one_line_error(r, FAILED)
