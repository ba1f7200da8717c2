"""A flow's work beside its query, on the driver, each on its own interval (MM2's Scheduler):
the topic refresh (new matching topics created on the target with the source's partitions,
partitions added, configs synced: `refresh.topics.interval.seconds`), the offset syncs and
checkpoints (`emit.checkpoints.interval.seconds`, checkpoints.py), the groups' offsets on the
target (`sync.group.offsets.interval.seconds`) and heartbeats (`emit.heartbeats.interval.
seconds`). A step that fails (a cluster unreachable, as the source is after a failover) is
logged and tried again at its next turn; it never stops the copy.

Heartbeats as MM2 emits them: the flow A->B writes `heartbeats` on B keyed (A, B); MM2 also
runs the heartbeat connector of the pair B->A when that flow is disabled, writing A's
`heartbeats` keyed (B, A), which A->B then copies to B's `A.heartbeats`: a record there is
end-to-end proof that the copy runs, and its age the replication latency.

`minilog mirror` runs all of a flow's work in one Background; MM2's three connectors under
`minilog connect` each run their own part of it (`roles`): the source connector the topic
refresh and the offset syncs' forwarding, the checkpoint connector the checkpoints and the
groups' offsets, the heartbeat connector the heartbeats.
"""
from __future__ import annotations

import logging
import re
import threading
import time
from typing import Callable

from minilog.connector.client import AdminClient

from .checkpoints import Checkpointer
from .config import Flow
from .flow import pattern
from .formats import Heartbeat
from .policy import HEARTBEATS
from .sink import staging_topic
from .topics import ensure_internal, ensure_remote, sync_configs

log = logging.getLogger("minilog.mirror")
TICK_S = 0.2
SOURCE, CHECKPOINT, HEARTBEAT = "source", "checkpoint", "heartbeat"
ALL_ROLES = frozenset((SOURCE, CHECKPOINT, HEARTBEAT))
SYNCS_INTERVAL_S = 1.0  # the source connector's forwarding of offset syncs, alone


class Background:
    def __init__(self, flow: Flow, reverse_enabled: bool = False,
                 roles: frozenset[str] = ALL_ROLES):
        self.flow, self.reverse_enabled, self.roles = flow, reverse_enabled, roles
        self.checkpointer: Checkpointer | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._steps: list[tuple[str, float, Callable[[], None]]] = []
        self._known: dict[str, int] = {}
        self._source_admin: AdminClient | None = None
        self._target_admin: AdminClient | None = None

    @property
    def source_admin(self) -> AdminClient:
        if self._source_admin is None:
            self._source_admin = AdminClient(self.flow.source_client)
        return self._source_admin

    @property
    def target_admin(self) -> AdminClient:
        if self._target_admin is None:
            self._target_admin = AdminClient(self.flow.target_client)
        return self._target_admin

    def prepare(self) -> None:
        """Before the query starts: the internal topics, and the copies of the topics that
        exist now (their configs synced before a record arrives)."""
        f, roles = self.flow, self.roles
        if roles & {SOURCE, CHECKPOINT}:
            ensure_internal(self.target_admin, staging_topic(f), f.replication_factor,
                            compact=False)
        if SOURCE in roles:
            self.refresh_topics()
        self.checkpointer = Checkpointer(f, self.source_admin, self.target_admin,
                                         forwards=SOURCE in roles)
        self._steps = self._plan()

    def _plan(self) -> list[tuple[str, float, Callable[[], None]]]:
        f, roles, c = self.flow, self.roles, self.checkpointer
        checkpoints = f.emit_checkpoints_interval if f.emit_checkpoints else -1
        steps = []
        if SOURCE in roles:
            steps.append(("topics", f.refresh_topics_interval, self.refresh_topics))
        if {SOURCE, CHECKPOINT} <= roles:
            steps.append(("checkpoints", checkpoints, self.checkpoints))
        elif SOURCE in roles:
            steps.append(("offset syncs", SYNCS_INTERVAL_S, self.forward_syncs))
        elif CHECKPOINT in roles:
            steps.append(("checkpoints", checkpoints, c.emit_checkpoints))
        if CHECKPOINT in roles and f.sync_group_offsets:
            steps.append(("group offsets", f.sync_group_offsets_interval, c.sync_group_offsets))
        if HEARTBEAT in roles and f.emit_heartbeats:
            steps.append(("heartbeats", f.emit_heartbeats_interval, self.heartbeat))
        return steps

    def checkpoints(self) -> None:
        self.checkpointer.emit_checkpoints()
        self.checkpointer.forward_syncs()

    def forward_syncs(self) -> None:
        self.checkpointer.read_syncs()
        self.checkpointer.forward_syncs()

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def heartbeat(self) -> None:
        now = int(time.time() * 1000)
        f, c = self.flow, self.checkpointer
        beats = [("target", Heartbeat(f.source, f.target, now))]
        if not self.reverse_enabled:
            beats.append(("source", Heartbeat(f.target, f.source, now)))
        for side, _ in beats:
            c.ensure_internal(side, HEARTBEATS, f.heartbeats_rf, compact=True)
        sent = [c.producer(side).send(HEARTBEATS, b.value(), b.key()) for side, b in beats]
        for side, _ in beats:
            c.producer(side).flush()
        for d in sent:
            d.result(0)

    def matching_topics(self) -> list[str]:
        wanted = re.compile(pattern(self.flow))
        return [t for t in self.source_admin.list_topics() if wanted.search(t)]

    def refresh_topics(self) -> None:
        topics = self.matching_topics()
        ensure_remote(self.flow, self.source_admin, self.target_admin, topics, self._known)
        sync_configs(self.flow, self.source_admin, self.target_admin, topics)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name=f"mirror-{self.flow.ident}",
                                        daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        due = {name: time.monotonic() + interval for name, interval, _ in self._steps}
        while not self._stop.wait(TICK_S):
            for name, interval, step in self._steps:
                if interval < 0 or time.monotonic() < due[name]:
                    continue
                due[name] = time.monotonic() + interval
                try:
                    step()
                except Exception as e:  # noqa: BLE001 - logged, retried at the next turn
                    log.warning("%s: %s failed: %s", self.flow.name, name, e)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)
        if self.checkpointer is not None:
            self.checkpointer.close()
        for admin in (self._source_admin, self._target_admin):
            if admin is not None:
                admin.close()
