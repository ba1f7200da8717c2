"""How this node connects to the other nodes of its cluster, as Kafka's brokers do.

Two kinds of traffic, each on its own listener and with that listener's security protocol:
- to the controller quorum (Raft's Vote, BeginQuorumEpoch and metadata Fetch, registrations and
  heartbeats, AlterPartition, forwarded requests): the controller listener
  (`BrokerConfig.controller_listener`, where `controller.quorum.voters` points), SASL with
  `sasl.mechanism.controller.protocol`;
- between brokers (replica fetching, transaction markers): the peer's registered address on
  `inter.broker.listener.name` (`BrokerConfig.inter_broker_listener`), SASL with
  `sasl.mechanism.inter.broker.protocol`.
A node logs in with the username and password of that listener's JAAS entry, trusts
`ssl.truststore.location`, and presents `ssl.keystore.location` when the listener requires
client certificates. A combined node with no listener of its own for the controller serves the
quorum on a broker listener: then both kinds share it (and its SASL mechanism).
"""
from minilog.connector.client.config import Config
from minilog.connector.client.security import ClientSecurity, client_security
from minilog.connector.client.types import ConfigError as ClientConfigError

from .config import BrokerConfig, ConfigError
from ..config.listeners import Listener, listener_setting


def _security(config: BrokerConfig, listener: Listener, mechanism_key: str
              ) -> ClientSecurity | None:
    """The client security of connections to peers' `listener` (None: PLAINTEXT)."""
    if not listener.secure:
        return None
    values = config.values
    # the client's settings, validated as a client's; only its security is used, peers'
    # addresses come from the metadata
    settings = {"security.protocol": listener.protocol,
                "bootstrap.servers": f"{listener.advertised_host or '127.0.0.1'}:"
                                     f"{listener.advertised_port or 1}"}
    if listener.tls:
        settings["ssl.ca.location"] = listener_setting(values, listener.name,
                                                       "ssl.truststore.location")
        if (listener_setting(values, listener.name, "ssl.client.auth") or "none") != "none":
            settings["ssl.certificate.location"] = listener_setting(
                values, listener.name, "ssl.keystore.location")
            settings["ssl.key.password"] = listener_setting(values, listener.name,
                                                            "ssl.key.password")
    if listener.sasl:
        mechanism = (config[mechanism_key] or "").upper()
        jaas = listener_setting(values, listener.name, "sasl.jaas.config", mechanism)
        if mechanism == "GSSAPI" or not jaas:
            raise ConfigError(f"nodes log in to each other on {listener.name} with "
                              f"{mechanism_key} (PLAIN or SCRAM-SHA-256/512) and the username "
                              f"and password of listener.name.{listener.name.lower()}"
                              f".<mechanism>.sasl.jaas.config")
        settings.update({"sasl.mechanism": mechanism, "sasl.jaas.config": jaas})
    try:
        return client_security(Config("admin", settings))
    except ClientConfigError as e:
        raise ConfigError(f"connections to peers on {listener.name}: {e}") from None


def inter_broker_security(config: BrokerConfig) -> ClientSecurity | None:
    """The client security of connections to other brokers (None: PLAINTEXT); raises
    ConfigError. A controller-only node talks to controllers only: its controller security."""
    if config.controller_only:
        return controller_security(config)
    return _security(config, config.inter_broker_listener,
                     "sasl.mechanism.inter.broker.protocol")


def controller_security(config: BrokerConfig) -> ClientSecurity | None:
    """The client security of connections to the controller quorum (None: PLAINTEXT)."""
    listener = config.controller_listener
    shared = listener.name not in config.controller_listener_names
    return _security(config, listener, "sasl.mechanism.inter.broker.protocol" if shared
                     else "sasl.mechanism.controller.protocol")
