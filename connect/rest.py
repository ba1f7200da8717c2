"""Kafka Connect's REST API (`ConnectorsResource`, `ConnectorPluginsResource`, `RootResource`):
paths, JSON bodies and statuses as Connect answers them, errors as `{"error_code", "message"}`.

Handlers are thin: they parse the request as Jackson would (a malformed body is a 500 with the
parser's message, as Connect's exception mapper gives it), call the herder in a thread (its
operations block on the cluster and on Spark), and render what it returns.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .config_state import PAUSED, STARTED, STOPPED
from .errors import ConnectRestError
from .herder import Herder
from .plugins import VERSION, plugin_listing
from .smt_plugins import plugin_listing as smt_listing
from .validate import validate


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error_code": status, "message": message}, status_code=status)


async def _body(request: Request) -> Any:
    raw = await request.body()
    try:
        return json.loads(raw)
    except ValueError as e:
        raise ConnectRestError(500, f"Unexpected character in request body: {e}") from None


def _string_map(value: Any, what: str) -> dict[str, str]:
    """A JSON object of strings, as Jackson reads Map<String, String>: numbers and booleans
    become their text, anything else is refused."""
    if not isinstance(value, dict):
        raise ConnectRestError(500, f"Cannot deserialize value of type `java.util.Map` "
                               f"from {type(value).__name__} value ({what})")
    out = {}
    for k, v in value.items():
        if isinstance(v, (dict, list)):
            raise ConnectRestError(500, f"Cannot deserialize value of type `java.lang.String` "
                                   f"from {'Object' if isinstance(v, dict) else 'Array'} value "
                                   f"(config {k})")
        out[k] = "true" if v is True else "false" if v is False else None if v is None \
            else str(v)
    return {k: v for k, v in out.items() if v is not None}


def _herder(request: Request) -> Herder:
    return request.app.state.herder


async def _call(fn: Callable[..., Any], *args: Any) -> Any:
    return await run_in_threadpool(fn, *args)


async def root(request: Request) -> Response:
    return JSONResponse({"version": VERSION, "commit": "minilog",
                         "kafka_cluster_id": request.app.state.cluster_id})


async def connector_plugins(request: Request) -> Response:
    """Connectors only, unless `connectorsOnly=false`: then transformations, predicates and
    converters too, as Connect's worker lists them."""
    connectors_only = request.query_params.get("connectorsOnly", "true").strip().lower()
    return JSONResponse(plugin_listing() + (smt_listing() if connectors_only == "false" else []))


async def validate_config(request: Request) -> Response:
    config = _string_map(await _body(request), "config")
    plugin = request.path_params["plugin"]
    given = config.get("connector.class")
    if given is not None and not _plugin_name(given).endswith(_plugin_name(plugin)):
        # Connect checks the path's class against the body's before anything else: the same
        # plugin by class name or alias (FileStreamSource for ...FileStreamSourceConnector)
        raise ConnectRestError(400, "Included connector type " + given + " does not match "
                               "request type " + plugin)
    return JSONResponse(validate({**config, "connector.class": given or plugin}))


def _plugin_name(name: str) -> str:
    """Connect's normalizedPluginName: without a trailing "Connector"."""
    return name.removesuffix("Connector") if name != "Connector" else name


async def connectors(request: Request) -> Response:
    herder = _herder(request)
    names = await _call(herder.connector_names)
    expand = request.query_params.getlist("expand")
    if not expand:
        return JSONResponse(names)
    out: dict[str, Any] = {}
    for name in names:
        entry = {}
        if "status" in expand:
            entry["status"] = await _call(herder.status, name)
        if "info" in expand:
            entry["info"] = await _call(herder.info, name)
        out[name] = entry
    return JSONResponse(out)


async def create_connector(request: Request) -> Response:
    body = await _body(request)
    if not isinstance(body, dict):
        raise ConnectRestError(500, "Cannot construct instance of `CreateConnectorRequest` "
                               "from a non-object value")
    name = body.get("name")
    if not isinstance(name, str):
        raise ConnectRestError(500, "Cannot invoke \"String.trim()\" because the return value "
                               "of \"CreateConnectorRequest.name()\" is null"
                               if name is None else "name must be a string")
    name = name.strip()
    config = _string_map(body.get("config"), "config")
    _check_name(name, config)
    info = await _call(_herder(request).create, name, config)
    return JSONResponse(info, status_code=201, headers={"Location": f"/connectors/{name}"})


def _check_name(name: str, config: dict[str, str]) -> None:
    given = config.get("name")
    if given is not None and given != name:
        raise ConnectRestError(400, f"Connector name configuration ({given}) doesn't match "
                               f"connector name in the URL ({name})")


