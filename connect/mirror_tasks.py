"""MirrorMaker 2's connectors at work in the worker: each runs its part of `minilog mirror`'s
flow (mirror/), built from the connector's JSON. MirrorSourceConnector runs the flow's copy
query (the same Spark query and exactly-once sink as `minilog mirror`, checkpointed under the
connector's directory) with the topic refresh and the offset syncs' forwarding beside it;
MirrorCheckpointConnector the checkpoints and the groups' offsets on the target;
MirrorHeartbeatConnector the heartbeats on the target, keyed (source, target), as MM2's does
(the pair the other way round is a connector of its own, as in Connect).
"""
from __future__ import annotations

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from minilog.mirror import flow as flows
from minilog.mirror.background import CHECKPOINT, HEARTBEAT, SOURCE, Background
from minilog.mirror.connector_config import connector_flow

from .mirror_plugins import MIRROR_CHECKPOINT, MIRROR_HEARTBEAT, MIRROR_SOURCE
from .plugins import find_plugin
from .worker_config import WorkerConfig

_ROLES = {MIRROR_SOURCE: SOURCE, MIRROR_CHECKPOINT: CHECKPOINT, MIRROR_HEARTBEAT: HEARTBEAT}


class MirrorTask:
    """What the herder holds for a running MM2 connector, answering as Spark's StreamingQuery
    does (`isActive`, `exception()`, `lastProgress`, `stop()`): the copy query, if any, and the
    driver's work.
    A disabled connector (`enabled=false`) has neither, and runs doing nothing, as MM2's."""

    def __init__(self, background: Background | None, query: StreamingQuery | None,
                 source_client: dict | None = None) -> None:
        self.background, self.query = background, query
        self.source_client = source_client  # the cluster the copy reads: where its lag is

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
    """The connector's work, started; a target without servers is the worker's own cluster."""
    plugin = find_plugin(config["connector.class"])
    flow = connector_flow(config, worker.client_config())
    if flow is None:
        return MirrorTask(None, None)
    background = Background(flow, reverse_enabled=True, roles=frozenset({_ROLES[plugin]}))
    try:
        background.prepare()
        query = flows.start(spark, flow, checkpoint_root) if plugin is MIRROR_SOURCE else None
        background.start()
    except BaseException:
        background.stop()
        raise
    return MirrorTask(background, query, flow.source_client)
