"""Setting names of other Kafka clients: what they mean here, so that a config written for the
Java client or librdkafka (a Spark job's `kafka.*` options, a confluent-kafka dict) works as is.

Three kinds, checked by `config.Config` after its own names (`config.SPEC`):
- ALIASES: another client's name for a setting minilog implements (librdkafka's
  `message.timeout.ms` is `delivery.timeout.ms`); the value is validated as ours.
- JAVA_SERDES: the Java client's (de)serializer class names, for `key.serializer` and friends.
- JAVA_CLIENT and LIBRDKAFKA: every other setting name of those clients; accepted, with one
  warning that it has no effect here (metrics, DNS, Kerberos and OAuth, librdkafka's queue
  tuning, ...).
A name in none of these is a typo or another product's: `Config` raises with a hint.
"""
import struct
import uuid
from collections.abc import Callable
from typing import Any

# A value's serializer or deserializer: (value, topic) -> bytes, or bytes -> value.
Serde = Callable[[Any, str | None], Any]

ALIASES = {
    # librdkafka's names for settings minilog implements under the Java name
    "metadata.broker.list": "bootstrap.servers",
    "message.timeout.ms": "delivery.timeout.ms",
    "queue.buffering.max.ms": "linger.ms",
    "compression.codec": "compression.type",
    "request.required.acks": "acks",
    "message.send.max.retries": "retries",
    "max.in.flight": "max.in.flight.requests.per.connection",
    "message.max.bytes": "max.request.size",
    "topic.metadata.refresh.interval.ms": "metadata.max.age.ms",
    "fetch.wait.max.ms": "fetch.max.wait.ms",
    "fetch.message.max.bytes": "max.partition.fetch.bytes",
    "sasl.mechanisms": "sasl.mechanism",
    # the Java client's PEM files (ssl.*.type=PEM) under librdkafka's names
    "ssl.truststore.location": "ssl.ca.location",
    "ssl.keystore.location": "ssl.certificate.location",
}


def _number(fmt: str) -> tuple[Serde, Serde]:
    codec = struct.Struct(fmt)
    return (lambda v, _topic: None if v is None else codec.pack(v),
            lambda b, _topic: None if b is None else codec.unpack(b)[0])


def _text(encode: bool) -> Serde:
    if encode:
        return lambda v, _topic: None if v is None else str(v).encode("utf-8")
    return lambda b, _topic: None if b is None else bytes(b).decode("utf-8")


_NUMBERS = {"Short": ">h", "Integer": ">i", "Long": ">q", "Float": ">f", "Double": ">d"}
# org.apache.kafka.common.serialization.<Kind>Serializer / <Kind>Deserializer -> callable or
# None (bytes as they are). Values of the same bytes as the Java classes write and read.
JAVA_SERDES: dict[str, Serde | None] = {}
for _kind in ("ByteArray", "ByteBuffer", "Bytes"):
    JAVA_SERDES[f"{_kind}Serializer"] = JAVA_SERDES[f"{_kind}Deserializer"] = None
JAVA_SERDES["StringSerializer"], JAVA_SERDES["StringDeserializer"] = _text(True), _text(False)
JAVA_SERDES["UUIDSerializer"] = _text(True)
JAVA_SERDES["UUIDDeserializer"] = \
    lambda b, _topic: None if b is None else uuid.UUID(bytes(b).decode("utf-8"))
for _kind, _fmt in _NUMBERS.items():
    JAVA_SERDES[f"{_kind}Serializer"], JAVA_SERDES[f"{_kind}Deserializer"] = _number(_fmt)

# Kafka's Java clients (CommonClientConfigs, ProducerConfig, ConsumerConfig,
# AdminClientConfig, SaslConfigs, SslConfigs), less the names `config.SPEC` implements.
JAVA_CLIENT = frozenset({
    "bootstrap.controllers", "client.dns.lookup", "compression.gzip.level",
    "compression.lz4.level", "compression.zstd.level", "connections.max.idle.ms",
    "default.list.key.serde.inner", "default.list.key.serde.type",
    "default.list.value.serde.inner", "default.list.value.serde.type", "enable.metrics.push",
    "exclude.internal.topics", "interceptor.classes",
    "metadata.max.idle.ms", "metadata.recovery.strategy", "metric.reporters",
    "metrics.num.samples", "metrics.recording.level", "metrics.sample.window.ms",
    "partitioner.adaptive.partitioning.enable", "partitioner.availability.timeout.ms",
    "partitioner.class", "partitioner.ignore.keys", "rebalance.timeout.ms",
    "receive.buffer.bytes", "reconnect.backoff.max.ms", "retry.backoff.max.ms",
    "sasl.client.callback.handler.class", "sasl.kerberos.kinit.cmd",
    "sasl.kerberos.min.time.before.relogin", "sasl.kerberos.service.name",
    "sasl.kerberos.ticket.renew.jitter", "sasl.kerberos.ticket.renew.window.factor",
    "sasl.login.callback.handler.class", "sasl.login.class", "sasl.login.connect.timeout.ms",
    "sasl.login.read.timeout.ms", "sasl.login.refresh.buffer.seconds",
    "sasl.login.refresh.min.period.seconds", "sasl.login.refresh.window.factor",
    "sasl.login.refresh.window.jitter", "sasl.login.retry.backoff.max.ms",
    "sasl.login.retry.backoff.ms", "sasl.oauthbearer.clock.skew.seconds",
    "sasl.oauthbearer.expected.audience", "sasl.oauthbearer.expected.issuer",
    "sasl.oauthbearer.header.urlencode", "sasl.oauthbearer.jwks.endpoint.refresh.ms",
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms",
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", "sasl.oauthbearer.jwks.endpoint.url",
    "sasl.oauthbearer.scope.claim.name", "sasl.oauthbearer.sub.claim.name",
    "sasl.oauthbearer.token.endpoint.url", "send.buffer.bytes",
    "socket.connection.setup.timeout.max.ms", "ssl.cipher.suites", "ssl.enabled.protocols",
    "ssl.engine.factory.class", "ssl.keymanager.algorithm", "ssl.keystore.certificate.chain",
    "ssl.keystore.key", "ssl.keystore.password", "ssl.protocol",
    "ssl.provider", "ssl.secure.random.implementation", "ssl.trustmanager.algorithm",
    "ssl.truststore.certificates", "ssl.truststore.password"
})