async def connector(request: Request) -> Response:
    herder, name = _herder(request), request.path_params["name"]
    if request.method == "DELETE":
        await _call(herder.delete, name)
        return Response(status_code=204)
    return JSONResponse(await _call(herder.info, name))


async def connector_config(request: Request) -> Response:
    herder, name = _herder(request), request.path_params["name"]
    if request.method == "GET":
        return JSONResponse(await _call(herder.config, name))
    config = _string_map(await _body(request), "config")
    _check_name(name, config)
    created, info = await _call(herder.put_config, name, config)
    return JSONResponse(info, status_code=201 if created else 200,
                        headers={"Location": f"/connectors/{name}"} if created else None)


async def connector_status(request: Request) -> Response:
    return JSONResponse(await _call(_herder(request).status, request.path_params["name"]))


async def connector_tasks(request: Request) -> Response:
    return JSONResponse(await _call(_herder(request).tasks, request.path_params["name"]))


async def pause(request: Request) -> Response:
    await _call(_herder(request).set_target_state, request.path_params["name"], PAUSED)
    return Response(status_code=202)


async def resume(request: Request) -> Response:
    await _call(_herder(request).set_target_state, request.path_params["name"], STARTED)
    return Response(status_code=202)


async def stop(request: Request) -> Response:
    await _call(_herder(request).set_target_state, request.path_params["name"], STOPPED)
    return Response(status_code=204)


def _flag(request: Request, name: str) -> bool:
    return request.query_params.get(name, "false").strip().lower() == "true"


async def restart(request: Request) -> Response:
    status = await _call(_herder(request).request_restart, request.path_params["name"],
                         _flag(request, "includeTasks"), _flag(request, "onlyFailed"))
    return Response(status_code=204) if status is None else JSONResponse(status, 202)


def _task(request: Request) -> int:
    try:
        return int(request.path_params["task"])
    except ValueError:
        raise ConnectRestError(404, "HTTP 404 Not Found") from None


async def restart_task(request: Request) -> Response:
    await _call(_herder(request).restart_task, request.path_params["name"], _task(request))
    return Response(status_code=204)


async def task_status(request: Request) -> Response:
    return JSONResponse(await _call(_herder(request).task_status, request.path_params["name"],
                                    _task(request)))


async def offsets(request: Request) -> Response:
    herder, name = _herder(request), request.path_params["name"]
    if request.method == "GET":
        return JSONResponse(await _call(herder.get_offsets, name))
    body = await _body(request) if request.method == "PATCH" else None
    message = await _call(herder.alter_offsets, name, body)
    return JSONResponse({"message": message})


async def _connect_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ConnectRestError)
    return _error(exc.status, exc.message)


async def _unexpected(request: Request, exc: Exception) -> Response:
    """Anything else is a 500 with the error's message, as Connect's ConnectExceptionMapper."""
    return _error(500, f"{type(exc).__name__}: {exc}")


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    reason = {404: "Not Found", 405: "Method Not Allowed"}.get(exc.status_code, exc.detail)
    return _error(exc.status_code, f"HTTP {exc.status_code} {reason}")


ROUTES = [
    Route("/", root),
    Route("/connector-plugins", connector_plugins),
    Route("/connector-plugins/{plugin}/config/validate", validate_config, methods=["PUT"]),
    Route("/connectors", connectors, methods=["GET"]),
    Route("/connectors", create_connector, methods=["POST"]),
    Route("/connectors/{name}", connector, methods=["GET", "DELETE"]),
    Route("/connectors/{name}/config", connector_config, methods=["GET", "PUT"]),
    Route("/connectors/{name}/status", connector_status),
    Route("/connectors/{name}/tasks", connector_tasks),
    Route("/connectors/{name}/pause", pause, methods=["PUT"]),
    Route("/connectors/{name}/resume", resume, methods=["PUT"]),
    Route("/connectors/{name}/stop", stop, methods=["PUT"]),
    Route("/connectors/{name}/restart", restart, methods=["POST"]),
    Route("/connectors/{name}/tasks/{task}/restart", restart_task, methods=["POST"]),
    Route("/connectors/{name}/tasks/{task}/status", task_status),
    Route("/connectors/{name}/offsets", offsets, methods=["GET", "PATCH", "DELETE"]),
]


def create_app(herder: Herder, cluster_id: str) -> Starlette:
    app = Starlette(routes=ROUTES, exception_handlers={ConnectRestError: _connect_error,
                                                       HTTPException: _http_error,
                                                       Exception: _unexpected})
    app.state.herder = herder
    app.state.cluster_id = cluster_id
    return app
