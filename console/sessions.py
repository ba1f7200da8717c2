"""Browser sessions of the console: a signed cookie naming a session, server-side logins, and
the CSRF token of each session.

Every browser gets a session id, random, in a cookie signed with HMAC-SHA256 under a key made
at start (so a restart logs everyone out, and a cookie cannot be forged or carried to another
console). The cookie is HttpOnly (no script reads it) and SameSite=Strict (no other site's
page sends it). Who logged in on a session, with what password, stays in this process's
memory, never in the cookie: the console needs the password to act as that user towards the
cluster. A session's CSRF token is the HMAC of its id under another purpose, so a form posted
from elsewhere, without the page's token, is refused even where a browser would send the
cookie. Logins expire after `IDLE_TIMEOUT_S` without a request; at most `MAX_LOGINS` are kept
(the oldest is logged out first).
"""
from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from .clients import Credentials

COOKIE = "minilog_console_session"
IDLE_TIMEOUT_S = 8 * 3600.0
MAX_LOGINS = 256


@dataclass(frozen=True)
class Session:
    sid: str
    user: Credentials | None  # None: nobody logged in on this session
    new: bool = False         # the cookie must be (re)set on the response


class SessionStore:
    def __init__(self, clock: Callable[[], float] = time.monotonic,
                 idle_timeout: float = IDLE_TIMEOUT_S, max_logins: int = MAX_LOGINS) -> None:
        self._key = secrets.token_bytes(32)
        self._clock = clock
        self._idle = idle_timeout
        self._max = max_logins
        self._logins: OrderedDict[str, tuple[Credentials, float]] = OrderedDict()

    def _mac(self, purpose: str, sid: str) -> str:
        return hmac.new(self._key, f"{purpose}:{sid}".encode(), hashlib.sha256).hexdigest()

    def cookie_value(self, session: Session) -> str:
        return f"{session.sid}.{self._mac('cookie', session.sid)}"

    def csrf_token(self, session: Session) -> str:
        return self._mac("csrf", session.sid)

    def csrf_valid(self, session: Session, token: str | None) -> bool:
        return bool(token) and hmac.compare_digest(self.csrf_token(session), token)

    def session(self, cookie: str | None) -> Session:
        """The session a request's cookie names, or a new one when it has none, or one
        this console did not sign, or whose login expired."""
        sid, _, mac = (cookie or "").partition(".")
        if not sid or not hmac.compare_digest(self._mac("cookie", sid), mac):
            return Session(secrets.token_urlsafe(24), None, new=True)
        found = self._logins.pop(sid, None)
        if found is None or self._clock() - found[1] > self._idle:
            return Session(sid, None)
        self._logins[sid] = (found[0], self._clock())  # the most recently used last
        return Session(sid, found[0])

    def log_in(self, user: Credentials) -> Session:
        """A new session (a new id: one fixed before login must not carry it) for `user`."""
        session = Session(secrets.token_urlsafe(24), user, new=True)
        self._logins[session.sid] = (user, self._clock())
        while len(self._logins) > self._max:
            self._logins.popitem(last=False)
        return session

    def live_users(self, limit: int) -> list[Credentials]:
        """The users of the logins not yet expired, one per username (its latest login), the
        most recently active first, at most `limit`."""
        now, seen, out = self._clock(), set(), []
        for user, last in reversed(self._logins.values()):
            if now - last > self._idle or user.username in seen:
                continue
            seen.add(user.username)
            out.append(user)
            if len(out) == limit:
                break
        return out

    def log_out(self, session: Session) -> Session:
        self._logins.pop(session.sid, None)
        return Session(secrets.token_urlsafe(24), None, new=True)
