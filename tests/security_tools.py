"""A broker with every security protocol, test certificates, and client settings for each
client library (confluent-kafka, kafka-python, minilog's own) to reach it.

Certificates come from `trustme`: a throw-away CA, the broker's certificate for 127.0.0.1 and
localhost, and a client certificate for mutual TLS, written as PEM files.
"""
import sys
from dataclasses import dataclass
from pathlib import Path

import trustme

from brokers import MinilogBroker, free_port, wait_for_port

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
USER, PASSWORD = "alice", "alice-secret"
CLIENT_CN = "client-1"
# every protocol, with each mechanism on the SASL ones: what the client matrices run over
COMBINATIONS = [("PLAINTEXT", None), ("SSL", None)] + [
    (p, m) for p in ("SASL_PLAINTEXT", "SASL_SSL") for m in MECHANISMS]
IDS = [p if m is None else f"{p}-{m}" for p, m in COMBINATIONS]


@dataclass
class Certificates:
    ca: Path
    server: Path        # chain and key in one PEM, as ssl.keystore.location takes it
    client_cert: Path
    client_key: Path
    other_ca: Path      # a CA the broker does not trust


def make_certificates(directory: Path) -> Certificates:
    directory.mkdir(parents=True, exist_ok=True)
    ca, other = trustme.CA(), trustme.CA()
    server = ca.issue_cert("127.0.0.1", "localhost")
    client = ca.issue_cert(f"{CLIENT_CN}@example.com", common_name=CLIENT_CN,
                           organization_name="minilog", organization_unit_name="tests")
    paths = Certificates(directory / "ca.pem", directory / "server.pem",
                         directory / "client.pem", directory / "client.key",
                         directory / "other-ca.pem")
    ca.cert_pem.write_to_path(str(paths.ca))
    other.cert_pem.write_to_path(str(paths.other_ca))
    server.private_key_and_cert_chain_pem.write_to_path(str(paths.server))
    client.cert_chain_pems[0].write_to_path(str(paths.client_cert))
    client.private_key_pem.write_to_path(str(paths.client_key))
    return paths


class SecureBroker(MinilogBroker):
    """One broker listening with all four protocols; `ports[protocol]` says where.

    SASL listeners enable PLAIN and both SCRAMs with the user alice; `mtls` makes the SSL
    listener require client certificates."""

    def __init__(self, certs: Certificates, mtls: bool = False, extra=()):
        self.ports = {p: free_port() for p in PROTOCOLS}
        self.certs = certs
        jaas = (f'org.apache.kafka.common.security.plain.PlainLoginModule required '
                f'username="admin" password="admin-secret" user_admin="admin-secret" '
                f'user_{USER}="{PASSWORD}";')
        settings = {
            "listeners": ",".join(f"{p}://127.0.0.1:{port}" for p, port in self.ports.items()),
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": certs.server,
            "ssl.truststore.location": certs.ca,
            "ssl.client.auth": "required" if mtls else "none",
            "sasl.enabled.mechanisms": ",".join(MECHANISMS),
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
            "listener.name.sasl_ssl.plain.sasl.jaas.config": jaas,
            "listener.name.sasl_ssl.ssl.client.auth": "none",
            "sasl.scram": ";".join(f"{m}=[name={USER},password={PASSWORD}]"
                                   for m in MECHANISMS[1:]),
        }
        args = [a for k, v in settings.items() for a in ("-o", f"{k}={v}")]
        super().__init__(port=self.ports["PLAINTEXT"], extra=[*args, *extra])

    def argv(self):
        return [sys.executable, "-m", "minilog.broker", "start", "--data-dir", str(self.log_dir),
                "--node-id", str(self.node_id), *self.extra]

    def start(self, timeout=60.0):
        super().start(timeout)
        for port in self.ports.values():  # the first is bound before the broker has started
            wait_for_port(port, timeout, self.proc)
        return self

    def bootstrap_for(self, protocol: str) -> str:
        return f"127.0.0.1:{self.ports[protocol]}"


def librdkafka_settings(broker: SecureBroker, protocol: str, mechanism: str = None,
                        user: str = USER, password: str = PASSWORD, client_cert: bool = False):
    """librdkafka's names, which confluent-kafka and minilog's client both take."""
    conf = {"bootstrap.servers": broker.bootstrap_for(protocol), "security.protocol": protocol}
    if "SSL" in protocol:
        conf["ssl.ca.location"] = str(broker.certs.ca)
        if client_cert:
            conf["ssl.certificate.location"] = str(broker.certs.client_cert)
            conf["ssl.key.location"] = str(broker.certs.client_key)
    if protocol.startswith("SASL"):
        conf.update({"sasl.mechanism": mechanism, "sasl.username": user,
                     "sasl.password": password})
    return conf


_KAFKA_PYTHON_NAMES = {
    "bootstrap.servers": "bootstrap_servers", "security.protocol": "security_protocol",
    "ssl.ca.location": "ssl_cafile", "ssl.certificate.location": "ssl_certfile",
    "ssl.key.location": "ssl_keyfile", "sasl.mechanism": "sasl_mechanism",
    "sasl.username": "sasl_plain_username", "sasl.password": "sasl_plain_password"}


def kafka_python_settings(broker: SecureBroker, protocol: str, mechanism: str = None, **kw):
    """The same settings under kafka-python's names."""
    conf = librdkafka_settings(broker, protocol, mechanism, **kw)
    return {_KAFKA_PYTHON_NAMES[k]: v for k, v in conf.items()}
