"""Smaller points where a secured broker answers exactly as Kafka does: SCRAM's GS2 header
(the channel-binding flag must be `n`, an authorization id is accepted when it is the username
and refused otherwise, as Kafka's ScramSaslServer does), Envelope and the other controller APIs
served on the controller's listener only (a combined node's broker listener closes the
connection, as Kafka's does for an API its listener does not enable, and its ApiVersions does
not list it), and nodes whose certificates their peers refuse say why."""
import base64
import contextlib
import hashlib
import hmac
import json
import re
from pathlib import Path

import kafka
import pytest
import trustme
from brokers import MinilogBroker, free_port, wait_for_port
from security_tools import PASSWORD, USER
from waiting import wait_until
from wire import RawConnection

from minilog.broker.server.envelope import wrap
from minilog.connector.local_cluster import LocalCluster
from minilog.connector.protocol import ApiKey, ErrorCode, request

NONCE = "fyko+d2lbbFgONRv9qkxdawL"
KAFKA_PROTOCOL = Path(__file__).resolve().parents[3] / "shared" / "kafka-protocol"


def _sasl(conn: RawConnection, api_key: int, **fields):
    version = 1 if api_key == ApiKey.SASL_HANDSHAKE else 2
    return conn.call(api_key, version, request(api_key).cls(**fields))


def _scram_sha256(broker, header: str, user: str = USER, password: str = PASSWORD):
    """The SaslAuthenticate answers of a SCRAM-SHA-256 login whose client-first message
    starts with the GS2 `header` (RFC 5802 by hand: scramp's client always sends `n,,`)."""
    with contextlib.closing(RawConnection(broker.bootstrap_for("SASL_PLAINTEXT"))) as conn:
        assert _sasl(conn, ApiKey.SASL_HANDSHAKE, mechanism="SCRAM-SHA-256").error_code == 0
        bare = f"n={user},r={NONCE}"
        first = _sasl(conn, ApiKey.SASL_AUTHENTICATE, auth_bytes=(header + bare).encode())
        if first.error_code:
            return first
        server_first = bytes(first.auth_bytes).decode()
        attrs = dict(a.split("=", 1) for a in server_first.split(","))
        salted = hashlib.pbkdf2_hmac("sha256", password.encode(), base64.b64decode(attrs["s"]),
                                     int(attrs["i"]))
        client_key = hmac.new(salted, b"Client Key", "sha256").digest()
        stored_key = hashlib.sha256(client_key).digest()
        without_proof = f"c={base64.b64encode(header.encode()).decode()},r={attrs['r']}"
        signature = hmac.new(stored_key, f"{bare},{server_first},{without_proof}".encode(),
                             "sha256").digest()
        proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature))).decode()
        return _sasl(conn, ApiKey.SASL_AUTHENTICATE,
                     auth_bytes=f"{without_proof},p={proof}".encode())


def test_scram_logs_in_with_no_authorization_id_or_the_username_as_one(secure_broker):
    assert _scram_sha256(secure_broker, "n,,").error_code == 0
    assert _scram_sha256(secure_broker, f"n,a={USER},").error_code == 0


def test_scram_refuses_another_authorization_id_and_channel_binding_flags(secure_broker):
    for header in ("n,a=admin,", "y,,", "p=tls-unique,,"):
        assert _scram_sha256(secure_broker, header).error_code == \
            ErrorCode.SASL_AUTHENTICATION_FAILED, header


@pytest.fixture(scope="module")
def combined_node():
    """One combined node: PLAINTEXT for clients, CONTROLLER for the quorum; (node, the
    controller listener's port)."""
    controller = free_port()
    node = MinilogBroker(extra=["-o", f"controller.quorum.voters=1@127.0.0.1:{controller}"])
    node.more_listeners = f"CONTROLLER://127.0.0.1:{controller}"
    node.start()
    try:
        wait_for_port(controller, 60, node.proc)
        yield node, controller
    finally:
        node.cleanup()


def test_envelope_is_served_on_the_controller_listener_only(combined_node):
    node, controller = combined_node
    create = request(ApiKey.CREATE_TOPICS)
    body = create.cls(timeout_ms=5000, validate_only=False, topics=[create.make(
        "topics", name="enveloped", num_partitions=1, replication_factor=1, assignments=[],
        configs=[])])
    envelope = wrap(ApiKey.CREATE_TOPICS, 7, "raw", body, "User:ANONYMOUS", "127.0.0.1")
    with contextlib.closing(RawConnection(node.bootstrap)) as conn:
        conn.send_raw(b"".join(_frame(envelope)))
        assert conn.closed_by_peer_within(30)
    with contextlib.closing(RawConnection(f"127.0.0.1:{controller}")) as conn:
        answer = conn.call(ApiKey.ENVELOPE, 0, envelope)
    assert answer.error_code in (0, ErrorCode.NOT_CONTROLLER)  # served, not closed


