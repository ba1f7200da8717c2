"""The status topic's records and their replay (Connect's KafkaStatusBackingStore).

`status-connector-<name>` and `status-task-<name>-<id>` → `{"state": ..., "trace": ...,
"worker_id": ..., "generation": n}`; a tombstone removes the status. States are Connect's:
UNASSIGNED, RUNNING, PAUSED, STOPPED, FAILED, RESTARTING.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

RUNNING, PAUSED, STOPPED, FAILED, UNASSIGNED, RESTARTING = (
    "RUNNING", "PAUSED", "STOPPED", "FAILED", "UNASSIGNED", "RESTARTING")


@dataclass
class StatusState:
    connectors: dict[str, dict[str, Any]] = field(default_factory=dict)
    tasks: dict[str, dict[int, dict[str, Any]]] = field(default_factory=dict)

    def apply(self, key: bytes | None, value: bytes | None) -> None:
        if key is None:
            return
        k = key.decode()
        body = json.loads(value) if value is not None else None
        if k.startswith("status-connector-"):
            name = k[len("status-connector-"):]
            if body is None:
                self.connectors.pop(name, None)
            else:
                self.connectors[name] = body
        elif k.startswith("status-task-"):
            name, _, n = k[len("status-task-"):].rpartition("-")
            if body is None:
                self.tasks.get(name, {}).pop(int(n), None)
            else:
                self.tasks.setdefault(name, {})[int(n)] = body

    def describe(self, name: str, connector_type: str) -> dict[str, Any]:
        """`GET /connectors/<name>/status`'s body."""
        conn = self.connectors.get(name, {"state": UNASSIGNED, "worker_id": None})
        return {"name": name,
                "connector": _shown(conn),
                "tasks": [{"id": i, **_shown(t)}
                          for i, t in sorted(self.tasks.get(name, {}).items())],
                "type": connector_type}


def _shown(status: dict[str, Any]) -> dict[str, Any]:
    out = {"state": status["state"], "worker_id": status.get("worker_id")}
    if status.get("trace"):
        out["trace"] = status["trace"]
    return out


def connector_status(name: str, state: str | None, worker_id: str,
                     trace: str | None = None) -> tuple[bytes, bytes | None]:
    return (f"status-connector-{name}".encode(), None if state is None else json.dumps(
        {"state": state, "trace": trace, "worker_id": worker_id, "generation": 1}).encode())


def task_status(name: str, task: int, state: str | None, worker_id: str,
                trace: str | None = None) -> tuple[bytes, bytes | None]:
    return (f"status-task-{name}-{task}".encode(), None if state is None else json.dumps(
        {"state": state, "trace": trace, "worker_id": worker_id, "generation": 1}).encode())
