"""`minilog cluster up --secure`: what a local cluster needs to run on SASL_SSL only.

A throw-away certificate authority and a certificate for 127.0.0.1 and localhost (`trustme`,
PEM files in DIR/security), one SASL_SSL listener per broker (replication and, in combined
mode, the quorum run over it too; dedicated controllers listen on CONTROLLER, SASL_SSL as
well), SCRAM-SHA-512 with an `admin` user, ACLs on with `admin` the super user, and
DIR/client.properties: the client settings (librdkafka's names, which `minilog
--command-config`, confluent-kafka and kcat -F read) to reach the cluster as admin.

Who the nodes are, as Kafka's rules allow: the controller quorum talks before any ACL is
loaded, so its principal must be a super user. In combined mode every node is a controller and
logs in as admin. With dedicated controllers, controllers log in as `controller` (a super
user) and brokers as `broker`, which is not: brokers need only CLUSTER_ACTION on the cluster
(replication, registration, heartbeats, Envelopes), an ACL `cluster up` creates through the
controllers before it starts the brokers (`grant_cluster_action`).
"""
import secrets
import time
from pathlib import Path

from .private_files import write_properties

LISTENER = "SASL_SSL"
CONTROLLER = "CONTROLLER"  # dedicated controllers' listener (controller.listener.names)
MECHANISM = "SCRAM-SHA-512"
ADMIN = "admin"
BROKER, CONTROLLER_USER = "broker", "controller"  # the nodes' logins beside dedicated controllers
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


def _logins(user: str, password: str) -> dict:
    """The settings making a node log in to its peers as `user` on both listeners."""
    login = (f'org.apache.kafka.common.security.scram.ScramLoginModule required '
             f'username="{user}" password="{password}";')
    return {f"listener.name.{name.lower()}.{MECHANISM.lower()}.sasl.jaas.config": login
            for name in (LISTENER, CONTROLLER)}


def secure_settings(data_dir: Path, dedicated: bool = False) -> tuple[dict, dict, dict]:
    """(the settings of every node, those of each role {"broker": ..., "controller": ...},
    the admin's client settings). `dedicated`: the cluster has controller-only nodes."""
    ca, server = _certificates(data_dir / "security")
    passwords = {user: secrets.token_urlsafe(18)
                 for user in ((ADMIN, BROKER, CONTROLLER_USER) if dedicated else (ADMIN,))}
    settings = {
        "listener.security.protocol.map": f"{LISTENER}:{LISTENER},{CONTROLLER}:{LISTENER}",
        "ssl.keystore.location": str(server), "ssl.truststore.location": str(ca),
        "sasl.enabled.mechanisms": MECHANISM,
        "sasl.mechanism.inter.broker.protocol": MECHANISM,
        "sasl.mechanism.controller.protocol": MECHANISM,
        "sasl.scram": ";".join(f"{MECHANISM}=[name={user},password={password}]"
                               for user, password in passwords.items()),
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": ";".join(f"User:{u}" for u in passwords if u != BROKER),
    }
    if dedicated:
        roles = {"broker": _logins(BROKER, passwords[BROKER]),
                 "controller": _logins(CONTROLLER_USER, passwords[CONTROLLER_USER])}
    else:
        settings.update(_logins(ADMIN, passwords[ADMIN]))
        roles = {}
    client = {"security.protocol": LISTENER, "sasl.mechanism": MECHANISM,
              "sasl.username": ADMIN, "sasl.password": passwords[ADMIN],
              "ssl.ca.location": str(ca)}
    return settings, roles, client


def grant_cluster_action(controller_ports: list, client: dict, timeout: float = 60.0) -> None:
    """Allow `User:broker` CLUSTER_ACTION on the cluster, asking the controllers directly
    (as `kafka-acls.sh --bootstrap-controller` does): brokers cannot join before it exists."""
    import asyncio
    asyncio.run(_grant(controller_ports, client, timeout))


async def _grant(controller_ports, client, timeout):
    from minilog.connector.acl_types import (
        AclOperation,
        PatternType,
        PermissionType,
        ResourceType,
    )
    from minilog.connector.client.config import Config
    from minilog.connector.client.connection import BrokerConnection
    from minilog.connector.client.security import client_security
    from minilog.connector.client.types import KafkaConnectionError
    from minilog.connector.protocol import ApiKey, KafkaError, request
    schema = request(ApiKey.CREATE_ACLS)
    body = schema.cls(creations=[schema.make(
        "creations", resource_type=ResourceType.CLUSTER, resource_name="kafka-cluster",
        resource_pattern_type=PatternType.LITERAL, principal=f"User:{BROKER}", host="*",
        operation=AclOperation.CLUSTER_ACTION, permission_type=PermissionType.ALLOW)])
    deadline = time.monotonic() + timeout
    last = "no controller answered"
    while time.monotonic() < deadline:
        for port in controller_ports:
            security = client_security(Config("admin", {
                **client, "bootstrap.servers": f"127.0.0.1:{port}"}))
            conn = BrokerConnection("127.0.0.1", port, client_id="minilog-cluster",
                                    connect_timeout=5, request_timeout=15, security=security)
            try:
                await conn.connect()
                result = (await conn.send(ApiKey.CREATE_ACLS, body, timeout=15)).results[0]
                if not result.error_code:
                    return
                last = f"error {result.error_code}: {result.error_message}"
            except (KafkaError, KafkaConnectionError, OSError) as e:
                last = str(e)
            finally:
                conn.close()
        await asyncio.sleep(0.5)
    raise SecureSetupError(f"could not allow the brokers CLUSTER_ACTION: {last}")


def write_client_properties(data_dir: Path, client: dict, bootstrap: str) -> Path:
    path = data_dir / CLIENT_PROPERTIES
    write_properties(path, {"bootstrap.servers": bootstrap, **client},
                     "the admin user of this cluster (a super user): keep this file private")
    return path


def write_node_properties(data_dir: Path, settings: dict, roles: dict) -> tuple[list, dict]:
    """The nodes' secured settings (passwords and logins among them) in properties files only
    their owner reads, DIR/security/<role>.properties, so that no password is in a process's
    command line (/proc/PID/cmdline) or in cluster.json: (the arguments every node starts
    with, those of each role), each a file's path, `minilog broker start`'s properties file."""
    directory = data_dir / "security"
    directory.mkdir(parents=True, exist_ok=True)
    files = {role: {**settings, **values} for role, values in roles.items()} or \
        {"node": settings}
    paths = {}
    for role, values in files.items():
        paths[role] = directory / f"{role}.properties"
        write_properties(paths[role], values, f"the {role}s' secured settings: keep private")
    if roles:
        return [], {role: [str(path)] for role, path in paths.items()}
    return [str(paths["node"])], {}


def client_settings(data_dir: Path) -> dict:
    """DIR/client.properties as a client config ({} for a PLAINTEXT cluster)."""
    from minilog.connector.properties import read_properties
    path = Path(data_dir) / CLIENT_PROPERTIES
    return read_properties(path) if path.exists() else {}
