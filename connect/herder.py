"""The worker's herder: the REST API's operations on connectors, and the reconciliation that
makes the running Spark queries what the config topic says.

Every change is a record: the REST operation writes to the config topic and reads it back
(`TopicLog.send`), the replayed `ConfigState` is the only view of what should run, and
`_reconcile` starts, stops and restarts queries to match it, reporting each connector's and
task's state to the status topic. At start the worker replays the three topics and reconciles
once, so connectors come back after a kill -9 where their checkpoints and offsets left them.

One worker per `group.id` (see docs/ARCHITECTURE.md, "Kafka Connect"): this herder assumes it
is the only one, as Connect's standalone herder does, while keeping Connect's distributed
storage.
"""
from __future__ import annotations

import functools
import json
import logging
import os
import shutil
import threading
import traceback
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from minilog.connector.client import AdminClient
from minilog.jobs.pipeline import SOURCE_WORKER_LATE

from . import connector_offsets, mirror_offsets, queries
from .config_state import (
    PAUSED,
    STARTED,
    STOPPED,
    ConfigState,
    connector_record,
    restart_record,
    target_state_record,
    task_records,
)
from .errors import ConnectRestError, already_exists, not_found
from .offsets import OffsetReader, offset_key
from .mirror_plugins import MIRROR_PLUGINS
from .plugins import find_plugin
from .progress import TaskProgress
from .status import (
    FAILED,
    RESTARTING,
    RUNNING,
    UNASSIGNED,
    StatusState,
    connector_status,
    task_status,
)
from .topic_log import TopicLog, ensure_compacted_topic
from .validate import check
from .warmup import warm_up
from .worker_config import WorkerConfig

if TYPE_CHECKING:
    from .mirror_tasks import MirrorTask

log = logging.getLogger("minilog.connect")
MONITOR_INTERVAL_S = 1.0
# queries started side by side: each start mostly waits (on Spark's Python planners, on the
# broker), so a worker brings many connectors back in the time of a few; bounded by the cores,
# since each start also spawns Python processes that Spark gives 10 s to connect back
STARTS_AT_ONCE = max(2, min(4, os.cpu_count() or 2))
# a query that died only because Spark stopped waiting for one of its Python processes (a
# busy machine, many starting at once) is started again, this many times in a row, before
# its task is FAILED: the runtime's hiccup, not the connector's error
LATE_RESTARTS = 3


