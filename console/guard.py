"""What the console checks before any page: who may ask it, and who may change anything.

In order, for every request: the `Host` header must name this console (an allow-list, the
listen address by default: a page of another site whose name resolves here, by DNS
rebinding, is answered 400); a request that changes something (any method but GET and HEAD)
must come from the console's own pages: an `Origin` header naming another site is refused,
and so is a form without the session's CSRF token (403); where users log in, a request
without a login is sent to /login (303); a read-only console refuses every change (403) but
logging in and out. The session (sessions.py) is on `request.state.session` for the pages.
"""
from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import parse_qsl, quote, urlsplit

from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response

from .sessions import COOKIE, Session, SessionStore

SAFE_METHODS = ("GET", "HEAD")
LOGIN_PATHS = ("/login", "/logout")
CSRF_FIELD = "csrf_token"
MAX_FORM_BYTES = 256 * 1024  # the console's forms are small: a larger body is refused unread
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def default_hosts(listen_host: str) -> frozenset[str]:
    """The Host names a console listening on `listen_host` answers to by default: that
    address (with the loopback names when it is loopback); for a wildcard address, this
    machine's name and addresses and the loopback names."""
    names = {listen_host.lower()}
    if is_loopback(listen_host):
        names.update(LOOPBACK_NAMES)
    elif listen_host in ("", "0.0.0.0", "::"):
        hostname = socket.gethostname()
        names.update((hostname.lower(), socket.getfqdn().lower(), *LOOPBACK_NAMES))
        try:
            names.update(socket.gethostbyname_ex(hostname)[2])
        except OSError:
            pass
    return frozenset(names)


def host_name(header: str) -> str:
    """The name in a `Host` header or an origin's netloc, without its port."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:].partition("]")[0]
    return header.rpartition(":")[0] if header.count(":") == 1 else header


@dataclass(frozen=True)
class Policy:
    login: bool                  # users log in with the cluster's SASL users
    mechanisms: tuple[str, ...]  # SASL mechanisms tried at login, in order
    allowed_hosts: frozenset[str]
    read_only: bool = False


async def _refusal(request: Request, store: SessionStore, session: Session) -> str | None:
    """Why a state-changing request is refused, or None."""
    length = request.headers.get("content-length", "0")
    if not length.isdigit() or int(length) > MAX_FORM_BYTES:
        return f"refused: a form of more than {MAX_FORM_BYTES} bytes, or of no stated length"
    origin = request.headers.get("origin")
    if origin is not None and urlsplit(origin).netloc.lower() != \
            request.headers.get("host", "").lower():
        return f"refused: a change requested from another site ({origin})"
    form = dict(parse_qsl((await request.body()).decode("utf-8", "replace")))
    if not store.csrf_valid(session, form.get(CSRF_FIELD)):
        return "refused: the form's CSRF token is missing or wrong (reload the page and retry)"
    return None


class Guard(BaseHTTPMiddleware):
    """The checks of the module docstring, with the app's `state.policy` and
    `state.sessions`; sets the session cookie when the session is new."""

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        policy: Policy = request.app.state.policy
        store: SessionStore = request.app.state.sessions
        host = request.headers.get("host", "")
        if host_name(host) not in policy.allowed_hosts:
            return PlainTextResponse(f"this console does not answer to Host {host!r} "
                                     f"(see minilog console --allow-host)\n", status_code=400)
        request.state.session = store.session(request.cookies.get(COOKIE))
        response = await self._checked(request, call_next, policy, store)
        session: Session = request.state.session  # logging in or out replaces it
        if session.new:
            response.set_cookie(COOKIE, store.cookie_value(session), httponly=True,
                                samesite="strict", path="/")
        return response

    async def _checked(self, request: Request, call_next: RequestResponseEndpoint,
                       policy: Policy, store: SessionStore) -> Response:
        session: Session = request.state.session
        changes = request.method not in SAFE_METHODS
        if changes:
            refused = await _refusal(request, store, session)
            if refused:
                return PlainTextResponse(refused + "\n", status_code=403)
        path = request.url.path
        if policy.login and session.user is None and path not in LOGIN_PATHS:
            wanted = path + (f"?{request.url.query}" if request.url.query else "")
            return RedirectResponse(f"/login?next={quote(wanted, safe='')}", status_code=303)
        if changes and policy.read_only and path not in LOGIN_PATHS:
            return PlainTextResponse("refused: this console is read-only\n", status_code=403)
        return await call_next(request)