# librdkafka's CONFIGURATION.md (global and topic properties), less the names `config.SPEC`
# implements and the ones ALIASES maps.
LIBRDKAFKA = frozenset({
    "api.version.fallback.ms", "api.version.request", "api.version.request.timeout.ms",
    "auto.commit.enable", "background_event_cb", "batch.num.messages", "broker.address.family",
    "broker.address.ttl", "broker.version.fallback", "builtin.features", "client.dns.lookup",
    "closesocket_cb", "compression.level", "connect_cb", "connections.max.idle.ms",
    "consume.callback.max.messages", "consume_cb", "coordinator.query.interval.ms", "debug",
    "default_topic_conf", "delivery.report.only.error", "dr_cb", "dr_msg_cb",
    "enable.auto.offset.store", "enable.gapless.guarantee", "enable.metrics.push",
    "enable.partition.eof", "enable.random.seed", "enable.sasl.oauthbearer.unsecure.jwt",
    "enable.ssl.certificate.verification", "enabled_events",
    "fetch.error.backoff.ms", "fetch.queue.backoff.ms", "group.protocol.type",
    "https.ca.location", "https.ca.pem", "interceptors",
    "internal.termination.signal", "log.connection.close", "log.queue", "log.thread.name",
    "log_cb", "log_level", "message.copy.max.bytes", "metadata.recovery.rebootstrap.trigger.ms",
    "metadata.recovery.strategy", "msg_order_cmp", "oauthbearer_token_refresh_cb",
    "offset.store.method", "offset.store.path", "offset.store.sync.interval.ms",
    "offset_commit_cb", "opaque", "open_cb", "partitioner_cb", "plugin.library.paths",
    "produce.offset.report", "queue.buffering.backpressure.threshold",
    "queue.buffering.max.kbytes", "queue.buffering.max.messages", "queued.max.messages.kbytes",
    "queued.min.messages", "queuing.strategy", "rebalance_cb", "reconnect.backoff.jitter.ms",
    "reconnect.backoff.max.ms", "resolve_cb", "retry.backoff.max.ms", "sasl.kerberos.keytab",
    "sasl.kerberos.kinit.cmd", "sasl.kerberos.min.time.before.relogin",
    "sasl.kerberos.principal", "sasl.kerberos.service.name",
    "sasl.oauthbearer.assertion.algorithm",
    "sasl.oauthbearer.assertion.claim.aud", "sasl.oauthbearer.assertion.claim.exp.seconds",
    "sasl.oauthbearer.assertion.claim.iss", "sasl.oauthbearer.assertion.claim.jti.include",
    "sasl.oauthbearer.assertion.claim.nbf.seconds", "sasl.oauthbearer.assertion.claim.sub",
    "sasl.oauthbearer.assertion.file", "sasl.oauthbearer.assertion.jwt.template.file",
    "sasl.oauthbearer.assertion.private.key.file",
    "sasl.oauthbearer.assertion.private.key.passphrase",
    "sasl.oauthbearer.assertion.private.key.pem",
    "sasl.oauthbearer.client.credentials.client.id",
    "sasl.oauthbearer.client.credentials.client.secret", "sasl.oauthbearer.client.id",
    "sasl.oauthbearer.client.secret", "sasl.oauthbearer.config", "sasl.oauthbearer.extensions",
    "sasl.oauthbearer.grant.type", "sasl.oauthbearer.metadata.authentication.type",
    "sasl.oauthbearer.method", "sasl.oauthbearer.scope", "sasl.oauthbearer.sub.claim.name",
    "sasl.oauthbearer.token.endpoint.url", "share.acknowledgement.mode",
    "socket.blocking.max.ms", "socket.keepalive.enable",
    "socket.max.fails", "socket.nagle.disable", "socket.receive.buffer.bytes",
    "socket.send.buffer.bytes", "socket.timeout.ms", "socket_cb", "ssl.ca.certificate.stores",
    "ssl.ca.pem", "ssl.certificate.pem", "ssl.certificate.verify_cb", "ssl.cipher.suites",
    "ssl.crl.location", "ssl.curves.list", "ssl.engine.id", "ssl.engine.location", "ssl.key.pem",
    "ssl.keystore.password", "ssl.providers", "ssl.sigalgs.list", "ssl_ca", "ssl_certificate",
    "ssl_engine_callback_data", "ssl_key", "statistics.interval.ms", "stats_cb",
    "sticky.partitioning.linger.ms", "throttle_cb", "topic.blacklist",
    "topic.metadata.propagation.max.ms", "topic.metadata.refresh.fast.cnt",
    "topic.metadata.refresh.fast.interval.ms", "topic.metadata.refresh.sparse",
})
