"""`controller.quorum.bootstrap.servers` (KIP-853), the setting of Kafka 4's stock server.properties.

Kafka 4 replaces the static `controller.quorum.voters` (id@host:port of every voter) with a
dynamic quorum: nodes learn the voters from the bootstrap controllers, and `kafka-storage.sh
format --standalone` makes the first controller a quorum of one voter, itself, which more
controllers join later (AddRaftVoter). minilog's quorum has a fixed voter set, so it takes the
case Kafka's quick start uses: bootstrap servers that name only this node's own controller
listener start the same one-voter quorum, with no formatting step. Anything else (several
bootstrap controllers, a controller joining one elsewhere, a broker-only node, which would
learn the voters' ids from them) is refused in one line naming what to set instead.
"""
from __future__ import annotations

from ..config.listeners import Listener

_WILDCARD = ("", "0.0.0.0", "::")
_LOCAL = ("localhost", "127.0.0.1", "::1")


class QuorumBootstrapError(ValueError):
    """A `controller.quorum.bootstrap.servers` minilog cannot start from; says what to set."""


def _servers(spec: str) -> list[tuple[str, int]]:
    out = []
    for item in (s.strip() for s in spec.split(",") if s.strip()):
        host, _, port = item.rpartition(":")
        if not host or not port.isdigit():
            raise QuorumBootstrapError(f"controller.quorum.bootstrap.servers: expected "
                                       f"host:port, got {item!r}")
        out.append((host.strip("[]"), int(port)))
    return out


def _is_own(server: tuple[str, int], listeners: list[Listener]) -> bool:
    """Whether `server` is one of this node's controller listeners, as bound or advertised."""
    host, port = server
    for lst in listeners:
        if (host, port) == (lst.advertised_host, lst.advertised_port):
            return True
        if port == lst.port and (host == lst.host or (lst.host in _WILDCARD and host in _LOCAL)):
            return True
    return False


def standalone_voters(spec: str, node_id: int, roles: frozenset,
                      controller_listeners: list[Listener]) -> dict[int, tuple[str, int]]:
    """{node id: (host, port)}: the one-voter quorum of this node that `spec` names, as
    `kafka-storage.sh format --standalone` prepares it; QuorumBootstrapError otherwise."""
    servers = _servers(spec)
    if not servers:
        raise QuorumBootstrapError("controller.quorum.bootstrap.servers is empty")
    voters_instead = ("set controller.quorum.voters=ID@HOST:PORT,... on every node (a static "
                      "quorum) instead")
    if "controller" not in roles:
        raise QuorumBootstrapError(
            f"process.roles=broker with controller.quorum.bootstrap.servers is not supported "
            f"yet (minilog does not discover the voters from the bootstrap controllers): "
            f"{voters_instead}")
    if len(servers) > 1:
        raise QuorumBootstrapError(
            f"controller.quorum.bootstrap.servers names {len(servers)} controllers: minilog's "
            f"dynamic quorum (KIP-853) starts only a one-voter quorum of the node itself "
            f"(as kafka-storage.sh format --standalone) and does not add voters yet; "
            f"{voters_instead}")
    if not _is_own(servers[0], controller_listeners):
        host, port = servers[0]
        raise QuorumBootstrapError(
            f"controller.quorum.bootstrap.servers={host}:{port} is not this node's controller "
            f"listener: joining another controller's quorum (AddRaftVoter) is not supported "
            f"yet; {voters_instead}")
    return {node_id: servers[0]}


def single_broker_voters(node_id: int, advertised: tuple[str, int],
                         bound_port: int | None) -> dict[int, tuple[str, int]]:
    """{node id: (host, port)}: the one-voter quorum of a broker started without
    `controller.quorum.voters`, on its own primary listener as KRaft's combined mode serves the
    quorum (an ephemeral port as bound). It reaches no other node: it elects itself at once and
    registers with the controller it is."""
    host, port = advertised
    return {node_id: (host or "127.0.0.1", port or bound_port or 0)}
