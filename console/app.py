"""The console's web application: Starlette routes rendering Jinja2 templates, server side.

Pages: `/` overview, `/topics`, `/topics/<name>`, `/topics/<name>/records`, `/groups`,
`/groups/<id>`, and `/connect` for the Kafka Connect workers it was given (connect_view.py). Changes (create, delete, alter a topic) are POSTed forms answered first by a
confirmation page that re-posts them with `confirmed=yes`. Live parts refresh with plain
`fetch` (see base.html). Before any page, `Guard` (guard.py) checks the Host, the origin and
CSRF token of changes, the login and read-only mode. Clients come from one bounded `ClientPool`
(clients.py), on the server's event loop, acting as the logged-in user where users log in
(login.py), else with the console's own settings; a background task samples each group's lag
into the in-memory `LagHistory` as each of those principals (see `sample_lag_forever`).
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any
from urllib.parse import parse_qsl

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from minilog.connector.client import AsyncAdminClient, ErrorCode, KafkaError, NewTopic

from . import cluster_view, connect_view, login, record_browser
from .clients import MAX_ADMINS, ClientPool, Principal
from .guard import CSRF_FIELD, Guard, Policy
from .lag_history import LagHistory, svg_chart
from .pages import page as _page
from .sessions import SessionStore

log = logging.getLogger("minilog.console")

LAG_SAMPLE_INTERVAL_S = 5.0


class ConsoleState:
    """What the console keeps for its lifetime: its clients, the brokers it has seen (a
    broker DescribeCluster stops listing shows as down) and each group's lag history."""

    def __init__(self, config: dict[str, Any], sample_interval: float,
                 connect_urls: tuple[str, ...] = ()) -> None:
        self.config = config
        self.connect_urls = connect_urls
        self.sample_interval = sample_interval
        self.clients = ClientPool(config)
        self.seen_brokers: dict[int, str] = {}
        self.history = LagHistory()

    async def sample_lag_forever(self, principals: Callable[[], list[Principal]]) -> None:
        """Samples every `sample_interval` s, as each of `principals()` (read anew each
        round), what that principal may describe, into that principal's own series.

        Without logins that is the console's own settings. With logins the console has no
        principal of its own: it samples as each logged-in user whose session is live (the
        most recently active, as many as the client pool keeps, so sampling never closes a
        page's client), and a user's series is shown to that user only. Sampling once for
        everyone, with some user's rights, would show a viewer lag computed from offsets and
        topics they may not read; a user no longer logged in is no longer sampled as, and
        their series is forgotten. A failure is logged per principal when it starts or
        changes, and once when sampling works again, not at every round."""
        failing: dict[str | None, str] = {}
        while True:
            live = principals()
            for principal in live:
                viewer = _viewer(principal)
                try:
                    for view in await cluster_view.group_list(self.clients.admin(principal)):
                        if not view.internal:
                            self.history.record(viewer, view.group_id, view.total_lag)
                    if failing.pop(viewer, None) is not None:
                        log.warning("lag sampling as %s works again", viewer or "the console")
                except KafkaError as e:
                    if str(e) != failing.get(viewer):
                        log.warning("lag sampling as %s failed (retried every %g s): %s",
                                    viewer or "the console", self.sample_interval, e)
                    failing[viewer] = str(e)
            self.history.keep_only({_viewer(p) for p in live})
            await asyncio.sleep(self.sample_interval)


def _viewer(principal: Principal) -> str | None:
    """Whose lag history a principal's pages show: a user's name, None for the console."""
    return None if principal is None else principal.username


def _state(request: Request) -> ConsoleState:
    return request.app.state.console


def _principal(request: Request) -> Principal:
    """Who the console acts as for `request`: the logged-in user (the guard let no request
    without one through where users log in), else the console's own settings (None)."""
    return request.state.session.user


def _admin(request: Request) -> AsyncAdminClient:
    return _state(request).clients.admin(_principal(request))


async def overview(request: Request) -> Response:
    return _page(request, "overview.html",
                 **await cluster_view.overview(_admin(request), _state(request).seen_brokers))


async def topics(request: Request) -> Response:
    return _page(request, "topics.html", topics=await cluster_view.topic_list(_admin(request)))


async def topic(request: Request) -> Response:
    return _page(request, "topic.html",
                 **await cluster_view.topic(_admin(request), request.path_params["name"]))


async def groups(request: Request) -> Response:
    views = await cluster_view.group_list(_admin(request))
    return _page(request, "groups.html", groups=[v for v in views if not v.internal],
                 internal=[v for v in views if v.internal])


async def group(request: Request) -> Response:
    state = _state(request)
    view = await cluster_view.group(_admin(request), request.path_params["group_id"])
    viewer = _viewer(_principal(request))
    state.history.record(viewer, view.group_id, view.total_lag)
    return _page(request, "group.html", group=view,
                 chart=svg_chart(state.history.points(viewer, view.group_id)))


async def connect(request: Request) -> Response:
    urls = _state(request).connect_urls
    if not urls:
        return _page(request, "error.html", status=404,
                     message="no Kafka Connect worker: start the console with --connect URL")
    return _page(request, "connect.html", workers=await connect_view.workers(urls))


def _int(value: str | None) -> int | None:
    return int(value) if value not in (None, "") else None


