"""The consumer: assigned partitions, positions, prefetching, records or Arrow batches out.

`AsyncConsumer` is the asyncio core; `Consumer` (`sync_consumer.py`) its synchronous face
on a background loop thread. A background task keeps one Fetch in flight per broker for the
assigned, unpaused partitions while the application processes what it already has; each
answer is kept as raw record bytes (a chunk) and decoded only when `poll` (Python records)
or `poll_arrow` (`pyarrow.RecordBatch`es, no Python object per record) hands it out.

API choice: `poll(timeout, max_records)` returns a *list* of ConsumerRecord (Java-style batch
poll, up to `max.poll.records`), which suits both scripts and the per-batch hot path;
`poll_arrow` returns a list of RecordBatch in the schema of Spark's Kafka source.
`fetch_range_arrow(tp, start, end)` reads an offset range independently of the assignment
(the Spark source's executors use it), pipelining the next fetch while decoding.

Positions: a partition without a position gets one from the group's committed offset (when
`group.id` is set), else from `auto.offset.reset` (earliest/latest; none raises from `poll`),
also after OFFSET_OUT_OF_RANGE. A position carries the leader epoch of the record before it;
after a leader change, or when restored from a committed offset with an epoch, it is checked
against the new leader's log before fetching resumes (KIP-320, `validation.py`). Consumer
groups (`subscribe`, `commit`, `committed`, `lag`) live in `consumer_group.py`, a mixin of
AsyncConsumer, on top of `group.GroupMembership`.
"""
import asyncio
import logging
import time
from collections.abc import AsyncGenerator, Callable, Coroutine, Iterable, Mapping
from typing import Any, Self, TypeVar, cast

from minilog.connector.protocol import ErrorCode, KafkaError

from .admin import EARLIEST, LATEST, list_offsets_by_leader
from .admin_core import offset_of
from .cluster import Cluster
from .config import Config
from .connection import wait_set
from .consumer_group import GroupConsumer
from .fetcher import (
    RETRY_LATER,
    Chunk,
    FetchPlan,
    PartitionData,
    PartitionState,
    Records,
    fetch_once,
    fetch_range,
    fetch_range_arrow,
)
from .tasks import spawn
from .types import (
    KafkaConnectionError,
    KafkaTimeoutError,
    OffsetAndTimestamp,
    TopicPartition,
)
from .validation import Verdict, end_offsets_for_epochs, judge

T = TypeVar("T")

log = logging.getLogger("minilog.client")
_STUCK = "stuck"  # out of range with auto.offset.reset=none: waits for a seek
_CLOSE_TIMEOUT = 30.0  # seconds: the Java consumer's default close timeout


