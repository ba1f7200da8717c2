"""MirrorMaker 2's connectors at work in the worker: each runs its part of `minilog mirror`'s
flow (mirror/), built from the connector's JSON. MirrorSourceConnector runs the flow's copy
query (the same Spark query and exactly-once sink as `minilog mirror`, checkpointed under the
connector's directory) with the topic refresh and the offset syncs' forwarding beside it, its
position kept in Connect's offsets topic as MM2's task keeps it (`connect_offsets`);
MirrorCheckpointConnector the checkpoints and the groups' offsets on the target;
MirrorHeartbeatConnector the heartbeats on the target, keyed (source, target), as MM2's does
(the pair the other way round is a connector of its own, as in Connect).
"""
from __future__ import annotations

from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from minilog.mirror import flow as flows
from minilog.mirror.background import CHECKPOINT, HEARTBEAT, SOURCE, Background
from minilog.mirror.config import Flow
from minilog.mirror.connector_config import connector_flow

from .mirror_offsets import resume_positions
from .mirror_plugins import MIRROR_CHECKPOINT, MIRROR_HEARTBEAT, MIRROR_SOURCE
from .offsets import replay
from .plugins import find_plugin
from .worker_config import WorkerConfig

_ROLES = {MIRROR_SOURCE: SOURCE, MIRROR_CHECKPOINT: CHECKPOINT, MIRROR_HEARTBEAT: HEARTBEAT}


class MirrorTask:
    """What the herder holds for a running MM2 connector, answering as Spark's StreamingQuery
    does (`isActive`, `exception()`, `lastProgress`, `stop()`): the copy query, if any, and the
    driver's work.
    A disabled connector (`enabled=false`) has neither, and runs doing nothing, as MM2's."""

    def __init__(self, background: Background | None, query: StreamingQuery | None,
                 flow: Flow | None = None) -> None:
        self.background, self.query, self.flow = background, query, flow

    @property
    def source_client(self) -> dict | None:
        """The cluster the copy reads: where its lag is measured."""
        return self.flow.source_client if self.flow is not None and self.query else None

    def connect_offsets(self, read_to: dict[tuple[str, int], int]
                        ) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """The copy's position as MM2's MirrorSourceTask keeps it in Connect's offsets topic:
        per source partition `{"cluster": A, "partition": p, "topic": t}` ->
        `{"offset": the last upstream offset copied}` (`read_to` is the next one to read)."""
        if self.flow is None or self.query is None:
            return []
        return [({"cluster": self.flow.source, "partition": p, "topic": t}, {"offset": end - 1})
                for (t, p), end in sorted(read_to.items()) if end > 0]

    @property
    def isActive(self) -> bool:  # noqa: N802 - StreamingQuery's name
        return ((self.query is None or self.query.isActive)
                and (self.background is None or self.background.alive))

    def exception(self) -> BaseException | None:
        return self.query.exception() if self.query is not None else None

    @property
    def lastProgress(self) -> dict | None:  # noqa: N802 - StreamingQuery's name
        """The copy query's last progress; a connector without one (checkpoints, heartbeats)
        makes none, and its Python processes are the driver's own: {} once running."""
        return self.query.lastProgress if self.query is not None else {}

    @property
    def recentProgress(self) -> list:  # noqa: N802 - StreamingQuery's name
        return self.query.recentProgress if self.query is not None else []

    def stop(self) -> None:
        try:
            if self.query is not None:
                self.query.stop()
        finally:
            if self.background is not None:
                self.background.stop()


def start(spark: SparkSession, worker: WorkerConfig, name: str, config: dict[str, str],
          checkpoint_root: str) -> MirrorTask:
    """The connector's work, started; a target without servers is the worker's own cluster.
    A new copy (its checkpoint dropped by an alter of its offsets) starts from the offsets
    kept in Connect's offsets topic (mirror_offsets.py)."""
    plugin = find_plugin(config["connector.class"])
    flow = connector_flow(config, worker.client_config())
    if flow is None:
        return MirrorTask(None, None)
    background = Background(flow, reverse_enabled=True, roles=frozenset({_ROLES[plugin]}))
    try:
        background.prepare()
        query = None
        if plugin is MIRROR_SOURCE:
            stored = replay(worker.client_config(), worker.offset_topic).of(name)
            query = flows.start(spark, flow, checkpoint_root,
                                resume_positions(stored, flow.source))
        background.start()
    except BaseException:
        background.stop()
        raise
    return MirrorTask(background, query, flow)
