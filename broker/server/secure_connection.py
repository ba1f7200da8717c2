"""Connections on secured listeners: TLS principals, the SASL handshake, and the session.

A PLAINTEXT listener's connections are `server._Connection`, untouched: nothing here runs per
request there. On any other listener a connection carries a `Session` (its listener and
principal) that the server stamps on each request header. On a SASL listener the connection
first answers only ApiVersions, SaslHandshake and SaslAuthenticate (`broker/security/sasl.py` does
the mechanism work); anything else before authentication closes it, as Kafka does, and a client
that has not authenticated within `connections.authentication.timeout.ms` is disconnected.
Until it has, a frame announcing more than `sasl.server.max.receive.size` bytes closes the
connection (Kafka's fix of CVE-2022-34917: memory is not spent on strangers).
A failed login gets SASL_AUTHENTICATION_FAILED with the same message whatever was wrong, is
logged once, and is answered after `connection.failed.authentication.delay.ms` (Kafka's brake on
clients that retry at once), then the connection closes.

KIP-368: with `connections.max.reauth.ms` set, SaslAuthenticate tells the client how long its
session lasts; a SaslHandshake on the authenticated connection starts a re-authentication (the
requests before it are answered first, in order), and a request arriving after the session
expired closes the connection instead of being served.
"""
import asyncio
import logging
import struct
from dataclasses import dataclass

from minilog.connector.client.jaas import plain_users
from minilog.connector.client.types import ConfigError as ClientConfigError
from minilog.connector.protocol import (
    REQUESTS,
    ApiKey,
    ErrorCode,
    api_name,
    encode_response,
    response,
)

from ..security.access import ANONYMOUS
from ..security.sasl import AuthenticationFailed, IllegalSaslState, SaslAuthenticator
from ..security.tls import principal_of, server_context
from .config import ConfigError
from .inter_broker import controller_security, inter_broker_security
from .handlers import listener_apis
from ..config.listeners import Listener, listener_setting
from .socket_server import (
    BrokerServer,
    _CloseConnection,
    _Connection,
    read_request,
    read_request_header,
)

log = logging.getLogger("minilog.broker.security")

_SIZE = struct.Struct(">i")
_HANDSHAKE_KEY = struct.pack(">h", ApiKey.SASL_HANDSHAKE)  # how a SaslHandshake frame starts
MIN_REAUTH_INTERVAL = 1.0  # seconds; Kafka refuses a re-authentication sooner after the last
_HANDSHAKE = response(ApiKey.SASL_HANDSHAKE)
_AUTHENTICATE = response(ApiKey.SASL_AUTHENTICATE)


@dataclass
class Session:
    """Who is on a connection and through which listener."""
    listener: Listener
    principal: str = ANONYMOUS


class SaslSettings:
    """A SASL listener's mechanisms and PLAIN users, resolved once when the broker starts."""

    def __init__(self, values: dict, listener: Listener):
        enabled = listener_setting(values, listener.name, "sasl.enabled.mechanisms") or ""
        self.mechanisms = [m.strip().upper() for m in enabled.split(",") if m.strip()]
        supported = {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}
        unknown = [m for m in self.mechanisms if m not in supported]
        if unknown or not self.mechanisms:
            raise ConfigError(f"sasl.enabled.mechanisms of listener {listener.name} may list "
                              f"{', '.join(sorted(supported))}, got {enabled!r}")
        self.plain_users = {}
        if "PLAIN" in self.mechanisms:
            jaas = listener_setting(values, listener.name, "sasl.jaas.config", "PLAIN")
            if not jaas:
                raise ConfigError(f"PLAIN on listener {listener.name} needs listener.name."
                                  f"{listener.name.lower()}.plain.sasl.jaas.config with "
                                  f"user_<name>=\"<password>\" entries")
            try:
                self.plain_users = plain_users(jaas)
            except ClientConfigError as e:
                raise ConfigError(str(e)) from None
        self.max_reauth_ms = {}
        for mechanism in self.mechanisms:
            value = listener_setting(values, listener.name, "connections.max.reauth.ms", mechanism)
            try:
                self.max_reauth_ms[mechanism] = int(value or 0)
            except ValueError:
                raise ConfigError(f"connections.max.reauth.ms of listener {listener.name} must "
                                  f"be a number of milliseconds, got {value!r}") from None