class Herder:
    def __init__(self, worker: WorkerConfig, spark: SparkSession) -> None:
        self.worker = worker
        self.spark = spark
        self.configs = ConfigState()
        self.statuses = StatusState()
        self.offsets = OffsetReader()
        self._lock = threading.RLock()
        self._queries: dict[str, StreamingQuery | MirrorTask] = {}
        self._running: dict[str, dict[str, str]] = {}  # the config each query was started with
        self._failed: dict[str, dict[str, str]] = {}   # failed with this config: not restarted
        self._restarts_done: dict[str, int] = {}        # restart requests acted on, by connector
        # queries being started (by the pool), with the config each was started with
        self._starting: dict[str, tuple[dict[str, str], Future[StreamingQuery]]] = {}
        self._late: dict[str, int] = {}  # restarts after a late Python process, in a row
        self._progress: dict[str, TaskProgress] = {}  # each task's query's, since it started
        self._reported: dict[str, Any] = {}  # the last progress report folded in, by connector
        self._admins: dict[str, AdminClient] = {}  # for lag: one per cluster, made when asked
        self._starts = ThreadPoolExecutor(STARTS_AT_ONCE, thread_name_prefix="connect-start",
                                          initializer=self._activate_session)
        self._stopping = threading.Event()
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._run, name="connect-herder", daemon=True)
        self._warmup = threading.Thread(target=self._warm_up, name="connect-warmup", daemon=True)
        client = worker.client_config()
        for topic in (worker.config_topic, worker.offset_topic, worker.status_topic):
            ensure_compacted_topic(client, topic, worker.partitions[topic],
                                   worker.replication[topic])
        self.config_log = TopicLog(client, worker.config_topic, self.configs.apply)
        self.status_log = TopicLog(client, worker.status_topic, self.statuses.apply)
        self.offset_log = TopicLog(client, worker.offset_topic, self.offsets.apply)

    # ---- lifecycle ---------------------------------------------------------------------------
    def start(self) -> None:
        """Replay the three topics, then run the connectors they describe (in the background:
        the REST API answers while queries start)."""
        with self._lock:
            for topic_log in (self.config_log, self.status_log, self.offset_log):
                topic_log.read_to_end()
            self._forget_deleted()
            # requests from before this start were for queries that no longer run
            self._restarts_done = {n: len(r) for n, r in self.configs.restarts.items()}
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        self._wake.set()
        self._thread.join()
        if self._warmup.ident is not None:
            self._warmup.join()
        self._starts.shutdown(wait=True, cancel_futures=True)
        for name, (_, future) in self._starting.items():
            if future.done() and not future.cancelled() and future.exception() is None:
                self._queries[name] = future.result()
        for name in list(self._queries):
            self._stop_query(name)
        for topic_log in (self.config_log, self.status_log, self.offset_log):
            topic_log.close()
        for admin in self._admins.values():
            admin.close()

    def _run(self) -> None:
        """The herder's thread: the only one that starts and stops queries. It reconciles
        when a change was written, and checks the running queries every second. A worker
        with no connectors to restore starts Spark's Python processes beside it (warmup.py):
        a connector created meanwhile does not wait for that, it shares the processes started."""
        self._activate_session()
        with self._lock:
            restoring = bool(self.configs.connectors)
        if not restoring:
            self._warmup.start()
        while not self._stopping.is_set():
            try:
                with self._lock:
                    self.config_log.read_to_end()
                    wanted = {name: (dict(config), self.configs.target_states.get(name, STARTED))
                              for name, config in self.configs.connectors.items()}
                    restarts = {n: list(r) for n, r in self.configs.restarts.items()}
                self._restart(restarts, wanted)
                self._collect_started(wanted)
                self._reconcile(wanted)
                self._check_queries()
            except Exception:  # the cluster unreachable for a while: retried at the next tick
                log.exception("reconciling the connectors failed; retrying")
            self._wake.wait(MONITOR_INTERVAL_S)
            self._wake.clear()

    def _warm_up(self) -> None:
        self._activate_session()
        warm_up(self.spark, self._stopping)

    def _activate_session(self) -> None:
        """Spark finds Python data sources (format("minilog")) through the calling thread's
        active session, which a new thread does not have."""
        self.spark._jvm.org.apache.spark.sql.SparkSession.setActiveSession(
            self.spark._jsparkSession)

    # ---- the REST API's operations -----------------------------------------------------------
    def connector_names(self) -> list[str]:
        with self._lock:
            self.config_log.read_to_end()
            return sorted(self.configs.connectors)

    def info(self, name: str) -> dict[str, Any]:
        with self._lock:
            config = self._config(name)
            return {"name": name, "config": config,
                    "tasks": [{"connector": name, "task": i}
                              for i in range(len(self.configs.tasks.get(name, [])))],
                    "type": self._type(config)}

    def config(self, name: str) -> dict[str, str]:
        with self._lock:
            return self._config(name)

    def status(self, name: str) -> dict[str, Any]:
        """Connect's status, each running task's entry with its `progress` (progress.py)."""
        with self._lock:
            config = self._config(name)
            self.status_log.read_to_end()
            status = self.statuses.describe(name, self._type(config))
            progress = self._progress.get(name)
            for task in status["tasks"]:
                if task["id"] == 0 and progress is not None:
                    task["progress"] = progress.shown(self._latest_offsets(name, config))
            return status

    def _latest_offsets(self, name: str, config: dict[str, str]
                        ) -> Callable[[list[tuple[str, int]]], dict[tuple[str, int], int]] | None:
        """Where a task's lag is measured: a sink's topics are the worker's cluster's, a
        mirror's are its source cluster's; a file source has none."""
        query = self._queries.get(name)
        client = getattr(query, "source_client", None)
        if client is None and self._type(config) == "sink":
            client = self.worker.client_config()
        if client is None:
            return None
        key = json.dumps(client, sort_keys=True, default=str)
        admin = self._admins.get(key) or self._admins.setdefault(key, AdminClient(client))

        def latest(tps: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
            found = admin.list_offsets({tp: "latest" for tp in tps}, timeout=10)
            return {(tp.topic, tp.partition): o.offset for tp, o in found.items()
                    if o is not None}
        return latest

    def task_status(self, name: str, task: int) -> dict[str, Any]:
        """`GET .../tasks/<n>/status`: the task's entry of the connector's status."""
        for entry in self.status(name)["tasks"]:
            if entry["id"] == task:
                return entry
        raise ConnectRestError(404, f"No status found for task {name}-{task}")

    def tasks(self, name: str) -> list[dict[str, Any]]:
        with self._lock:
            self._config(name)
            return [{"id": {"connector": name, "task": i}, "config": t}
                    for i, t in enumerate(self.configs.tasks.get(name, []))]

    def create(self, name: str, config: dict[str, str]) -> dict[str, Any]:
        with self._lock:
            self.config_log.read_to_end()
            if name in self.configs.connectors:
                raise already_exists(name)
            self._write_config(name, config)
            return self.info(name)

    def put_config(self, name: str, config: dict[str, str]) -> tuple[bool, dict[str, Any]]:
        """(created, info): PUT creates a connector that does not exist yet."""
        with self._lock:
            self.config_log.read_to_end()
            created = name not in self.configs.connectors
            self._write_config(name, config)
            return created, self.info(name)

    def delete(self, name: str) -> None:
        with self._lock:
            self._config(name)
            self.config_log.send_all([connector_record(name, None),
                                      target_state_record(name, None)])
            self._wake.set()

    def set_target_state(self, name: str, state: str) -> None:
        """PUT pause, resume (STARTED) and stop: a target-state record, acted on by the herder."""
        with self._lock:
            self._config(name)
            self.config_log.send(*target_state_record(name, state))
            self._wake.set()

    def request_restart(self, name: str, include_tasks: bool,
                        only_failed: bool) -> dict[str, Any] | None:
        """POST restart (KIP-745): a restart record; with includeTasks, the status to answer 202
        with (the tasks to restart shown RESTARTING), else None (204)."""
        with self._lock:
            config = self._config(name)
            self.config_log.send(*restart_record(name, include_tasks, only_failed))
            self._wake.set()
            if not include_tasks:
                return None
            self.status_log.read_to_end()
            status = self.statuses.describe(name, self._type(config))
            for task in status["tasks"]:
                if not only_failed or task["state"] == FAILED:
                    task["state"] = RESTARTING
                    task.pop("trace", None)
            return status

    def restart_task(self, name: str, task: int) -> None:
        with self._lock:
            self._config(name)
            if task not in range(len(self.configs.tasks.get(name, []))):
                raise ConnectRestError(404, f"Task {name}-{task} not found")
        self.request_restart(name, True, False)

    def get_offsets(self, name: str) -> dict[str, Any]:
        with self._lock:
            config = self._config(name)
            if self._type(config) == "sink":
                return connector_offsets.sink_offsets(self.worker.client_config(), name)
            self.offset_log.read_to_end()
            return connector_offsets.source_offsets(self.offsets, name)

    def alter_offsets(self, name: str, body: Any | None) -> str:
        """PATCH (body) or DELETE (None) of a STOPPED connector's offsets; the message to answer
        with. The connector's checkpoint goes: its next query starts from these offsets (a
        mirror's copy from one past each partition's offset, from the beginning where it has
        none: a new checkpoint, exactly once from there)."""
        with self._lock:
            config = self._config(name)
            self.config_log.read_to_end()
            if self.configs.target_states.get(name) != STOPPED or name in self._running \
                    or name in self._starting:
                raise ConnectRestError(400, "Connectors must be in the STOPPED state before "
                                       "their offsets can be modified. This can be done for the "
                                       "specified connector by issuing a 'PUT' request to the "
                                       f"'/connectors/{name}/stop' endpoint")
            plugin = find_plugin(config["connector.class"])
            client = self.worker.client_config()
            if self._type(config) == "sink":
                if body is None:
                    connector_offsets.reset_sink(client, name)
                else:
                    connector_offsets.alter_sink(client, name, body)
            else:
                self.offset_log.read_to_end()
                if body is None:
                    connector_offsets.reset_source(self.offset_log, self.offsets, name)
                else:
                    entry_check = (functools.partial(mirror_offsets.check_entry, plugin)
                                   if plugin in MIRROR_PLUGINS
                                   else connector_offsets.file_source_check)
                    connector_offsets.alter_source(self.offset_log, name, body, entry_check)
            queries.forget(self.worker, name)
            return connector_offsets.RESET if body is None else connector_offsets.ALTERED

    # ---- internals ---------------------------------------------------------------------------
    def _config(self, name: str) -> dict[str, str]:
        config = self.configs.connectors.get(name)
        if config is None:
            raise not_found(name)
        return config

    @staticmethod
    def _type(config: dict[str, str]) -> str:
        plugin = find_plugin(config.get("connector.class"))
        return plugin.type if plugin else "unknown"

    def _write_config(self, name: str, config: dict[str, str]) -> None:
        if not name or "/" in name:
            raise ConnectRestError(400, "connector name should not be empty or contain '/'"
                                   if not name else "connector name should not contain '/'")
        config = {**{k: str(v) for k, v in config.items()}, "name": name}
        check(config)
        self.config_log.send_all([connector_record(name, config),
                                  *task_records(name, [config])])
        self._wake.set()

    def _forget_deleted(self) -> None:
        """Checkpoints of connectors deleted while no worker ran (or before a kill -9 let the
        delete finish) go, so a new connector of the same name starts anew."""
        root = self.worker.checkpoint_root
        if os.path.isdir(root):
            for entry in os.listdir(root):
                if entry not in self.configs.connectors:
                    shutil.rmtree(os.path.join(root, entry), ignore_errors=True)

    def _reconcile(self, wanted: dict[str, tuple[dict[str, str], str]]) -> None:
        """Make the queries and the statuses what the replayed configs (`wanted`: name →
        (config, target state)) say."""
        wid = self.worker.worker_id
        for name in list(self._queries):
            config, target = wanted.get(name, (None, None))
            if config is None or target != STARTED or config != self._running.get(name):
                self._stop_query(name)
            if config is None:
                queries.forget(self.worker, name)
        for name in [n for n in list(self.statuses.connectors) if n not in wanted]:
            self._failed.pop(name, None)
            self._progress.pop(name, None)
            self.status_log.send_all([connector_status(name, None, wid),
                                      *(task_status(name, t, None, wid)
                                        for t in self.statuses.tasks.get(name, {}))])
            if name not in self._starting:  # a query still starting keeps its checkpoint
                queries.forget(self.worker, name)  # until it runs and is stopped (above)
        for name, (config, target) in wanted.items():
            if target == STARTED and name not in self._queries and name not in self._starting:
                if self._failed.get(name) != config:
                    self._start_query(name, config)
            elif target in (PAUSED, STOPPED):
                self._report(name, target if target == PAUSED else STOPPED,
                             None if target == STOPPED else PAUSED)

    def _restart(self, restarts: dict[str, list[dict[str, bool]]],
                 wanted: dict[str, tuple[dict[str, str], str]]) -> None:
        """Act on the restart requests not acted on yet: a restart with tasks stops the query
        (if it runs) and forgets a failure, so that reconciling starts it again."""
        for name, requests in restarts.items():
            done = self._restarts_done.get(name, 0)
            self._restarts_done[name] = len(requests)
            if name not in wanted:
                continue
            for request in requests[done:]:
                if not request["include-tasks"]:
                    continue  # Connect's plain restart: the connector object only, not tasks
                failed = name in self._failed
                if request["only-failed"] and not failed:
                    continue
                self._failed.pop(name, None)
                self._late.pop(name, None)
                if name in self._queries:
                    self._stop_query(name)
                self._report(name, RUNNING, RESTARTING)

    def _report(self, name: str, connector: str, task: str | None,
                trace: str | None = None) -> None:
        """Write the connector's and task 0's state, if they changed."""
        wid = self.worker.worker_id
        records = []
        if self.statuses.connectors.get(name, {}).get("state") != connector:
            records.append(connector_status(name, connector, wid))
        current = self.statuses.tasks.get(name, {}).get(0)
        if (current or {}).get("state") != task or (current or {}).get("trace") != trace:
            if task is not None or current is not None:
                records.append(task_status(name, 0, task, wid, trace))
        if records:
            self.status_log.send_all(records)

    def _start_query(self, name: str, config: dict[str, str]) -> None:
        """Hand the query's start to the pool; its task is UNASSIGNED until the query runs
        (`_collect_started`), as a Connect task is until its worker starts it."""
        self._failed.pop(name, None)
        self._progress[name] = TaskProgress()
        self._reported.pop(name, None)
        restarting = self.statuses.tasks.get(name, {}).get(0, {}).get("state") == RESTARTING
        self._report(name, RUNNING, RESTARTING if restarting else UNASSIGNED)
        future = self._starts.submit(queries.start, self.spark, self.worker, name, config)
        future.add_done_callback(lambda _: self._wake.set())
        self._starting[name] = (config, future)

    def _collect_started(self, wanted: dict[str, tuple[dict[str, str], str]]) -> None:
        """The starts that ended: a query that runs is RUNNING (and stopped by `_reconcile`
        if what is wanted changed meanwhile); one that could not start or died starting is
        FAILED, with its trace."""
        for name, (config, future) in list(self._starting.items()):
            if not future.done():
                continue
            del self._starting[name]
            current = wanted.get(name) == (config, STARTED)
            error = future.exception()
            query = future.result() if error is None else None
            if query is not None and not query.isActive:
                error = query.exception()
                query = None if error is not None else query
            if query is None and current and self._started_again(name, config, error):
                continue
            if query is not None:
                self._queries[name] = query
                self._running[name] = config
                if current:
                    self._report(name, RUNNING, RUNNING)
            elif current:  # a task that cannot start is FAILED, with its trace
                log.warning("connector %s: task 0 failed to start: %s", name, error)
                self._failed[name] = config
                self._report(name, RUNNING, FAILED, _trace(error) if error
                             else "the task's query stopped")

    def _stop_query(self, name: str) -> None:
        """Stop the query; its last batches' progress is folded in, so that a mirror's offsets
        topic holds where it stopped (what it resumes from after its offsets are altered)."""
        query = self._queries.pop(name)
        self._running.pop(name, None)
        try:
            query.stop()
            self._fold_progress(name, query, query.lastProgress)
        except Exception as e:  # a query that failed while stopping is stopped all the same
            log.warning("connector %s: stopping its query: %s", name, e)

    def _check_queries(self) -> None:
        """A query that died is a FAILED task, with Spark's error as the trace."""
        for name, query in list(self._queries.items()):
            if query.isActive:
                last = query.lastProgress
                if name in self._late and last is not None:
                    del self._late[name]  # it ran a batch: its Python processes are up
                self._fold_progress(name, query, last)
                continue
            error = query.exception()
            config = self._running.get(name, {})
            self._queries.pop(name)
            self._running.pop(name, None)
            if self._started_again(name, config, error):
                continue
            self._failed[name] = config
            self._report(name, RUNNING, FAILED,
                         _trace(error) if error else "the task's query stopped")

    def _fold_progress(self, name: str, query: StreamingQuery | MirrorTask,
                       last: dict[str, Any] | None) -> None:
        """Fold the query's reports into its task's progress when there is a new one (a
        second's batches; Spark keeps the last 100)."""
        stamp = (last or {}).get("timestamp")
        if stamp is None or self._reported.get(name) == stamp:
            return
        reports = query.recentProgress
        with self._lock:
            progress = self._progress.setdefault(name, TaskProgress())
            progress.observe(reports)
            self._reported[name] = stamp
            connect_offsets = getattr(query, "connect_offsets", None)
            if connect_offsets is not None:
                self._store_source_offsets(name, connect_offsets(progress.read_to))

    def _store_source_offsets(self, name: str,
                              offsets: list[tuple[dict[str, Any], dict[str, Any]]]) -> None:
        """A task's source offsets that changed, to the offsets topic (Connect's
        OffsetStorageWriter, flushed after each of the task's micro-batches)."""
        stored = {json.dumps(e["partition"], sort_keys=True): e["offset"]
                  for e in self.offsets.of(name)}
        changed = [(offset_key(name, partition), json.dumps(offset).encode())
                   for partition, offset in offsets
                   if stored.get(json.dumps(partition, sort_keys=True)) != offset]
        if changed:
            self.offset_log.send_all(changed)

    def _started_again(self, name: str, config: dict[str, str],
                       error: BaseException | None) -> bool:
        """Start the query again if `error` is only Spark's late Python process (and it has
        not happened LATE_RESTARTS times in a row)."""
        if error is None or SOURCE_WORKER_LATE not in str(error) \
                or self._late.get(name, 0) >= LATE_RESTARTS:
            return False
        self._late[name] = self._late.get(name, 0) + 1
        log.warning("connector %s: Spark's Python process started late; starting the query "
                    "again (%d of %d)", name, self._late[name], LATE_RESTARTS)
        self._start_query(name, config)
        return True


def _trace(error: BaseException) -> str:
    return "".join(traceback.format_exception(error)).strip()
