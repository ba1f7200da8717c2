"""Which broker settings are secrets, so that no answer, table or log line ever shows one.

Kafka types these settings `ConfigDef.Type.PASSWORD`: DescribeConfigs answers them with a null
value and `is_sensitive=true` to every principal, super users included, and its logs print
`[hidden]` in their place. minilog's own `sasl.scram` (the bootstrap users with their
passwords) is one too. A per-listener form (`listener.name.<l>.<key>`, or
`listener.name.<l>.<mechanism>.<key>`) is what its base key is; a key whose type cannot be
told is treated as sensitive, as Kafka's `KafkaConfig.maybeSensitive` does ("to be safe").
"""
from ..config.listeners import is_listener_setting, overridden_key

# Kafka's PASSWORD-typed broker settings (KafkaConfig, SslConfigs, SaslConfigs), and ours.
PASSWORD_KEYS = frozenset({
    "sasl.jaas.config", "sasl.scram",
    "ssl.key.password", "ssl.keystore.password", "ssl.truststore.password",
    "ssl.keystore.key", "ssl.keystore.certificate.chain", "ssl.truststore.certificates",
    "sasl.oauthbearer.client.credentials.client.secret",
    "sasl.oauthbearer.assertion.private.key.passphrase",
    "password.encoder.secret", "password.encoder.old.secret",
    "delegation.token.master.key", "delegation.token.secret.key",
})


def is_sensitive(key: str) -> bool:
    """True for a password-type setting, in any of its per-listener forms; also for a
    per-listener key whose base minilog does not know (its type cannot be told)."""
    base = overridden_key(key)
    if base is None:
        return key in PASSWORD_KEYS
    return base in PASSWORD_KEYS or not is_listener_setting(key)

