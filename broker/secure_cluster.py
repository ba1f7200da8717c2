"""`minilog cluster up --secure`: what a local cluster needs to run on SASL_SSL only.

A throw-away certificate authority and a certificate for 127.0.0.1 and localhost (`trustme`,
PEM files in DIR/security), one SASL_SSL listener per broker (replication and, in combined
mode, the quorum run over it too; dedicated controllers listen on CONTROLLER, SASL_SSL as
well), SCRAM-SHA-512 with an `admin` user whose random password the nodes log in to each
other with, ACLs on with `admin` the super user, and DIR/client.properties: the client
settings (librdkafka's names, which `minilog --command-config`, confluent-kafka and kcat -F
read) to reach the cluster as admin.
"""
import secrets
from pathlib import Path

LISTENER = "SASL_SSL"
CONTROLLER = "CONTROLLER"  # dedicated controllers' listener (controller.listener.names)
MECHANISM = "SCRAM-SHA-512"
ADMIN = "admin"
CLIENT_PROPERTIES = "client.properties"


class SecureSetupError(Exception):
    """What stops a secured cluster from being set up, in one line."""


def _certificates(directory: Path) -> tuple[Path, Path]:
    """(CA file, server chain-and-key file), made once."""
    ca_path, server_path = directory / "ca.pem", directory / "server.pem"
    if ca_path.exists() and server_path.exists():
        return ca_path, server_path
    import trustme  # here, not at the top: only `cluster up --secure` needs it
    directory.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA(organization_name="minilog local cluster")
    ca.cert_pem.write_to_path(str(ca_path))
    ca.issue_cert("127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(
        str(server_path))
    server_path.chmod(0o600)
    return ca_path, server_path


def secure_settings(data_dir: Path) -> tuple[dict, dict]:
    """(the broker settings of every node, the admin's client settings)."""
    ca, server = _certificates(data_dir / "security")
    password = secrets.token_urlsafe(18)
    login = (f'org.apache.kafka.common.security.scram.ScramLoginModule required '
             f'username="{ADMIN}" password="{password}";')
    settings = {
        "listener.security.protocol.map": f"{LISTENER}:{LISTENER},{CONTROLLER}:{LISTENER}",
        "ssl.keystore.location": str(server), "ssl.truststore.location": str(ca),
        "sasl.enabled.mechanisms": MECHANISM,
        "sasl.mechanism.inter.broker.protocol": MECHANISM,
        "sasl.mechanism.controller.protocol": MECHANISM,
        **{f"listener.name.{name.lower()}.{MECHANISM.lower()}.sasl.jaas.config": login
           for name in (LISTENER, CONTROLLER)},
        "sasl.scram": f"{MECHANISM}=[name={ADMIN},password={password}]",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": f"User:{ADMIN}",
    }
    client = {"security.protocol": LISTENER, "sasl.mechanism": MECHANISM,
              "sasl.username": ADMIN, "sasl.password": password, "ssl.ca.location": str(ca)}
    return settings, client


def write_client_properties(data_dir: Path, client: dict, bootstrap: str) -> Path:
    path = data_dir / CLIENT_PROPERTIES
    path.write_text("# the admin user of this cluster (a super user): keep this file private\n"
                    + "".join(f"{k}={v}\n"
                              for k, v in {"bootstrap.servers": bootstrap, **client}.items()))
    path.chmod(0o600)
    return path


def client_settings(data_dir: Path) -> dict:
    """DIR/client.properties as a client config ({} for a PLAINTEXT cluster)."""
    from minilog.connector.properties import read_properties
    path = Path(data_dir) / CLIENT_PROPERTIES
    return read_properties(path) if path.exists() else {}
