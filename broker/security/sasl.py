"""The server side of SASL authentication, sans-IO: tokens in, tokens out, a principal at the end.

`SaslAuthenticator` follows one connection through Kafka's handshake: SaslHandshake picks a
mechanism among those the listener enables, then each SaslAuthenticate carries one token of
that mechanism's exchange. PLAIN (RFC 4616) checks a password against the listener's JAAS
users; SCRAM-SHA-256/512 (RFC 5802/7677) runs through `scramp` against salted credentials.
Every failure raises `AuthenticationFailed` with the same message whatever went wrong, so a
client learns nothing about which of user or password it got wrong.

Re-authentication (KIP-368) runs the same exchange again on an authenticated connection; as in
Kafka it must keep the mechanism and end with the same principal, else it fails.
"""
import hmac
from collections.abc import Callable

from scramp import ScramException, ScramMechanism

from .scram_credentials import MECHANISM_CODES, ScramCredential


class AuthenticationFailed(Exception):
    """The one answer to a bad login; `reason` is for the broker's log only."""

    def __init__(self, mechanism: str, reason: str, during: str = "authentication",
                 message: str | None = None):
        super().__init__(message or f"Authentication failed during {during} due to invalid "
                                    f"credentials with SASL mechanism {mechanism}")
        self.reason = reason


class IllegalSaslState(Exception):
    pass


class _Plain:
    def __init__(self, users: dict):
        self._users = users
        self.done = False
        self.user = None

    def step(self, token: bytes) -> bytes:
        parts = bytes(token).split(b"\0")
        if len(parts) != 3:
            raise AuthenticationFailed("PLAIN", "malformed PLAIN token")
        authzid, user, password = (p.decode("utf-8", "replace") for p in parts)
        if authzid and authzid != user:
            raise AuthenticationFailed("PLAIN", f"authorization id {authzid!r} is not {user!r}")
        expected = self._users.get(user)
        # compare even for an unknown user, so timing does not tell which one was wrong
        good = hmac.compare_digest((expected or "\0").encode(), password.encode())
        if expected is None or not good:
            raise AuthenticationFailed("PLAIN", f"wrong password or unknown user {user!r}")
        self.done, self.user = True, user
        return b""


class _Scram:
    def __init__(self, mechanism: str, lookup: Callable[[str, str], ScramCredential | None]):
        self.mechanism = mechanism
        self._lookup = lookup
        self._server = ScramMechanism(mechanism).make_server(self._auth_info)
        self._round = 0
        self._asked = None
        self.done = False
        self.user = None

    def _auth_info(self, user: str):
        self._asked = user
        cred = self._lookup(user, self.mechanism)
        if cred is None:
            raise ScramException("unknown user")
        return cred.salt, cred.stored_key, cred.server_key, cred.iterations

    def step(self, token: bytes) -> bytes:
        try:
            text = bytes(token).decode("utf-8")
            if self._round == 0:
                self._round = 1
                header, bare = self._gs2_header(text)
                self._server.set_client_first("n,," + bare)
                if header != "n,,":  # the client's binding input (c=) is its own header
                    self._server.gs2_header = _ClientGs2Header(header)
                return self._server.get_server_first().encode()
            if self._round == 1:
                self._round = 2
                self._accept_kafkas_nonce(text)
                self._server.set_client_final(text)
                final = self._server.get_server_final().encode()
                self.done, self.user = True, self._asked
                return final
        except (ScramException, UnicodeDecodeError) as e:
            raise AuthenticationFailed(self.mechanism,
                                       f"{e} (user {self._asked!r})") from None
        raise AuthenticationFailed(self.mechanism, "token after the exchange ended")

    def _gs2_header(self, client_first: str) -> tuple[str, str]:
        """(GS2 header, client-first-message-bare) as Kafka's ScramSaslServer takes them: the
        channel-binding flag `n` only (Kafka's SCRAM has no channel binding, so `y` and `p`
        are refused), and an authorization id only when it is the username itself."""
        if not client_first.startswith("n,"):
            raise AuthenticationFailed(self.mechanism, "the GS2 channel-binding flag must be "
                                       "'n' (no channel binding)")
        end = client_first.find(",", 2)
        if end < 0:
            raise AuthenticationFailed(self.mechanism, "malformed client-first message")
        authzid, bare = client_first[2:end], client_first[end + 1:]
        if authzid:
            user = next((a[2:] for a in bare.split(",") if a.startswith("n=")), None)
            if not authzid.startswith("a=") or authzid[2:] != user:
                raise AuthenticationFailed(self.mechanism, "the authorization id differs from "
                                           "the username")
        return client_first[:end + 1], bare

    def _accept_kafkas_nonce(self, client_final: str) -> None:
        """Kafka checks that the client-final nonce *ends with* the server-first one, and
        librdkafka 2.0 (Debian's kcat) relies on it: it sends its own nonce once more in front.
        The proof covers the message as sent, so taking its nonce weakens nothing."""
        sent = next((a[2:] for a in client_final.split(",") if a.startswith("r=")), None)
        ours = self._server.nonce  # scramp keeps it as its own Nonce type (a str in older ones)
        if sent is not None and ours and sent != str(ours) and sent.endswith(str(ours)):
            self._server.nonce = type(ours)(sent)


