"""The console's Connect page: each Kafka Connect worker it was given (`--connect URL`), asked
through Connect's own REST API as Kafka's consoles ask it (`GET
/connectors?expand=status&expand=info`), its connectors shown with their state, each task's
state and, where the worker reports it (`minilog connect` does: connect/progress.py), the
records it has moved, their rate and its lag.

A worker that does not answer is shown as such on the page; the rest of the page still shows.
The worker is asked from a thread: the standard library's HTTP client, no other dependency.
"""
from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any

REQUEST_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class TaskView:
    id: int
    state: str
    worker_id: str | None
    trace: str | None          # its first line; the whole trace is in the worker's status
    records: int | None
    records_per_second: float | None
    lag: int | None


@dataclass(frozen=True)
class ConnectorView:
    name: str
    type: str
    connector_class: str
    state: str
    tasks: list[TaskView]


@dataclass(frozen=True)
class WorkerView:
    url: str
    connectors: list[ConnectorView] = field(default_factory=list)
    error: str | None = None   # why the worker could not be asked


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=REQUEST_TIMEOUT_S) as response:
        return json.load(response)


def _task(entry: dict[str, Any]) -> TaskView:
    progress = entry.get("progress") or {}
    trace = entry.get("trace")
    return TaskView(int(entry.get("id", 0)), str(entry.get("state", "UNASSIGNED")),
                    entry.get("worker_id"), trace.strip().splitlines()[-1] if trace else None,
                    progress.get("records"), progress.get("records_per_second"),
                    progress.get("lag"))


def _connector(name: str, entry: dict[str, Any]) -> ConnectorView:
    status, info = entry.get("status") or {}, entry.get("info") or {}
    return ConnectorView(
        name, str(status.get("type") or info.get("type") or "unknown"),
        str((info.get("config") or {}).get("connector.class", "")),
        str((status.get("connector") or {}).get("state", "UNASSIGNED")),
        [_task(t) for t in status.get("tasks") or []])


def _worker(url: str) -> WorkerView:
    base = url.rstrip("/")
    try:
        body = _get(f"{base}/connectors?expand=status&expand=info")
    except (OSError, ValueError) as e:  # refused, timed out, an HTTP error, not JSON
        reason = getattr(e, "reason", None) or e
        return WorkerView(base, error=f"{base} did not answer: {reason}")
    if not isinstance(body, dict):
        return WorkerView(base, error=f"{base} answered {type(body).__name__}, not connectors")
    return WorkerView(base, [_connector(n, body[n]) for n in sorted(body)])


async def workers(urls: tuple[str, ...]) -> list[WorkerView]:
    return list(await asyncio.gather(*(asyncio.to_thread(_worker, u) for u in urls)))