async def records(request: Request) -> Response:
    """The newest records across the topic's partitions unless a partition is chosen (then
    from its beginning, an offset or a timestamp)."""
    state, q, name = _state(request), request.query_params, request.path_params["name"]
    described = await cluster_view.topic(_admin(request), name)
    form = {"partition": q.get("partition", ""), "offset": q.get("offset", ""),
            "timestamp": q.get("timestamp", ""), "limit": q.get("limit", "50"),
            "avro_schema": q.get("avro_schema", "")}
    try:
        shown = await _read_records(request, described, form)
        error = None
    except ValueError as e:
        shown, error = [], f"bad input: {e}"
    return _page(request, "records.html", topic=described, form=form, records=shown,
                 error=error, status=400 if error else 200)


async def _read_records(request: Request, described: dict[str, Any],
                        form: dict[str, str]) -> list[record_browser.ShownRecord]:
    name, limit, avro = described["name"], int(form["limit"]), form["avro_schema"] or None
    if form["partition"] == "" and (form["offset"] or form["timestamp"]):
        raise ValueError("choose a partition to read from an offset or a timestamp")
    async with _state(request).clients.consumer(_principal(request)) as consumer:
        if form["partition"] == "":
            online = [p.partition for p in described["partitions"] if not p.offline]
            return await record_browser.read_newest(consumer, name, online, limit, avro)
        return await record_browser.read(
            consumer, name, int(form["partition"]), offset=_int(form["offset"]),
            timestamp=_int(form["timestamp"]), limit=limit, avro_schema=avro)


# -- changes, each behind a confirmation --------------------------------------------------------
def _describe_change(form: dict[str, str]) -> str:
    action, name = form.get("action"), form.get("name", "")
    if action == "create":
        return (f"create topic {name} with {form.get('partitions', '1')} partition(s), "
                f"replication factor {form.get('replication_factor') or 'the default'}")
    if action == "delete":
        return f"delete topic {name} and all its records"
    if action == "alter":
        return f"set {form.get('config_key')}={form.get('config_value')} on topic {name}"
    raise ValueError(f"unknown action {action!r}")


async def _apply_change(admin: AsyncAdminClient, form: dict[str, str]) -> str:
    """Performs a confirmed change; the page to go to afterwards."""
    action, name = form["action"], form["name"]
    if action == "create":
        rf = int(form.get("replication_factor") or -1)
        await admin.create_topics([NewTopic(name, int(form.get("partitions") or 1), rf)])
        return f"/topics/{name}"
    if action == "delete":
        await admin.delete_topic(name)
        return "/topics"
    await admin.incremental_alter_configs("topic", name,
                                          {form["config_key"]: form["config_value"]})
    return f"/topics/{name}"


async def change(request: Request) -> Response:
    # The console's forms are url-encoded: the standard library parses them (Starlette's
    # request.form() would need python-multipart for nothing else).
    form = dict(parse_qsl((await request.body()).decode("utf-8", "replace")))
    try:
        what = _describe_change(form)
    except ValueError as e:
        return _page(request, "error.html", status=400, message=str(e))
    if form.get("confirmed") != "yes":
        return _page(request, "confirm.html", what=what,
                     fields={k: v for k, v in form.items() if k not in ("confirmed", CSRF_FIELD)})
    try:
        target = await _apply_change(_admin(request), form)
    except ValueError as e:
        return _page(request, "error.html", status=400, message=f"bad input: {e}")
    return RedirectResponse(target, status_code=303)


def _status_of(exc: KafkaError) -> int:
    """The HTTP status of a page the cluster answered with `exc`."""
    if exc.code in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.GROUP_ID_NOT_FOUND):
        return 404
    if exc.name.endswith("_AUTHORIZATION_FAILED"):
        return 403  # the logged-in principal lacks an ACL: the cluster's own answer, shown
    if exc.code == ErrorCode.SASL_AUTHENTICATION_FAILED:
        return 401  # e.g. the user's password changed since the login
    return 502


async def _kafka_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, KafkaError)
    return _page(request, "error.html", status=_status_of(exc), message=str(exc))


def create_app(config: dict[str, Any], policy: Policy,
               sample_interval: float = LAG_SAMPLE_INTERVAL_S,
               connect_urls: tuple[str, ...] = ()) -> Starlette:
    """The console for the cluster `config` (client settings, Kafka's names) reaches, with
    the login, Host allow-list and read-only mode of `policy`, and the Kafka Connect workers
    at `connect_urls`."""
    state = ConsoleState(config, sample_interval, connect_urls)
    sessions = SessionStore()

    def principals() -> list[Principal]:
        return sessions.live_users(MAX_ADMINS) if policy.login else [None]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        sampler = asyncio.ensure_future(state.sample_lag_forever(principals))
        try:
            yield
        finally:
            sampler.cancel()
            await asyncio.gather(sampler, return_exceptions=True)
            await state.clients.close()

    app = Starlette(routes=[
        Route("/", overview), Route("/topics", topics), Route("/topics/{name}", topic),
        Route("/topics/{name}/records", records), Route("/groups", groups),
        Route("/groups/{group_id}", group), Route("/connect", connect),
        Route("/change", change, methods=["POST"]),
        Route("/login", login.login_page), Route("/login", login.log_in, methods=["POST"]),
        Route("/logout", login.log_out, methods=["POST"]),
    ], lifespan=lifespan, exception_handlers={KafkaError: _kafka_error},
        middleware=[Middleware(Guard)])
    app.state.console, app.state.policy, app.state.sessions = state, policy, sessions
    return app