class _ClientGs2Header:
    """The GS2 header a client sent with its authorization id, as scramp checks the
    client-final message's channel binding (`c=`) against it: base64 of the header itself."""

    def __init__(self, header: str):
        self._header = header

    def make_cbind_input(self, channel_binding) -> bytes:
        return self._header.encode()


class SaslAuthenticator:
    """One connection's SASL state: mechanism chosen, exchange under way, principal found.

    `max_reauth_ms` maps a mechanism to its `connections.max.reauth.ms` (absent or 0: the
    session never expires); `session_lifetime_ms` is what SaslAuthenticate tells the client."""

    def __init__(self, enabled: list, plain_users: dict,
                 scram_lookup: Callable[[str, str], ScramCredential | None],
                 max_reauth_ms: dict | None = None):
        self.enabled = enabled
        self._plain_users = plain_users
        self._scram_lookup = scram_lookup
        self._max_reauth_ms = max_reauth_ms or {}
        self.mechanism = None
        self._exchange = None
        self.principal = None
        self._previous = None  # (mechanism, principal) while re-authenticating
        self._bad_mechanism = None  # Kafka's message for a mechanism changed on re-auth

    @property
    def session_lifetime_ms(self) -> int:
        return max(0, int(self._max_reauth_ms.get(self.mechanism) or 0)) if self.complete else 0

    def reauthenticate(self) -> None:
        """Start over on an authenticated connection (KIP-368): a SaslHandshake came."""
        if not self.complete:
            raise IllegalSaslState("re-authentication before authentication completed")
        self._previous = (self.mechanism, self.principal)
        self.mechanism = self._exchange = self.principal = self._bad_mechanism = None

    def handshake(self, mechanism: str) -> bool:
        """Choose `mechanism`; False when the listener does not enable it."""
        if self._exchange is not None:
            raise IllegalSaslState("SaslHandshake after a mechanism was chosen")
        if mechanism not in self.enabled:
            return False
        if self._previous is not None and mechanism != self._previous[0]:
            # accepted, then refused at SaslAuthenticate, as Kafka's REAUTH_BAD_MECHANISM
            self._bad_mechanism = (f"SASL mechanism '{mechanism}' requested by client is not "
                                   f"supported for re-authentication of mechanism "
                                   f"'{self._previous[0]}'")
        self.mechanism = mechanism
        if mechanism == "PLAIN":
            self._exchange = _Plain(self._plain_users)
        elif mechanism in MECHANISM_CODES:
            self._exchange = _Scram(mechanism, self._scram_lookup)
        else:
            return False
        return True

    def authenticate(self, token: bytes) -> bytes:
        """The server's token for the client's; sets `principal` once the exchange is done."""
        if self._exchange is None:
            raise IllegalSaslState("SaslAuthenticate before SaslHandshake")
        if self._bad_mechanism is not None:
            raise AuthenticationFailed(self.mechanism, self._bad_mechanism,
                                       message=self._bad_mechanism)
        try:
            reply = self._exchange.step(token)
        except AuthenticationFailed as e:
            if self._previous is None:
                raise
            raise AuthenticationFailed(self.mechanism, e.reason, "re-authentication") from None
        if self._exchange.done:
            principal = f"User:{self._exchange.user}"
            if self._previous is not None and principal != self._previous[1]:
                message = (f"Cannot change principals during re-authentication from "
                           f"{_dotted(self._previous[1])}: {_dotted(principal)}")
                raise AuthenticationFailed(self.mechanism, message, message=message)
            self.principal, self._previous = principal, None
        return reply

    @property
    def complete(self) -> bool:
        return self.principal is not None


def _dotted(principal: str) -> str:
    """`User:alice` as Kafka's re-authentication message writes it: `User.alice`."""
    kind, _, name = principal.partition(":")
    return f"{kind}.{name}"
