"""Bad logins and wrong protocols are answered as Kafka answers them, and leave the broker up.

Raw frames (tests/wire.py) show exactly what the broker sends; real clients show what a user
sees. Every test ends by checking that a good client is still served.
"""
import socket
import ssl
import subprocess
import sys

import pytest
from confluent_kafka.admin import AdminClient as CKAdmin
from brokers import free_port
from security_tools import (
    CLIENT_CN,
    PASSWORD,
    USER,
    SecureBroker,
    librdkafka_settings,
    make_certificates,
)
from waiting import wait_until
from wire import RawConnection

from minilog.broker.security.tls import principal_of
from minilog.connector.client import KafkaConnectionError, KafkaError, Producer
from minilog.connector.protocol import ApiKey, ErrorCode, request
from minilog.connector.protocol.framing import RequestHeader, encode_request

FAILED = ("Authentication failed during authentication due to invalid credentials with SASL "
          "mechanism {}")


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_certificates(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def secure_broker(certs):
    b = SecureBroker(certs, extra=["-o", "connections.authentication.timeout.ms=2000"]).start()
    yield b
    b.cleanup()


def _served(broker, protocol="SASL_SSL", mechanism="SCRAM-SHA-256"):
    with Producer(librdkafka_settings(broker, protocol, mechanism)) as p:
        return p.send("still-served", b"ok").result(60).offset >= 0


def _handshake(conn, mechanism, version=1):
    return conn.call(ApiKey.SASL_HANDSHAKE, version,
                     request(ApiKey.SASL_HANDSHAKE).cls(mechanism=mechanism))


def _authenticate(conn, token):
    return conn.call(ApiKey.SASL_AUTHENTICATE, 2,
                     request(ApiKey.SASL_AUTHENTICATE).cls(auth_bytes=token))


def _plain_login(broker, user, password):
    conn = RawConnection(broker.bootstrap_for("SASL_PLAINTEXT"))
    assert _handshake(conn, "PLAIN").error_code == 0
    resp = _authenticate(conn, b"\0" + user.encode() + b"\0" + password.encode())
    return conn, resp


def test_wrong_password_and_unknown_user_get_the_same_answer_then_the_connection_closes(
        secure_broker):
    answers = []
    for user, password in ((USER, "wrong"), ("mallory", PASSWORD)):
        conn, resp = _plain_login(secure_broker, user, password)
        answers.append((resp.error_code, resp.error_message))
        assert conn.closed_by_peer_within(30)
        conn.close()
    assert answers == [(ErrorCode.SASL_AUTHENTICATION_FAILED, FAILED.format("PLAIN"))] * 2
    assert _served(secure_broker)


def test_scram_unknown_user_gets_the_same_answer_as_a_wrong_password(secure_broker):
    from scramp import ScramClient
    messages = []
    for user, password in ((USER, "wrong"), ("mallory", PASSWORD)):
        conn = RawConnection(secure_broker.bootstrap_for("SASL_PLAINTEXT"))
        assert _handshake(conn, "SCRAM-SHA-512").error_code == 0
        client = ScramClient(["SCRAM-SHA-512"], user, password)
        first = _authenticate(conn, client.get_client_first().encode())
        if first.error_code == 0:  # unknown users may fail here or at the proof: not telling
            client.set_server_first(bytes(first.auth_bytes).decode())
            first = _authenticate(conn, client.get_client_final().encode())
        messages.append((first.error_code, first.error_message))
        conn.close()
    assert messages == [(ErrorCode.SASL_AUTHENTICATION_FAILED,
                         FAILED.format("SCRAM-SHA-512"))] * 2


def test_a_mechanism_the_listener_does_not_enable_is_refused_with_the_enabled_ones(secure_broker):
    conn = RawConnection(secure_broker.bootstrap_for("SASL_PLAINTEXT"))
    resp = _handshake(conn, "GSSAPI")
    assert resp.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert resp.mechanisms == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
    assert conn.closed_by_peer_within(30)
    assert _served(secure_broker)


def test_a_request_before_authentication_closes_the_connection(secure_broker):
    conn = RawConnection(secure_broker.bootstrap_for("SASL_PLAINTEXT"))
    conn.send_raw(b"".join(encode_request(RequestHeader(ApiKey.METADATA, 12, 1, "raw"),
                                          request(ApiKey.METADATA).cls(topics=None))))
    assert conn.closed_by_peer_within(30)


def test_api_versions_is_answered_before_authentication(secure_broker):
    conn = RawConnection(secure_broker.bootstrap_for("SASL_PLAINTEXT"))
    resp = conn.call(ApiKey.API_VERSIONS, 3, request(ApiKey.API_VERSIONS).cls(
        client_software_name="raw", client_software_version="1"))
    assert ApiKey.SASL_HANDSHAKE in {k.api_key for k in resp.api_keys}


def test_handshake_v0_takes_bare_tokens(secure_broker):
    """Old clients: after SaslHandshake v0 the tokens travel without SaslAuthenticate."""
    conn = RawConnection(secure_broker.bootstrap_for("SASL_PLAINTEXT"))
    assert _handshake(conn, "PLAIN", version=0).error_code == 0
    token = f"\0{USER}\0{PASSWORD}".encode()
    conn.send_raw(len(token).to_bytes(4, "big") + token)
    assert conn.recv_frame() == b""  # PLAIN's empty server token: authenticated
    resp = conn.call(ApiKey.METADATA, 12, request(ApiKey.METADATA).cls(topics=None))
    assert [b.port for b in resp.brokers] == [secure_broker.ports["SASL_PLAINTEXT"]]


def test_a_silent_client_is_disconnected_after_the_authentication_timeout(secure_broker):
    conn = RawConnection(secure_broker.bootstrap_for("SASL_PLAINTEXT"))
    assert conn.closed_by_peer_within(60)
    tls = socket.create_connection(("127.0.0.1", secure_broker.ports["SSL"]), timeout=5)
    try:  # connected, no ClientHello: the TLS handshake times out the same way
        assert tls.recv(1) == b""
    finally:
        tls.close()


def test_sasl_handshake_on_a_listener_without_sasl_is_an_illegal_state(secure_broker):
    conn = RawConnection(secure_broker.bootstrap)
    assert _handshake(conn, "PLAIN").error_code == ErrorCode.ILLEGAL_SASL_STATE


def test_minilog_client_names_a_failed_login_in_one_line(secure_broker):
    conf = librdkafka_settings(secure_broker, "SASL_SSL", "SCRAM-SHA-256", password="wrong")
    with pytest.raises(KafkaError) as err, Producer(conf) as p:
        p.send("t", b"x").result(60)
    assert err.value.code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert "\n" not in str(err.value)


def test_confluent_kafka_reports_a_failed_login(secure_broker):
    errors = []
    conf = librdkafka_settings(secure_broker, "SASL_SSL", "PLAIN", password="wrong")
    admin = CKAdmin({**conf, "error_cb": errors.append})
    with pytest.raises(Exception):
        admin.list_topics(timeout=15)
    wait_until(lambda: admin.poll(0.5) is not None and
               any("Authentication failed" in e.str() for e in errors),
               60, "librdkafka's error callback")
    assert _served(secure_broker)


def test_plaintext_client_on_the_tls_port_is_refused_and_the_broker_goes_on(secure_broker):
    conf = librdkafka_settings(secure_broker, "PLAINTEXT")
    conf["bootstrap.servers"] = secure_broker.bootstrap_for("SSL")
    with pytest.raises(KafkaConnectionError), Producer(conf) as p:
        p.send("t", b"x").result(30)
    assert _served(secure_broker)


def test_tls_client_on_the_plaintext_port_is_told_so(secure_broker):
    conf = librdkafka_settings(secure_broker, "SSL")
    conf["bootstrap.servers"] = secure_broker.bootstrap
    with pytest.raises(KafkaConnectionError, match="TLS handshake .* failed"), \
            Producer(conf) as p:
        p.send("t", b"x").result(30)
    assert _served(secure_broker)


def test_a_broker_certificate_from_an_untrusted_ca_is_refused(secure_broker, certs):
    conf = librdkafka_settings(secure_broker, "SSL")
    conf["ssl.ca.location"] = str(certs.other_ca)
    with pytest.raises(KafkaConnectionError, match="CERTIFICATE_VERIFY_FAILED"), \
            Producer(conf) as p:
        p.send("t", b"x").result(30)


def test_a_given_ca_replaces_the_system_store(secure_broker, certs, monkeypatch):
    """With ssl.ca.location, only that CA is trusted (as librdkafka): the broker's CA in the
    system store (OpenSSL's SSL_CERT_FILE) does not make its certificate acceptable."""
    monkeypatch.setenv("SSL_CERT_FILE", str(certs.ca))
    conf = librdkafka_settings(secure_broker, "SSL")
    conf["ssl.ca.location"] = str(certs.other_ca)
    with pytest.raises(KafkaConnectionError, match="CERTIFICATE_VERIFY_FAILED"), \
            Producer(conf) as p:
        p.send("t", b"x").result(30)
    del conf["ssl.ca.location"]  # no CA given: the system store is what is trusted
    with Producer(conf) as p:
        assert p.send("t", b"x").result(60).offset >= 0


def test_mutual_tls_requires_a_client_certificate(certs):
    b = SecureBroker(certs, mtls=True).start()
    try:
        conf = librdkafka_settings(b, "SSL")
        with pytest.raises(KafkaConnectionError), Producer(conf) as p:
            p.send("t", b"x").result(30)
        with Producer(librdkafka_settings(b, "SSL", client_cert=True)) as p:
            assert p.send("t", b"x").result(60).offset == 0
    finally:
        b.cleanup()


def test_the_principal_of_a_client_certificate_is_its_subject_as_kafka_writes_it(certs):
    cert = ssl._ssl._test_decode_cert(str(certs.client_cert))

    class Peer:
        def getpeercert(self):
            return cert
    assert principal_of(Peer()) == f"User:CN={CLIENT_CN},OU=tests,O=minilog"
    assert principal_of(None) == "User:ANONYMOUS"


@pytest.mark.parametrize("settings,says", [
    ({"listeners": "SSL://127.0.0.1:{port}"}, "has no certificate"),
    ({"listeners": "SSL://127.0.0.1:{port}", "ssl.keystore.type": "JKS",
      "ssl.keystore.location": "/x.jks"}, "minilog reads PEM only"),
    ({"listeners": "SASL_SSL://127.0.0.1:{port}", "ssl.keystore.location": "/nonexistent.pem"},
     "ssl.keystore.location: no such file /nonexistent.pem"),
    ({"listeners": "SASL_PLAINTEXT://127.0.0.1:{port}", "sasl.enabled.mechanisms": "PLAIN"},
     "plain.sasl.jaas.config"),
    ({"listeners": "SASL_PLAINTEXT://127.0.0.1:{port}", "sasl.enabled.mechanisms": "GSSAPI"},
     "sasl.enabled.mechanisms"),
    ({"listeners": "INTERNAL://127.0.0.1:{port}"}, "listener.security.protocol.map"),
    ({"listeners": "SASL_PLAINTEXT://127.0.0.1:{port}", "sasl.enabled.mechanisms": "PLAIN",
      "controller.quorum.voters": "1@127.0.0.1:{port}"}, "sasl.mechanism.inter.broker.protocol"),
], ids=["no-certificate", "jks", "missing-file", "no-plain-users", "gssapi", "unmapped",
        "secured-cluster-listener-without-broker-login"])
def test_a_broker_with_bad_security_settings_refuses_to_start_in_one_line(tmp_path, settings,
                                                                          says):
    port = free_port()
    args = [a for k, v in settings.items() for a in ("-o", f"{k}={v.format(port=port)}")]
    r = subprocess.run([sys.executable, "-m", "minilog.broker", "start", "--data-dir",
                        str(tmp_path), *args], capture_output=True, timeout=120, check=False)
    err = r.stderr.decode()
    assert (r.returncode, err.count("\n")) == (2, 1) and says in err, err


def test_random_sasl_frames_and_tls_bytes_leave_the_broker_serving(secure_broker):
    """Fuzz: garbage tokens in each SASL step, truncated and random frames on the SASL port,
    random bytes in place of a TLS ClientHello; each connection ends, the broker goes on."""
    import random
    rng = random.Random(28)
    for i in range(60):
        conn = RawConnection(secure_broker.bootstrap_for("SASL_PLAINTEXT"))
        try:
            kind = i % 4
            if kind == 0:  # a random token for a chosen mechanism
                mechanism = rng.choice(["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
                _handshake(conn, mechanism)
                resp = _authenticate(conn, rng.randbytes(rng.randrange(0, 300)))
                assert resp.error_code in (0, ErrorCode.SASL_AUTHENTICATION_FAILED)
            elif kind == 1:  # a random frame body under a SASL header
                head = encode_request(RequestHeader(ApiKey.SASL_AUTHENTICATE, 2, 1, "f"),
                                      request(ApiKey.SASL_AUTHENTICATE).cls(auth_bytes=b"x"))
                body = b"".join(head)[4:14] + rng.randbytes(rng.randrange(0, 100))
                conn.send_raw(len(body).to_bytes(4, "big") + body)
            elif kind == 2:  # random bytes, size prefix and all
                conn.send_raw(rng.randbytes(rng.randrange(1, 200)))
            else:  # a TLS port fed random bytes
                raw = socket.create_connection(("127.0.0.1", secure_broker.ports["SASL_SSL"]),
                                               timeout=5)
                raw.sendall(rng.randbytes(rng.randrange(1, 500)))
                raw.close()
        except (ConnectionError, OSError):
            pass  # the broker hung up on us: the expected answer to most of these
        finally:
            conn.close()
    assert _served(secure_broker)
    assert _served(secure_broker, "SASL_PLAINTEXT", "PLAIN")
    assert "Traceback" not in secure_broker.log_path.read_text()  # no handler failed on them
