"""How this broker connects to the other nodes of its cluster: replication, the Raft quorum,
registration and heartbeats, forwarded requests. They go to the peers' first listener (the one
brokers register first and `controller.quorum.voters` names), so `inter.broker.listener.name`
and the controller listener must be that listener, and its security protocol is the one peer
connections speak: TLS trusting `ssl.truststore.location` (presenting `ssl.keystore.location`
when the listener requires client certificates), SASL with
`sasl.mechanism.inter.broker.protocol` and the username and password of that listener's JAAS
entry, as Kafka's brokers log in to each other.
"""
from minilog.connector.client.config import Config
from minilog.connector.client.security import ClientSecurity, client_security
from minilog.connector.client.types import ConfigError as ClientConfigError

from .config import BrokerConfig, ConfigError
from .listeners import listener_setting


def _check_names(config: BrokerConfig) -> None:
    primary = config.listeners[0]
    name = config["inter.broker.listener.name"]
    if name and name.strip().upper() != primary.name:
        raise ConfigError(f"inter.broker.listener.name={name}: brokers reach each other on "
                          f"their first listener, {primary.name}; list {name} first")
    protocol = config["security.inter.broker.protocol"]
    if protocol and protocol.strip().upper() != primary.protocol:
        raise ConfigError(f"security.inter.broker.protocol={protocol}: the first listener, "
                          f"{primary.name}, speaks {primary.protocol}")


def inter_broker_security(config: BrokerConfig) -> ClientSecurity | None:
    """The client security of peer connections (None: PLAINTEXT); raises ConfigError."""
    _check_names(config)
    primary = config.listeners[0]
    if not primary.secure:
        return None
    values = config.values
    # the client's settings, validated as a client's; only its security is used, peers'
    # addresses come from the metadata
    settings = {"security.protocol": primary.protocol,
                "bootstrap.servers": f"{primary.advertised_host}:{primary.advertised_port or 1}"}
    if primary.tls:
        settings["ssl.ca.location"] = listener_setting(values, primary.name,
                                                       "ssl.truststore.location")
        if (listener_setting(values, primary.name, "ssl.client.auth") or "none") != "none":
            settings["ssl.certificate.location"] = listener_setting(
                values, primary.name, "ssl.keystore.location")
            settings["ssl.key.password"] = listener_setting(values, primary.name,
                                                            "ssl.key.password")
    if primary.sasl:
        mechanism = (config["sasl.mechanism.inter.broker.protocol"] or "").upper()
        jaas = listener_setting(values, primary.name, "sasl.jaas.config", mechanism)
        if mechanism == "GSSAPI" or not jaas:
            raise ConfigError(f"brokers log in to each other on {primary.name} with "
                              f"sasl.mechanism.inter.broker.protocol (PLAIN or SCRAM-SHA-256/512) "
                              f"and the username and password of listener.name."
                              f"{primary.name.lower()}.<mechanism>.sasl.jaas.config")
        settings.update({"sasl.mechanism": mechanism, "sasl.jaas.config": jaas})
    try:
        return client_security(Config("admin", settings))
    except ClientConfigError as e:
        raise ConfigError(f"inter-broker connections on {primary.name}: {e}") from None
