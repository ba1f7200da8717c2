"""KIP-368: SASL sessions that expire, and re-authentication on the same connection.

The broker gives SCRAM sessions `connections.max.reauth.ms` and PLAIN sessions on the
SASL_PLAINTEXT listener a shorter one of their own (Kafka's per-listener, per-mechanism key).
Raw frames show what the broker answers; confluent-kafka and kafka-python, which both
re-authenticate when told a session lifetime, show that a client keeps its one connection.
"""
import logging
import time
import uuid

import kafka
import pytest
from confluent_kafka import Producer as CKProducer
from security_tools import PASSWORD, USER, SecureBroker, kafka_python_settings, librdkafka_settings
from waiting import wait_until
from wire import RawConnection

from minilog.connector.client import Consumer, Producer, TopicPartition
from minilog.connector.protocol import ApiKey, ErrorCode, request
from minilog.connector.protocol.framing import RequestHeader, encode_request

SCRAM_LIFETIME_MS = 2000
PLAIN_LIFETIME_MS = 1500
EXPIRED = "its SASL session expired"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    from security_tools import make_certificates
    b = SecureBroker(make_certificates(tmp_path_factory.mktemp("certs")), extra=[
        "-o", f"connections.max.reauth.ms={SCRAM_LIFETIME_MS}",
        "-o", f"listener.name.sasl_plaintext.plain.connections.max.reauth.ms="
              f"{PLAIN_LIFETIME_MS}"]).start()
    yield b
    b.cleanup()


def _handshake(conn, mechanism):
    return conn.call(ApiKey.SASL_HANDSHAKE, 1, request(ApiKey.SASL_HANDSHAKE).cls(mechanism=mechanism))


def _plain(conn, user=USER, password=PASSWORD):
    return conn.call(ApiKey.SASL_AUTHENTICATE, 2, request(ApiKey.SASL_AUTHENTICATE).cls(
        auth_bytes=f"\0{user}\0{password}".encode()))


def _login(broker, user=USER, password=PASSWORD):
    conn = RawConnection(broker.bootstrap_for("SASL_PLAINTEXT"))
    assert _handshake(conn, "PLAIN").error_code == 0
    resp = _plain(conn, user, password)
    assert resp.error_code == 0
    return conn, resp


def _metadata(conn):
    return conn.call(ApiKey.METADATA, 12, request(ApiKey.METADATA).cls(topics=[]))


def test_sasl_authenticate_tells_the_client_its_session_lifetime(broker):
    conn, resp = _login(broker)
    assert resp.session_lifetime_ms == PLAIN_LIFETIME_MS  # the listener's PLAIN setting
    conn.close()


def test_a_request_after_the_session_expired_closes_the_connection(broker):
    conn, _ = _login(broker)
    assert _metadata(conn).brokers
    time.sleep(PLAIN_LIFETIME_MS / 1000 + 0.2)  # the session's own clock, nothing to wait on
    with pytest.raises(ConnectionError):
        _metadata(conn)
    conn.close()
    wait_until(lambda: EXPIRED in broker.log_path.read_text(), 30, "the broker's reason")


def test_reauthentication_on_the_same_connection_renews_the_session(broker):
    conn, first = _login(broker)
    started = time.monotonic()
    time.sleep(PLAIN_LIFETIME_MS / 2000)
    assert _handshake(conn, "PLAIN").error_code == 0
    again = _plain(conn)
    assert (again.error_code, again.session_lifetime_ms) == (0, PLAIN_LIFETIME_MS)
    time.sleep(max(0.0, PLAIN_LIFETIME_MS / 1000 + 0.2 - (time.monotonic() - started)))
    assert _metadata(conn).brokers  # past the first session's end: served by the second
    conn.close()


def test_reauthentication_waits_for_the_requests_before_it(broker):
    """A long-polling Fetch is in flight when the client starts re-authenticating: the Fetch is
    answered first, then the handshake, on the same connection, although the session ended
    while the handshake waited (librdkafka's re-authentication behind a long JoinGroup)."""
    conn, _ = _login(broker)
    fetch = request(ApiKey.FETCH).cls(replica_id=-1, max_wait_ms=PLAIN_LIFETIME_MS + 500,
                                      min_bytes=1 << 20,
                                      max_bytes=1 << 20, isolation_level=0, session_id=0,
                                      session_epoch=-1, topics=[], forgotten_topics_data=[],
                                      rack_id="")
    handshake = request(ApiKey.SASL_HANDSHAKE).cls(mechanism="PLAIN")
    conn.send_raw(b"".join(encode_request(RequestHeader(ApiKey.FETCH, 12, 101, "raw"), fetch)))
    conn.send_raw(b"".join(encode_request(RequestHeader(ApiKey.SASL_HANDSHAKE, 1, 102, "raw"),
                                          handshake)))
    frames = []
    while len(frames) < 2:  # both answers may come in one read
        data = conn.sock.recv(1 << 20)
        assert data, "the broker closed the connection"
        frames += conn.frames.feed(data)
    assert [bytes(f[:4]) for f in frames] == [(101).to_bytes(4, "big"), (102).to_bytes(4, "big")]
    assert _plain(conn).error_code == 0
    assert _metadata(conn).brokers
    conn.close()


