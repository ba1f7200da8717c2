"""TLS files as a user makes them from the README: `minilog certs create` writes a CA and a
broker's key-and-chain PEM that a TLS listener serves with and clients verify; a wrong file is
one line naming the setting and the file and saying what the PEM must hold."""
import subprocess
import sys

import pytest
from brokers import MinilogBroker, free_port
from clitools import one_line_error, run
from confluent_kafka import Producer

START = [sys.executable, "-m", "minilog.broker", "start"]
KEY_AND_CHAIN = "the PEM file must contain the private key and the certificate chain"


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """The directory `minilog certs create` wrote: ca.pem, ca-key.pem, broker.pem."""
    directory = tmp_path_factory.mktemp("pki")
    r = run("certs", "create", "--dir", directory, "--hosts", "127.0.0.1,localhost")
    assert r.returncode == 0, r.stderr.decode()
    assert f"ssl.keystore.location={directory / 'broker.pem'}" in r.stdout.decode()
    return directory


def test_certs_create_makes_what_a_tls_listener_serves_and_a_client_verifies(pki):
    tls_port = free_port()
    broker = MinilogBroker(extra=["-o", "ssl.keystore.type=PEM",
                                  "-o", f"ssl.keystore.location={pki / 'broker.pem'}"])
    broker.more_listeners = f"SSL://127.0.0.1:{tls_port}"
    broker.start()
    try:
        producer = Producer({"bootstrap.servers": f"127.0.0.1:{tls_port}",
                             "security.protocol": "SSL", "ssl.ca.location": str(pki / "ca.pem"),
                             "ssl.endpoint.identification.algorithm": "https"})
        producer.produce("over-tls", b"verified")
        assert producer.flush(60) == 0
    finally:
        broker.cleanup()


def test_a_second_certificate_is_signed_by_the_same_ca(pki):
    ca = (pki / "ca.pem").read_text()
    r = run("certs", "create", "--dir", pki, "--hosts", "broker2.example.com", "--name",
            "broker2")
    assert r.returncode == 0, r.stderr.decode()
    assert (pki / "ca.pem").read_text() == ca
    again = one_line_error(run("certs", "create", "--dir", pki, "--name", "broker2"), 1)
    assert again == f"minilog certs: {pki / 'broker2.pem'} exists: give another --name, or " \
                    f"remove it first\n"


def _certificate_only(pki, name):
    """A PEM with the certificate chain of broker.pem and not its key."""
    text = (pki / "broker.pem").read_text()
    path = pki / name
    path.write_text(text[text.index("-----BEGIN CERTIFICATE-----"):])
    return path


def _refused(tmp_path, *settings):
    args = [a for s in settings for a in ("-o", s)]
    r = subprocess.run([*START, "--data-dir", str(tmp_path / "data"), "-o",
                        f"listeners=SSL://127.0.0.1:{free_port()}", *args],
                       capture_output=True, text=True, timeout=120, check=False)
    assert (r.returncode, r.stderr.count("\n")) == (2, 1) and "Traceback" not in r.stderr, \
        r.stderr
    return r.stderr


def test_a_missing_keystore_file_is_named_with_its_setting(tmp_path):
    assert _refused(tmp_path, "ssl.keystore.location=/x/broker.pem") == \
        "minilog broker: ssl.keystore.location: no such file /x/broker.pem\n"


def test_a_certificate_without_its_key_says_what_the_pem_must_hold(tmp_path, pki):
    cert_only = _certificate_only(pki, "cert-only.pem")
    assert _refused(tmp_path, f"ssl.keystore.location={cert_only}") == (
        f"minilog broker: ssl.keystore.location: {cert_only} holds no private key: "
        f"{KEY_AND_CHAIN} (this host's certificate first, then any intermediate CA's), e.g. as "
        f"`minilog certs create` writes it or `cat key.pem cert.pem > broker.pem`\n")


def test_a_missing_truststore_file_is_named_with_its_setting(tmp_path, pki):
    assert _refused(tmp_path, f"ssl.keystore.location={pki / 'broker.pem'}",
                    "ssl.client.auth=required", "ssl.truststore.location=/x/ca.pem") == \
        "minilog broker: ssl.truststore.location: no such file /x/ca.pem\n"


def test_a_client_with_a_missing_ca_file_is_one_line_naming_it():
    err = one_line_error(run("-b", "127.0.0.1:9", "-X", "security.protocol=SSL", "-X",
                             "ssl.ca.location=/x/ca.pem", "topics", "list"), 2)
    assert err == "minilog: bad client setting: ssl.ca.location: no such file /x/ca.pem\n"