def test_api_versions_lists_envelope_on_the_controller_listener_only(combined_node):
    """What each listener advertises is what it serves: kafka-python's admin client, on the
    client listener, is not offered Envelope; the controller listener lists it."""
    node, controller = combined_node
    admin = kafka.KafkaAdminClient(bootstrap_servers=node.bootstrap, request_timeout_ms=30000)
    try:
        client_side = {int(k) for k in admin.api_versions()}
    finally:
        admin.close()
    assert ApiKey.FETCH in client_side and ApiKey.ENVELOPE not in client_side
    with contextlib.closing(RawConnection(f"127.0.0.1:{controller}")) as conn:
        answer = conn.call(ApiKey.API_VERSIONS, 3, request(ApiKey.API_VERSIONS).cls(
            client_software_name="probe", client_software_version="1"))
    assert answer.error_code == 0
    assert ApiKey.ENVELOPE in {k.api_key for k in answer.api_keys}


def _listed(address):
    with contextlib.closing(RawConnection(address)) as conn:
        answer = conn.call(ApiKey.API_VERSIONS, 3, request(ApiKey.API_VERSIONS).cls(
            client_software_name="probe", client_software_version="1"))
    assert answer.error_code == 0
    return {k.api_key for k in answer.api_keys}


def _kafka_listener_types():
    """{api key: the listener types Kafka's definition enables it on} from Kafka's JSON."""
    found = {}
    for path in KAFKA_PROTOCOL.glob("*Request.json"):
        text = re.sub(r"^\s*//.*$", "", path.read_text(), flags=re.M)  # the files' comments
        spec = json.loads(text)
        found[spec["apiKey"]] = set(spec.get("listeners", ()))
    return found


@pytest.mark.skipif(not KAFKA_PROTOCOL.is_dir(),
                    reason=f"Kafka's message definitions are not at {KAFKA_PROTOCOL}")
def test_each_listener_lists_the_apis_kafka_enables_on_its_type(combined_node):
    """The client listener lists only APIs whose Kafka definition names the broker listener
    type (no Vote, BrokerHeartbeat, AlterPartition...); the controller listener lists the
    quorum's and the broker lifecycle's."""
    node, controller = combined_node
    types = _kafka_listener_types()
    client_side = _listed(node.bootstrap)
    assert client_side, "nothing listed"
    assert {k for k in client_side if "broker" not in types[k]} == set()
    controller_side = _listed(f"127.0.0.1:{controller}")
    for key in (ApiKey.VOTE, ApiKey.BROKER_HEARTBEAT, ApiKey.BROKER_REGISTRATION,
                ApiKey.ALTER_PARTITION):
        assert key in controller_side and key not in client_side, key


def test_a_controller_api_on_the_client_listener_closes_the_connection(combined_node):
    """A BrokerHeartbeat sent to the client listener: the connection closes, as Kafka's does
    for an API its listener does not enable; the controller listener answers it."""
    node, controller = combined_node
    heartbeat = request(ApiKey.BROKER_HEARTBEAT).cls(
        broker_id=1, broker_epoch=-1, current_metadata_offset=0, want_fence=False,
        want_shut_down=False)
    with contextlib.closing(RawConnection(node.bootstrap)) as conn:
        conn.send_raw(b"".join(_frame_of(ApiKey.BROKER_HEARTBEAT, 0, heartbeat)))
        assert conn.closed_by_peer_within(30)
    with contextlib.closing(RawConnection(f"127.0.0.1:{controller}")) as conn:
        answer = conn.call(ApiKey.BROKER_HEARTBEAT, 0, heartbeat)
    assert answer.error_code != 0  # answered (a stale epoch), not closed


def _frame_of(api_key, version, body):
    from minilog.connector.protocol.framing import RequestHeader, encode_request
    return encode_request(RequestHeader(api_key, version, 1, "raw"), body)


def _frame(envelope):
    return _frame_of(ApiKey.ENVELOPE, 0, envelope)


def test_nodes_refusing_each_others_certificate_log_why(tmp_path):
    """Two nodes on SSL whose certificate names another host: neither can reach the other,
    and each log says the certificate's host name is the reason."""
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    ca.issue_cert("elsewhere.example").private_key_and_cert_chain_pem.write_to_path(
        str(tmp_path / "server.pem"))
    settings = {"ssl.keystore.location": tmp_path / "server.pem",
                "ssl.truststore.location": tmp_path / "ca.pem", "ssl.client.auth": "none"}
    cluster = LocalCluster(2, data_dir=tmp_path / "c", listener="SSL",
                           extra=[x for k, v in settings.items() for x in ("-o", f"{k}={v}")])
    try:
        cluster.start()
        for node in cluster.nodes:
            wait_until(lambda: "mismatch, certificate is not valid" in  # OpenSSL's words
                       node.log_path.read_text(), 60, f"node {node.node_id} to log why")
    finally:
        cluster.stop()
