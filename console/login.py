"""Logging in to the console with one of the cluster's SASL users, and out.

The console has no users of its own: a login is checked by authenticating to the cluster as
that user (SaslHandshake and SaslAuthenticate, through an admin client of the pool that then
serves that user's pages), with the mechanism the console's settings name, or else each of SCRAM-SHA-512, SCRAM-SHA-256
and PLAIN in turn until the cluster accepts one (a user may have a credential for only one). What the user may see and do is
then what the cluster's ACLs allow that principal, as with any other client.
"""
from __future__ import annotations

from urllib.parse import parse_qsl

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from minilog.connector.client import ErrorCode, KafkaError

from .clients import ClientPool, Credentials
from .pages import page

LOGIN_TIMEOUT_S = 30.0
DEFAULT_MECHANISMS = ("SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN")
_REFUSED = (ErrorCode.SASL_AUTHENTICATION_FAILED, ErrorCode.ILLEGAL_SASL_STATE)


class LoginRefused(Exception):
    """Why a login did not succeed, in words for the login page."""


def mechanisms(config: dict) -> tuple[str, ...]:
    named = config.get("sasl.mechanism")
    return (str(named).upper(),) if named else DEFAULT_MECHANISMS


async def authenticate(pool: ClientPool, tried: tuple[str, ...], username: str,
                       password: str) -> Credentials:
    """The credentials of a user the cluster authenticates, else LoginRefused."""
    if not username or not password:
        raise LoginRefused("enter a username and a password")
    refused = False
    for mechanism in tried:  # a user may have a credential for one mechanism only
        user = Credentials(username, password, mechanism)
        try:
            await pool.admin(user).list_topics(timeout=LOGIN_TIMEOUT_S)
            return user
        except KafkaError as e:
            await pool.discard(user)
            if e.code in _REFUSED:
                refused = True
            elif e.code != ErrorCode.UNSUPPORTED_SASL_MECHANISM:
                raise LoginRefused(f"the cluster did not answer: {e}") from None
    if refused:
        raise LoginRefused("wrong username or password")
    raise LoginRefused(f"the cluster accepts none of the SASL mechanisms {', '.join(tried)}")


def safe_next(target: str | None) -> str:
    """Where to go after logging in: a path of this console only (never another site)."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target


async def login_page(request: Request) -> Response:
    return page(request, "login.html", next=safe_next(request.query_params.get("next")),
                error=None, username="")


async def log_in(request: Request) -> Response:
    app_state = request.app.state
    form = dict(parse_qsl((await request.body()).decode("utf-8", "replace")))
    target = safe_next(form.get("next"))
    username = form.get("username", "")
    try:
        user = await authenticate(app_state.console.clients, app_state.policy.mechanisms,
                                  username, form.get("password", ""))
    except LoginRefused as e:
        return page(request, "login.html", status=401, next=target, error=str(e),
                    username=username)
    request.state.session = app_state.sessions.log_in(user)
    return RedirectResponse(target, status_code=303)


async def log_out(request: Request) -> Response:
    request.state.session = request.app.state.sessions.log_out(request.state.session)
    return RedirectResponse("/login", status_code=303)