class AsyncConsumer(GroupConsumer):
    """The asyncio consumer. `await start()` (or `async with`), then assign or subscribe, poll.

    `decode_in_caller`: set by the sync face, whose caller's thread decodes fetched chunks
    (`predecode`) while this loop's thread receives and decrypts the next ones: a `poll` that
    waited for data then returns empty-handed at once, for that thread to decode it and poll
    again, instead of decoding it here (`poll_arrow` decodes here, as before)."""
    decode_in_caller = False

    def __init__(self, config: Mapping[str, Any] | None = None, **overrides: Any) -> None:
        self.config = cfg = Config("consumer", config, **overrides)
        self._cluster = Cluster(cfg, allow_auto_create=cfg["allow.auto.create.topics"])
        self._states: dict[TopicPartition, PartitionState] = {}
        self._fetching: set[int] = set()
        self._not_before: dict[int, float] = {}  # node -> monotonic time of its next fetch
        self._wakeup, self._data = asyncio.Event(), asyncio.Event()
        self._undecoded = False  # a chunk came in since the sync face's last `predecode`
        self._isolation = 1 if cfg["isolation.level"] == "read_committed" else 0
        self._tasks: set[asyncio.Task[Any]] = set()
        self._reset_task: asyncio.Task[Any] | None = None
        self._meta_task: asyncio.Task[Any] | None = None
        self._validate_task: asyncio.Task[Any] | None = None
        self._runner: asyncio.Task[None] | None = None
        self._rotate = 0
        # the key.deserializer and value.deserializer settings: (bytes, topic) -> anything
        self._kd: Callable[[Any, str], Any] | None = cfg["key.deserializer"]
        self._vd: Callable[[Any, str], Any] | None = cfg["value.deserializer"]
        self._init_group()

    async def start(self) -> Self:
        await self._cluster.refresh()
        self._runner = asyncio.get_running_loop().create_task(self._run())
        return self

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ---- assignment and positions --------------------------------------------------------
    def assign(self, partitions: Iterable[tuple[str, int]]) -> None:
        """Consume exactly these partitions (replacing the previous assignment)."""
        if self.subscribed:
            raise ValueError("assign() and subscribe() are exclusive: unsubscribe() first")
        wanted = [TopicPartition(*tp) for tp in partitions]
        self._states = {tp: self._states.get(tp) or PartitionState() for tp in wanted}
        self._cluster.track({tp.topic for tp in wanted})
        self._wakeup.set()

    def unassign(self) -> None:
        self.assign([])

    def assignment(self) -> list[TopicPartition]:
        return list(self._states)

    def _state(self, tp: tuple[str, int]) -> PartitionState:
        st = self._states.get(TopicPartition(*tp))
        if st is None:
            raise ValueError(f"{TopicPartition(*tp)} is not assigned to this consumer")
        return st

    def seek(self, tp: tuple[str, int], offset: int) -> None:
        """Next poll returns records from `offset` (-2 beginning, -1 end, as librdkafka)."""
        st = self._state(tp)
        if offset in (EARLIEST, LATEST):
            st.set_position(None)
            st.reset = offset
        elif offset < 0:
            raise ValueError(f"invalid offset {offset}")
        else:
            st.set_position(int(offset))
        st.error = None
        self._wakeup.set()

    def seek_to_beginning(self, partitions: Iterable[tuple[str, int]] | None = None) -> None:
        for tp in partitions or list(self._states):
            self.seek(tp, EARLIEST)

    def seek_to_end(self, partitions: Iterable[tuple[str, int]] | None = None) -> None:
        for tp in partitions or list(self._states):
            self.seek(tp, LATEST)

    async def position(self, tp: tuple[str, int], timeout: float | None = None) -> int:
        """The offset of the next record `poll` returns for `tp` (resolving resets and
        validations first)."""
        st = self._state(tp)
        deadline = self._deadline(timeout)
        while st.position is None or st.validating:
            self._raise_errors()
            if time.monotonic() >= deadline:
                raise KafkaTimeoutError(f"position of {TopicPartition(*tp)} unknown after timeout")
            self._wakeup.set()
            self._data.clear()
            await wait_set(self._data, max(0.0, deadline - time.monotonic()))
        return st.position

    def pause(self, partitions: Iterable[tuple[str, int]]) -> None:
        for tp in partitions:
            self._state(tp).paused = True

    def resume(self, partitions: Iterable[tuple[str, int]]) -> None:
        for tp in partitions:
            self._state(tp).paused = False
        self._wakeup.set()

    def paused(self) -> list[TopicPartition]:
        return [tp for tp, st in self._states.items() if st.paused]

    def _deadline(self, timeout: float | None) -> float:
        return time.monotonic() + (self.config.seconds("default.api.timeout.ms")
                                   if timeout is None else timeout)

    # ---- offsets lookups -----------------------------------------------------------------
    async def _list_offsets(
            self, specs: Mapping[TopicPartition, int] | Mapping[tuple[str, int], int],
            timeout: float | None) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        wanted = {TopicPartition(*tp): v for tp, v in specs.items()}
        return await list_offsets_by_leader(self._cluster, wanted, self._deadline(timeout),
                                            self._isolation)

    async def offsets_for_times(self, timestamps: Mapping[tuple[str, int], int],
                                timeout: float | None = None
                                ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """{tp: ms} -> {tp: OffsetAndTimestamp of the first record at or after ms, or None}."""
        return await self._list_offsets(timestamps, timeout)

    async def beginning_offsets(self, partitions: Iterable[tuple[str, int]],
                                timeout: float | None = None) -> dict[TopicPartition, int]:
        got = await self._list_offsets({tp: EARLIEST for tp in partitions}, timeout)
        return {tp: offset_of(o, tp) for tp, o in got.items()}

    async def end_offsets(self, partitions: Iterable[tuple[str, int]],
                          timeout: float | None = None) -> dict[TopicPartition, int]:
        """Log end offsets (the last stable offset under read_committed)."""
        got = await self._list_offsets({tp: LATEST for tp in partitions}, timeout)
        return {tp: offset_of(o, tp) for tp, o in got.items()}

    async def partitions_for(self, topic: str) -> list[int] | None:
        await self._cluster.maybe_refresh([topic])
        err = self._cluster.topic_error(topic)
        if err is not None:
            raise err
        return self._cluster.partitions_for(topic)

    # ---- polling -------------------------------------------------------------------------
    async def poll(self, timeout: float = 0.0, max_records: int | None = None) -> Records:
        """Up to `max_records` (default max.poll.records) records, waiting up to `timeout` s."""
        limit = max_records or self.config["max.poll.records"]
        return await self._poll(timeout, lambda: self._collect(limit), self.decode_in_caller)

    async def poll_arrow(self, timeout: float = 0.0, max_records: int | None = None,
                         include_headers: bool = True) -> list[Any]:  # of pyarrow RecordBatch
        """Buffered data as RecordBatches (one per partition chunk), up to `max_records` rows."""
        return await self._poll(timeout, lambda: self._collect_arrow(max_records, include_headers))

    async def _poll(self, timeout: float, collect: Callable[[], list[T]],
                    hand_back: bool = False) -> list[T]:
        """What `collect` finds, waiting up to `timeout` s for it; `hand_back`: return empty
        as soon as new data came in (the caller decodes it, then polls again)."""
        await self._group_poll()
        deadline = time.monotonic() + timeout
        while True:
            self._raise_errors()
            if self._group_waiting():  # a rebalance step waits for this poll
                if self.group_defer_callbacks:
                    return []  # the sync face serves it in its own thread and polls again
                await self._group_poll()
            if hand_back and self._undecoded:  # came in after the caller's `predecode`
                return []
            out = collect()
            if out:
                self._wakeup.set()
                return out
            left = deadline - time.monotonic()
            if left <= 0:
                return []
            self._data.clear()
            if await wait_set(self._data, left) and hand_back:
                return []

    def predecode(self) -> None:
        """Decode the buffered chunks not decoded yet, in the calling thread (see
        `decode_in_caller`). Safe beside the loop's thread: it only appends chunks or drops
        them meanwhile, and hands them out only inside a `poll` the caller waits for."""
        check = self.config["check.crcs"]
        self._undecoded = False  # before looking: a chunk appended after this sets it again
        for tp, st in list(self._states.items()):
            for chunk in list(st.chunks):
                chunk.predecode(tp, check)

    def _raise_errors(self) -> None:
        for st in self._states.values():
            if st.error is not None:
                err, st.error = st.error, None
                raise err

    def _ready(self) -> list[tuple[TopicPartition, PartitionState]]:
        """Assigned partitions with buffered data at their position, in rotating order."""
        items = [(tp, st) for tp, st in self._states.items()
                 if st.chunks and not st.paused and st.position is not None]
        self._rotate += 1
        if items:
            k = self._rotate % len(items)
            items = items[k:] + items[:k]
        return items

    def _collect(self, limit: int) -> Records:
        out: Records = []
        check = self.config["check.crcs"]
        for tp, st in self._ready():
            if len(out) >= limit:
                break
            try:
                out.extend(st.take_records(tp, limit - len(out), check))
            except KafkaError:
                if out:  # corrupt data here: the other partitions' records first
                    break
                raise
        if out and (self._kd or self._vd):
            kd, vd = self._kd, self._vd
            out = [r._replace(key=kd(r.key, r.topic) if kd else r.key,
                              value=vd(r.value, r.topic) if vd else r.value) for r in out]
        return out

    def _collect_arrow(self, limit: int | None, include_headers: bool) -> list[Any]:
        out: list[Any] = []  # pyarrow RecordBatches
        rows = 0
        check = self.config["check.crcs"]
        for tp, st in self._ready():
            if limit is not None and rows >= limit:
                break
            try:
                got = st.take_arrow(tp, None if limit is None else limit - rows,
                                    include_headers, check)
            except KafkaError:
                if out:  # corrupt data here: the other partitions' records first
                    break
                raise
            out.extend(got)
            rows += sum(b.num_rows for b in got)
        return out

    # ---- background fetching ---------------------------------------------------------------
    async def _run(self) -> None:
        while True:
            self._wakeup.clear()
            try:
                delay = self._schedule(time.monotonic())
            except Exception:
                log.exception("consumer fetch scheduling failed")
                delay = self.config.seconds("retry.backoff.ms")
            await wait_set(self._wakeup, delay)

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        return spawn(coro, self._tasks)

    def _schedule(self, now: float) -> float | None:
        cluster, backoff = self._cluster, self.config.seconds("retry.backoff.ms")
        delay: float | None = None
        for tp, st in self._states.items():
            if st.out_of_range is not None and not st.chunks:
                self._out_of_range(tp, st, st.out_of_range)  # what came before is handed out
        topics = {tp.topic for tp, st in self._states.items() if st.reset != _STUCK}
        if self._meta_task is None and (cluster.needs_refresh or
                                        any(t not in cluster.topics for t in topics)):
            self._meta_task = self._spawn(self._refresh_metadata(topics))
        if self._reset_task is None and any(
                st.position is None and st.error is None and st.reset != _STUCK
                for st in self._states.values()):
            self._reset_task = self._spawn(self._reset_positions())
        self._note_leader_changes()
        if self._validate_task is None and any(
                st.validating and st.error is None for st in self._states.values()):
            self._validate_task = self._spawn(self._validate_positions())
        groups: dict[int, list[TopicPartition]] = {}
        for tp, st in self._states.items():
            if st.out_of_range is not None:
                continue  # waits for its buffered records to be handed out (above)
            if st.paused or st.position is None or st.in_fetch or len(st.chunks) >= 2 \
                    or st.error is not None or st.validating:
                continue
            node = cluster.leader(*tp)
            if node is None:
                cluster.request_update()
                delay = backoff
            elif node not in self._fetching:
                groups.setdefault(node, []).append(tp)
        for node, tps in groups.items():
            wait = self._not_before.get(node, 0) - now
            if wait > 0:
                delay = min(delay or wait, wait)
                continue
            self._fetching.add(node)
            for tp in tps:
                self._states[tp].in_fetch = True
            self._spawn(self._fetch(node, self._fetch_plan(tps)))
        return delay

    def _note_leader_changes(self) -> None:
        """A position read under an older leader epoch is validated before fetching more."""
        for tp, st in self._states.items():
            if st.position is None or st.validating:
                continue
            epoch = self._cluster.leader_epoch(*tp)
            if epoch > st.leader_epoch:  # metadata from a lagging broker never moves it back
                if st.leader_epoch >= 0 and st.offset_epoch >= 0:
                    st.await_validation()
                st.leader_epoch = epoch

    def _fetch_plan(self, tps: list[TopicPartition]) -> FetchPlan:
        """What a fetch asks, taken when it is decided: a seek or reset between the decision
        and the task's first step (the application's thread runs meanwhile) must not reach
        the request; the answer is then stale by `epoch` and dropped."""
        states = [self._states[tp] for tp in tps]
        # only partitions with a position are fetched, so each has a fetch offset
        return FetchPlan({tp: cast(int, st.fetch_offset) for tp, st in zip(tps, states)},
                         {tp: st.epoch for tp, st in zip(tps, states)},
                         {tp: (st.leader_epoch, st.fetch_epoch) for tp, st in zip(tps, states)})

    async def _fetch(self, node: int, plan: FetchPlan) -> None:
        cfg, cluster = self.config, self._cluster
        tps, offsets, epochs = list(plan.offsets), plan.offsets, plan.positions
        started = time.monotonic()
        results: dict[TopicPartition, PartitionData] = {}
        try:
            conn = await cluster.connection(node)
            results = await fetch_once(
                conn, cluster, offsets, max_wait_ms=cfg["fetch.max.wait.ms"],
                min_bytes=cfg["fetch.min.bytes"], max_bytes=cfg["fetch.max.bytes"],
                partition_max_bytes=cfg["max.partition.fetch.bytes"],
                isolation_level=self._isolation, rack=cfg["client.rack"],
                epochs=plan.leader_epochs)
        except KafkaError as e:
            log.debug("fetch from broker %s failed: %s", node, e)
            cluster.request_update()
            self._not_before[node] = time.monotonic() + cfg.seconds("retry.backoff.ms")
        finally:
            self._fetching.discard(node)
            for tp in tps:
                if tp in self._states:
                    self._states[tp].in_fetch = False
        got_data = False
        for tp, pd in results.items():
            st = self._states.get(tp)
            if st is None or st.epoch != epochs.get(tp):
                continue  # unassigned or sought meanwhile: this answer is stale
            if pd.error == ErrorCode.NONE:
                st.high_watermark, st.log_start_offset = pd.high_watermark, pd.log_start_offset
                st.last_stable_offset = pd.last_stable_offset
                if pd.diverging is not None:
                    self._diverged(tp, st, *pd.diverging)
                elif pd.next_offset is not None and st.fetch_offset is not None and \
                        pd.next_offset > st.fetch_offset:
                    st.chunks.append(Chunk(pd.records, offsets[tp], pd.next_offset, pd.epochs,
                                           pd.skip))
                    st.fetch_offset, st.fetch_epoch = pd.next_offset, pd.epochs[-1][1]
                    got_data = self._undecoded = True
            elif pd.error == ErrorCode.OFFSET_OUT_OF_RANGE:
                if st.chunks:  # at the fetch offset, ahead of the position: records first
                    st.out_of_range = offsets[tp]
                else:
                    self._out_of_range(tp, st, offsets[tp])
            elif pd.error in RETRY_LATER:
                cluster.request_update()
            else:
                st.error = KafkaError(pd.error, f"fetching {tp}")
        if got_data or any(st.error is not None for st in self._states.values()):
            self._data.set()
        elif results:  # brokers that answer at once with nothing must not make us spin
            pause = min(cfg.seconds("fetch.max.wait.ms"), 0.1)
            self._not_before[node] = max(self._not_before.get(node, 0), started + pause)
        self._wakeup.set()

    def _diverged(self, tp: TopicPartition, st: PartitionState, end_epoch: int,
                  end_offset: int) -> None:
        """A Fetch answered `diverging_epoch`: the log ends our last fetched epoch earlier."""
        if st.offset_epoch >= 0:
            st.await_validation()  # asks where the position's own epoch ends
            return
        if st.position is None:  # reset meanwhile: nothing to judge
            return
        # The position has no epoch to ask about: judge it by the fetch's answer.
        verdict = judge(tp, st.position, end_epoch, end_offset, self.config["auto.offset.reset"])
        if verdict is None:  # the divergence lies ahead: fetch again from the position
            st.refetch()
        else:
            self._apply_verdict(tp, st, verdict)

    def _apply_verdict(self, tp: TopicPartition, st: PartitionState, verdict: Verdict) -> None:
        """Act on `validation.judge`'s verdict for a position."""
        if verdict is None:
            st.validating = False
        elif verdict[0] == "seek":
            st.set_position(*verdict[1])
        elif verdict[0] == "reset":
            st.set_position(None)
            st.reset = EARLIEST if self.config["auto.offset.reset"] == "earliest" else LATEST
        else:
            st.set_position(None)
            st.reset, st.error = _STUCK, verdict[1]
        self._data.set()

    async def _validate_positions(self) -> None:
        try:
            need = {tp: st for tp, st in self._states.items() if st.validating and st.error is None}
            asked = {tp: st.epoch for tp, st in need.items()}
            found = await end_offsets_for_epochs(
                self._cluster, {tp: st.offset_epoch for tp, st in need.items()},
                self._deadline(None))
            policy = self.config["auto.offset.reset"]
            for tp, (end_epoch, end_offset, leader_epoch) in found.items():
                st = self._states.get(tp)
                if st is None or not st.validating or st.epoch != asked[tp] or \
                        st.position is None:
                    continue  # unassigned or sought meanwhile (validating: it has a position)
                st.leader_epoch = max(st.leader_epoch, leader_epoch)
                self._apply_verdict(tp, st, judge(tp, st.position, end_epoch, end_offset, policy))
        except KafkaError as e:
            if e.retriable or isinstance(e, KafkaConnectionError):
                await asyncio.sleep(self.config.seconds("retry.backoff.ms"))
            else:
                for st in self._states.values():
                    if st.validating and st.error is None:
                        st.set_position(None)
                        st.error, st.reset = e, _STUCK
        finally:
            self._validate_task = None
            self._data.set()
            self._wakeup.set()

    def _out_of_range(self, tp: TopicPartition, st: PartitionState, offset: int) -> None:
        policy = self.config["auto.offset.reset"]
        st.set_position(None)
        if policy == "none":
            st.reset = _STUCK
            st.error = KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE,
                                  f"offset {offset} of {tp} is out of range "
                                  "(auto.offset.reset=none: seek to continue)")
        else:
            st.reset = EARLIEST if policy == "earliest" else LATEST
        self._data.set()

    async def _refresh_metadata(self, topics: set[str]) -> None:
        try:
            await self._cluster.maybe_refresh(topics)
            for tp, st in self._states.items():
                err = self._cluster.topic_error(tp.topic)
                if err is not None and st.reset != _STUCK:
                    st.set_position(None)
                    st.error, st.reset = err, _STUCK  # reported once; a seek tries again
                    self._data.set()
        except KafkaError as e:
            log.debug("metadata refresh failed: %s", e)
            await asyncio.sleep(self.config.seconds("retry.backoff.ms"))
        finally:
            self._meta_task = None
            self._wakeup.set()

    async def _reset_positions(self) -> None:
        try:
            need = {tp: st for tp, st in self._states.items()
                    if st.position is None and st.error is None and st.reset != _STUCK}
            committed = await self._group.committed(list(need)) if self._group else {}
            specs: dict[TopicPartition, int] = {}
            policy = self.config["auto.offset.reset"]
            for tp, st in need.items():
                if st.reset is not None:
                    specs[tp] = st.reset
                elif (om := committed.get(tp)) is not None:  # validated when it names an epoch
                    st.set_position(om.offset, om.leader_epoch)
                    st.validating = om.leader_epoch >= 0
                elif policy == "none":
                    st.reset = _STUCK
                    st.error = KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE,
                                          f"no position for {tp} and auto.offset.reset=none")
                else:
                    specs[tp] = EARLIEST if policy == "earliest" else LATEST
            epochs = {tp: need[tp].epoch for tp in specs}
            found = await self._list_offsets(specs, None) if specs else {}
            for tp, ot in found.items():
                state = self._states.get(tp)
                if state is not None and state.epoch == epochs[tp] and state.position is None:
                    state.set_position(ot.offset if ot is not None else 0)
        except KafkaError as e:
            if e.retriable or isinstance(e, KafkaConnectionError):
                await asyncio.sleep(self.config.seconds("retry.backoff.ms"))
            else:
                for st in self._states.values():
                    if st.position is None and st.error is None:
                        st.error, st.reset = e, _STUCK
        finally:
            self._reset_task = None
            self._data.set()
            self._wakeup.set()

    # ---- offset ranges -------------------------------------------------------------------
    def fetch_range_arrow(self, tp: tuple[str, int], start: int, end: int,
                          timeout: float | None = None, include_headers: bool = True
                          ) -> AsyncGenerator[Any, None]:  # of pyarrow RecordBatch
        """Async iterator of RecordBatches with the records of `tp` in [start, end).

        Independent of the assignment (see `fetcher.fetch_range_arrow`).
        """
        return fetch_range_arrow(self._cluster, self.config, TopicPartition(*tp), start, end,
                                 timeout=timeout, include_headers=include_headers,
                                 isolation_level=self._isolation)

    def fetch_range(self, tp: tuple[str, int], start: int, end: int,
                    timeout: float | None = None
                    ) -> AsyncGenerator[tuple[PartitionData, int], None]:
        """The fetches under `fetch_range_arrow`, undecoded (see `fetcher.fetch_range`)."""
        return fetch_range(self._cluster, self.config, TopicPartition(*tp), start, end,
                           timeout=timeout, isolation_level=self._isolation)

    async def close(self, timeout: float | None = None) -> None:
        """Leave the group (committing first with auto-commit) and release connections, within
        `timeout` seconds (30 by default, as the Java client): what a coordinator that does
        not answer holds up by then is abandoned (its partitions then wait for the session
        timeout)."""
        within = _CLOSE_TIMEOUT if timeout is None else timeout
        if self._group is not None:
            task = asyncio.ensure_future(self._group.close(within))
            await asyncio.wait((task,), timeout=within)
            if not task.done():
                log.warning("group %s: close did not complete within its timeout: leaving "
                            "without committing or LeaveGroup", self._group.group_id)
                task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        for task in [t for t in (self._runner, *self._tasks) if t is not None]:
            task.cancel()
        await asyncio.gather(*(t for t in (self._runner, *self._tasks) if t is not None),
                             return_exceptions=True)
        self._cluster.close()