class SecureConnection(_Connection):
    """A connection on a listener other than the primary PLAINTEXT one."""

    def __init__(self, server, listener: Listener, sasl: SaslSettings | None):
        super().__init__(server)
        self.tls = listener.tls
        self.session = Session(listener)
        self._sasl = sasl
        self._authenticator = None
        self._raw_tokens = False  # SaslHandshake v0: bare tokens follow, no SaslAuthenticate
        self._deadline = None
        self._expires = None  # the loop time the SASL session ends, None if it never does
        self._reauth_started = None  # the loop time the last re-authentication began
        self._handle = self._authenticating if sasl is not None else self._authenticated
        if sasl is not None:  # CVE-2022-34917: before login, a frame is a SASL token at most
            self.max_frame_size = min(self.max_frame_size,
                                      server.broker.config["sasl.server.max.receive.size"])

    def connection_made(self, transport):
        super().connection_made(transport)
        if self.session.listener.tls:
            self.session.principal = principal_of(transport.get_extra_info("ssl_object"))
        if self._sasl is not None:
            config = self.server.broker.config
            self._authenticator = SaslAuthenticator(self._sasl.mechanisms,
                                                    self._sasl.plain_users,
                                                    self.server.broker.scram.get,
                                                    self._sasl.max_reauth_ms)
            timeout = config["connections.authentication.timeout.ms"] / 1000
            self._deadline = asyncio.get_running_loop().call_later(timeout, self._too_slow)

    def connection_closed(self, exc):
        if self._deadline is not None:
            self._deadline.cancel()
        super().connection_closed(exc)

    def _too_slow(self):
        if not self._authenticator.complete:
            log.info("closing %s: no SASL authentication within "
                     "connections.authentication.timeout.ms", self.peer)
            self.transport.abort()

    def _authenticated(self, frame, peer, closed):
        if self._expires is not None:
            now = asyncio.get_running_loop().time()
            # a SaslHandshake re-authenticates even past the session's end, as in Kafka: it
            # may have waited behind a long request (a JoinGroup) sent before that end
            if bytes(frame[:2]) == _HANDSHAKE_KEY and (
                    self._reauth_started is None
                    or now - self._reauth_started >= MIN_REAUTH_INTERVAL):
                self._reauth_started = now
                self._authenticator.reauthenticate()
                self._handle = self._authenticating
                return self._authenticating(frame, peer, closed)
            if now > self._expires:
                raise _CloseConnection("its SASL session expired (connections.max.reauth.ms) "
                                       "without re-authentication")
        return self.server.handle(frame, peer, closed, self.session)

    async def _authenticating(self, frame, peer, closed):
        if self._raw_tokens:
            return self._raw_token(frame)
        header, body = read_request_header(frame)
        key, version = header.api_key, header.api_version
        if key == ApiKey.API_VERSIONS:
            return await self.server.handle(frame, peer, closed, self.session)
        if key not in (ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE):
            raise _CloseConnection(f"unexpected {api_name(key)} request during SASL handshake")
        req = read_request(key, version, body, REQUESTS[key].versions)
        if key == ApiKey.SASL_HANDSHAKE:
            answer = self._handshake(req.mechanism, version)
        else:
            answer = self._authenticate(req.auth_bytes)
        if self._handle is _ignore:  # failed: answer late, as Kafka does, to slow retries down
            config = self.server.broker.config
            await asyncio.sleep(config["connection.failed.authentication.delay.ms"] / 1000)
        return encode_response(key, version, header.correlation_id, answer)

    def _handshake(self, mechanism, version):
        try:
            chosen = self._authenticator.handshake(mechanism)
        except IllegalSaslState as e:
            self._fail(str(e))
            return _HANDSHAKE.cls(error_code=ErrorCode.ILLEGAL_SASL_STATE,
                                  mechanisms=self._sasl.mechanisms)
        if not chosen:
            self._fail(f"mechanism {mechanism!r} is not enabled")
            return _HANDSHAKE.cls(error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM,
                                  mechanisms=self._sasl.mechanisms)
        self._raw_tokens = version == 0
        return _HANDSHAKE.cls(error_code=0, mechanisms=self._sasl.mechanisms)

    def _authenticate(self, token):
        try:
            reply = self._authenticator.authenticate(token)
        except (AuthenticationFailed, IllegalSaslState) as e:
            self._fail(getattr(e, "reason", str(e)))
            code = ErrorCode.SASL_AUTHENTICATION_FAILED if isinstance(e, AuthenticationFailed) \
                else ErrorCode.ILLEGAL_SASL_STATE
            return _AUTHENTICATE.cls(error_code=code, error_message=str(e), auth_bytes=b"",
                                     session_lifetime_ms=0)
        self._maybe_done()
        return _AUTHENTICATE.cls(error_code=0, error_message=None, auth_bytes=reply,
                                 session_lifetime_ms=self._authenticator.session_lifetime_ms)

    def _raw_token(self, frame):
        """SaslHandshake v0's framing: a bare token in, a bare token out; failing closes."""
        try:
            reply = self._authenticator.authenticate(frame)
        except (AuthenticationFailed, IllegalSaslState) as e:
            log.info("authentication of %s failed: %s", self.peer, getattr(e, "reason", e))
            raise _CloseConnection("authentication failed") from None
        self._maybe_done()
        return [_SIZE.pack(len(reply)), reply]

    def _maybe_done(self):
        if self._authenticator.complete:
            self._raw_tokens = False
            self.session.principal = self._authenticator.principal
            self._deadline.cancel()
            self._handle = self._authenticated
            self.max_frame_size = self.server.broker.config["socket.request.max.bytes"]
            lifetime = self._authenticator.session_lifetime_ms
            self._expires = asyncio.get_running_loop().time() + lifetime / 1000 \
                if lifetime else None

    def _fail(self, reason):
        """Answer this request, then close the connection; later frames go unanswered."""
        log.info("authentication of %s on %s failed: %s", self.peer, self.session.listener.name,
                 reason)
        self._handle = _ignore
        self._deadline.cancel()
        self._queue.appendleft(None)  # the end of the connection, once this answer is sent


