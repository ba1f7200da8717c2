"""The config topic's records and the state they replay to (Connect's KafkaConfigBackingStore).

Keys and values as Connect writes them, so Kafka's tools and a reader of the topic see the same:
`connector-<name>` → `{"properties": {...}}` (a tombstone deletes the connector),
`target-state-<name>` → `{"state": "STARTED" | "PAUSED" | "STOPPED"}`,
`task-<name>-<n>` → `{"properties": {...}}` and `commit-<name>` → `{"tasks": n}` (a task
configuration generation becomes visible only with its commit record),
`restart-connector-<name>` → `{"include-tasks": bool, "only-failed": bool}` (KIP-745's restart
request: counted, the herder acts on the ones it has not acted on yet). State changes only
here, by `apply`, on write and at start alike.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

STARTED, PAUSED, STOPPED = "STARTED", "PAUSED", "STOPPED"


@dataclass
class ConfigState:
    connectors: dict[str, dict[str, str]] = field(default_factory=dict)
    target_states: dict[str, str] = field(default_factory=dict)
    tasks: dict[str, list[dict[str, str]]] = field(default_factory=dict)
    _pending_tasks: dict[str, dict[int, dict[str, str]]] = field(default_factory=dict)
    restarts: dict[str, list[dict[str, bool]]] = field(default_factory=dict)
    version: int = 0  # bumped on every applied record: the herder reconciles when it moves

    def apply(self, key: bytes | None, value: bytes | None) -> None:
        if key is None:
            return
        k = key.decode()
        body = json.loads(value) if value is not None else None
        self.version += 1
        if k.startswith("connector-"):
            name = k[len("connector-"):]
            if body is None:
                for table in (self.connectors, self.target_states, self.tasks,
                              self._pending_tasks):
                    table.pop(name, None)
            else:
                self.connectors[name] = dict(body["properties"])
                self.target_states.setdefault(name, STARTED)
        elif k.startswith("target-state-"):
            name = k[len("target-state-"):]
            if body is None:
                self.target_states.pop(name, None)
            elif name in self.connectors or body.get("state") == STOPPED:
                self.target_states[name] = body.get("state.v2", body.get("state", STARTED))
        elif k.startswith("restart-connector-") and body is not None:
            self.restarts.setdefault(k[len("restart-connector-"):], []).append(
                {"include-tasks": bool(body.get("include-tasks")),
                 "only-failed": bool(body.get("only-failed"))})
        elif k.startswith("task-") and body is not None:
            name, _, n = k[len("task-"):].rpartition("-")
            self._pending_tasks.setdefault(name, {})[int(n)] = dict(body["properties"])
        elif k.startswith("commit-") and body is not None:
            name = k[len("commit-"):]
            pending = self._pending_tasks.pop(name, {})
            self.tasks[name] = [pending[i] for i in range(int(body["tasks"])) if i in pending]


def connector_record(name: str, config: dict[str, str] | None) -> tuple[bytes, bytes | None]:
    return (f"connector-{name}".encode(),
            None if config is None else json.dumps({"properties": config}).encode())


def target_state_record(name: str, state: str | None) -> tuple[bytes, bytes | None]:
    return (f"target-state-{name}".encode(),
            None if state is None else json.dumps(
                # Connect writes STOPPED as PAUSED in "state", for workers that predate it
                {"state": PAUSED if state == STOPPED else state, "state.v2": state}).encode())


def restart_record(name: str, include_tasks: bool, only_failed: bool) -> tuple[bytes, bytes]:
    return (f"restart-connector-{name}".encode(),
            json.dumps({"include-tasks": include_tasks, "only-failed": only_failed}).encode())


def task_records(name: str, tasks: list[dict[str, str]]) -> list[tuple[bytes, bytes | None]]:
    """The task configs of one generation, then its commit record."""
    return [*((f"task-{name}-{i}".encode(), json.dumps({"properties": t}).encode())
              for i, t in enumerate(tasks)),
            (f"commit-{name}".encode(), json.dumps({"tasks": len(tasks)}).encode())]