def test_reauthentication_as_another_principal_is_refused(broker):
    conn, _ = _login(broker)
    assert _handshake(conn, "PLAIN").error_code == 0
    resp = _plain(conn, "admin", "admin-secret")
    assert (resp.error_code, resp.error_message) == (
        ErrorCode.SASL_AUTHENTICATION_FAILED,
        "Cannot change principals during re-authentication from User.alice: User.admin")
    assert conn.closed_by_peer_within(30)


def test_reauthentication_with_another_mechanism_is_refused(broker):
    conn, _ = _login(broker)
    assert _handshake(conn, "SCRAM-SHA-256").error_code == 0  # refused at the next step
    resp = conn.call(ApiKey.SASL_AUTHENTICATE, 2, request(ApiKey.SASL_AUTHENTICATE).cls(
        auth_bytes=b"n,,n=alice,r=abc"))
    assert (resp.error_code, resp.error_message) == (
        ErrorCode.SASL_AUTHENTICATION_FAILED,
        "SASL mechanism 'SCRAM-SHA-256' requested by client is not supported for "
        "re-authentication of mechanism 'PLAIN'")
    assert conn.closed_by_peer_within(30)


def test_a_wrong_password_on_reauthentication_is_refused_as_kafka_words_it(broker):
    conn, _ = _login(broker)
    assert _handshake(conn, "PLAIN").error_code == 0
    resp = _plain(conn, USER, "wrong")
    assert (resp.error_code, resp.error_message) == (
        ErrorCode.SASL_AUTHENTICATION_FAILED,
        "Authentication failed during re-authentication due to invalid credentials with SASL "
        "mechanism PLAIN")
    assert conn.closed_by_peer_within(30)


def _sessions(fraction: float = 1.0) -> float:
    """Seconds for `fraction` of three SCRAM session lifetimes: how long a client runs to show
    it re-authenticates (each session ends at 2 s; clients start over at 85-95% of it)."""
    return fraction * 3 * SCRAM_LIFETIME_MS / 1000


def test_confluent_kafka_reauthenticates_and_keeps_its_connection(broker):
    """librdkafka re-authenticates at 90% of the session; a refused or late re-authentication
    would be an error (a failed handshake, a connection closed under it)."""
    errors = []
    conf = {**librdkafka_settings(broker, "SASL_SSL", "SCRAM-SHA-512"), "linger.ms": 5,
            "error_cb": errors.append}
    producer, topic, acked = CKProducer(conf), f"reauth-{uuid.uuid4().hex[:8]}", []
    deadline = time.monotonic() + _sessions(1)
    while time.monotonic() < deadline:
        producer.produce(topic, b"x", on_delivery=lambda err, msg: acked.append(err))
        producer.poll(0.1)
    assert producer.flush(60) == 0
    assert acked and set(acked) == {None}
    assert [e.str() for e in errors] == []


def test_kafka_python_reauthenticates_and_keeps_its_connection(broker, caplog):
    caplog.set_level(logging.INFO, logger="kafka")
    producer = kafka.KafkaProducer(**kafka_python_settings(broker, "SASL_SSL", "SCRAM-SHA-256"),
                                   linger_ms=5)
    topic = f"reauth-{uuid.uuid4().hex[:8]}"
    try:
        deadline = time.monotonic() + _sessions(1)
        futures = []
        while time.monotonic() < deadline:
            futures.append(producer.send(topic, b"x"))
            time.sleep(0.1)
        assert all(f.get(60).offset >= 0 for f in futures)
    finally:
        producer.close()
    auths = [r for r in caplog.records if "Authenticated as" in r.getMessage()]
    assert not [r for r in caplog.records if "re-authentication failed" in r.getMessage()]
    assert len(auths) >= 3  # the first login, then at least two re-authentications


def test_minilog_client_reauthenticates_and_keeps_its_connection(broker):
    """minilog's producer and consumer re-authenticate as librdkafka does (each outlives one
    and a half sessions): the broker never has to close one of their connections for an ended
    session."""
    conf = librdkafka_settings(broker, "SASL_SSL", "SCRAM-SHA-256")
    topic, sent = f"reauth-{uuid.uuid4().hex[:8]}", []
    expired_before = broker.log_path.read_text().count(EXPIRED)
    with Producer(conf) as producer:
        deadline = time.monotonic() + _sessions(0.5)
        while time.monotonic() < deadline:
            sent.append(producer.send(topic, b"x"))
            time.sleep(0.05)
        assert all(f.result(60).offset >= 0 for f in sent)
    with Consumer({**conf, "auto.offset.reset": "earliest"}) as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        got = []
        deadline = time.monotonic() + _sessions(0.5)
        while time.monotonic() < deadline or len(got) < len(sent):
            got.extend(consumer.poll(0.2))
            assert time.monotonic() < deadline + 60, f"{len(got)} of {len(sent)} records"
    assert len(got) == len(sent)
    assert broker.log_path.read_text().count(EXPIRED) == expired_before