async def _ignore(frame, peer, closed):
    return None


def listener_server(broker, listener: Listener, sock=None, primary: bool = False) -> BrokerServer:
    """The server of one listener: the plain one for the primary PLAINTEXT listener, else one
    whose connections carry a session (and TLS, and SASL, as the protocol says). Envelope is
    served on the controller's listener only, as in Kafka (elsewhere it closes the connection):
    forwarding is for brokers, which reach the controller there."""
    if primary and not listener.secure:
        server = BrokerServer(broker, listener.host, listener.port, sock)
    else:
        values = broker.config.values
        sasl = SaslSettings(values, listener) if listener.sasl else None
        server = BrokerServer(
            broker, listener.host, listener.port, sock,
            connection=lambda server: SecureConnection(server, listener, sasl),
            ssl=server_context(values, listener) if listener.tls else None,
            handshake_timeout=broker.config["connections.authentication.timeout.ms"] / 1000)
    server.handlers = listener_apis(broker, listener.name)
    return server


def check_listeners(config) -> None:
    """Build every secured listener's TLS context and SASL settings once, so that a missing
    certificate or user list is a one-line error before the broker binds or recovers."""
    if config.quorum_voters is not None:
        inter_broker_security(config)
        controller_security(config)
    for listener in config.listeners:
        if listener.tls:
            server_context(config.values, listener)
        if listener.sasl:
            SaslSettings(config.values, listener)
