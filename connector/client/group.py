"""A consumer's membership in a group: join, sync, heartbeat, commit, leave (classic protocol).

`GroupMembership` runs on the consumer's event loop as two tasks, like the Java client's
coordinator and heartbeat thread: the *runner* (re)joins the group whenever a rebalance is
needed (JoinGroup with the MEMBER_ID_REQUIRED retry, the leader runs the assignor, SyncGroup)
and the *ticker* heartbeats every `heartbeat.interval.ms`, watches metadata (regex
subscriptions, partition counts) and leaves the group when `poll` has not been called for
`max.poll.interval.ms`. Auto-commit runs inside `poll` (every `auto.commit.interval.ms`), as
in Java: it commits what the previous poll returned, never records not yet processed.

Rebalance protocols (KIP-429): EAGER members revoke everything before rejoining; COOPERATIVE
members (when every configured assignor supports it, as in Java) keep their partitions, revoke
only what the new assignment takes away, and rejoin once more so it can be handed out.
Partitions are *lost* instead of revoked when the member was fenced (unknown member, stale
generation, poll timeout): nothing is committed for them, since another member may own them.

Steps that involve the application (auto-commit and `on_revoke` before partitions go,
`on_assign`, `on_lost`) run inside its poll, as in Java: see `group_steps.py`. Static members
(`group.instance.id`) do not send LeaveGroup on close, as in Java: their partitions wait for
them until the session times out. Offsets: `group_commit.py`.

The owner (the consumer core) is reached through a small seam:
  `group_assign(tps)` / `group_unassign(tps)`  start / stop consuming partitions
  `group_positions(tps)` -> {tp: OffsetAndMetadata of the position, with its leader epoch}
                                                what commits (auto, on revoke, default) send
  `group_notify()`                              something waits for poll: wake a waiting poll
  `group_face`                                  what rebalance callbacks get as first argument
  `group_defer_callbacks`                       True: close() too leaves callbacks to the
                                                poll thread (the sync Consumer serves them)
"""
import asyncio
import collections
import logging
import re
import threading
import time
from collections.abc import Callable, Coroutine, Iterable
from typing import Any

from minilog.connector.protocol import ApiKey, ErrorCode, KafkaError
from minilog.connector.protocol.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    Assignment,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)

from .assignors import COOPERATIVE, EAGER, Member, make_assignors, rebalance_protocol
from .cluster import Cluster
from .config import Config
from .connection import wait_set
from .group_api import COORDINATOR_MOVED, Coordinator, GroupOwner, _m
from .group_commit import FENCED, GroupCommits
from .group_steps import PollSteps
from .tasks import spawn
from .types import KafkaConnectionError, KafkaTimeoutError, Message, TopicPartition

log = logging.getLogger("minilog.client.group")

FATAL = frozenset({ErrorCode.FENCED_INSTANCE_ID, ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                   ErrorCode.INVALID_SESSION_TIMEOUT, ErrorCode.GROUP_MAX_SIZE_REACHED,
                   ErrorCode.INVALID_GROUP_ID, ErrorCode.GROUP_AUTHORIZATION_FAILED,
                   ErrorCode.UNSUPPORTED_VERSION})
JOIN_TIMEOUT_LAPSE = 5.0  # Java's: a JoinGroup may take the rebalance timeout, plus this
# An application's on_assign / on_revoke / on_lost: `fn(consumer, [TopicPartition])`, the
# consumer being whichever face it holds (Consumer or AsyncConsumer)
RebalanceCallback = Callable[[Any, list[TopicPartition]], object]


class _Rejoin(Exception):
    """Start the join over at once (new member id, coordinator moved, rebalance restarted)."""


class GroupMembership(GroupCommits, PollSteps):
    def __init__(self, owner: GroupOwner, cluster: Cluster, config: Config,
                 on_commit: Callable[..., Any] | None = None) -> None:
        self.owner, self.cluster, self.config = owner, cluster, config
        self.group_id = config["group.id"]
        self.instance_id = config["group.instance.id"] or None
        self.assignors = make_assignors(config["partition.assignment.strategy"])
        self.protocol = rebalance_protocol(self.assignors)
        self.coordinator = Coordinator(cluster, self.group_id)
        self.member_id, self.generation = "", -1
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.owned: set[TopicPartition] = set()
        self.subscribed: set[str] = set()
        self.ready = threading.Event()  # set while callbacks wait for the poll thread
        self._explicit: set[str] = set()
        self._patterns: list[re.Pattern[str]] = []
        self._listeners: dict[str, RebalanceCallback | None] = {}
        self._on_commit = on_commit
        self._pending = collections.deque()
        self._rejoin_reason: str | None = None
        self._in_join = self._lost = self._poll_expired = self._closed = False
        self._fatal: KafkaError | None = None
        self._errors: list[BaseException] = []
        self._last_poll = self._last_heartbeat_ok = time.monotonic()
        self._auto_commit_every: float | None = config.seconds("auto.commit.interval.ms") \
            if config["enable.auto.commit"] else None
        self._next_auto_commit = self._last_poll + (self._auto_commit_every or 0)
        self._snapshot: dict[str, int] = {}
        self._watched: set[str] = set()
        self._group_topics: set[str] = set()
        self._lead_counts: dict[str, int] | None = None
        self._committed_positions = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._runner: asyncio.Task[None] | None = None
        self._ticker: asyncio.Task[None] | None = None
        self._close_by: float | None = None  # monotonic deadline of close, once closing
        # the runner's and the ticker's wake-ups, made when they start
        self._wake: asyncio.Event | None = None
        self._tick: asyncio.Event | None = None

    @property
    def active(self) -> bool:
        """Subscribed (so a member of the group, or becoming one)."""
        return self._runner is not None

    def is_member(self) -> bool:
        return self.generation >= 0 and not self._in_join

    # ---- subscription ------------------------------------------------------------------
    def subscribe(self, topics: str | Iterable[str], on_assign: RebalanceCallback | None = None,
                  on_revoke: RebalanceCallback | None = None,
                  on_lost: RebalanceCallback | None = None) -> None:
        """Topics and `^regex` patterns; (re)joins when the subscription changes."""
        names = [topics] if isinstance(topics, str) else list(topics)
        if not names:
            raise ValueError("subscribe needs at least one topic or ^pattern")
        self._explicit = {t for t in names if not t.startswith("^")}
        self._patterns = [re.compile(t) for t in names if t.startswith("^")]
        self._listeners = {"assign": on_assign, "revoke": on_revoke,
                           "lost": on_lost or on_revoke}
        self.cluster.track(self._explicit)
        if self._runner is None:
            self._wake, self._tick = wake, tick = asyncio.Event(), asyncio.Event()
            self._last_poll = time.monotonic()
            self._runner = self._spawn(self._run(wake))
            self._ticker = self._spawn(self._tick_loop(tick))
        self._request_rejoin("subscription changed")

    def _matching(self) -> set[str]:
        found = set(self._explicit)
        if self._patterns:
            found |= {name for name, t in self.cluster.topics.items() if not t.internal
                      and any(p.match(name) for p in self._patterns)}
        return found

    def _request_rejoin(self, reason: str) -> None:
        if self._rejoin_reason is None:
            log.info("group %s: rebalance needed: %s", self.group_id, reason)
            self._rejoin_reason = reason
        if self._wake is not None:
            self._wake.set()

    # ---- the poll thread's side ---------------------------------------------------------
    def poll(self) -> None:
        """Called on every consumer poll: resets the poll timer, auto-commits, raises what
        went wrong."""
        self._last_poll = now = time.monotonic()
        self._maybe_auto_commit(now)
        if self._poll_expired:
            self._poll_expired = False
            if self._wake is not None:  # it is: the poll expired in a running membership
                self._wake.set()
        if self._fatal is not None:
            raise self._fatal
        if self._errors:
            raise self._errors.pop(0)

    def _maybe_auto_commit(self, now: float) -> None:
        """Java's maybeAutoCommitOffsetsAsync, at the start of a poll: the positions now are
        those after the records the previous poll returned, which the application has
        finished with by polling again. (Never from a timer: records handed out but not
        processed yet would be committed, and lost by a crash.)"""
        if self._auto_commit_every is None or now < self._next_auto_commit:
            return
        self._next_auto_commit = now + self._auto_commit_every
        if self.is_member() and self.owned:
            self._spawn(self._commit_async(self._positions(self.owned), auto=True))

    # ---- the runner: (re)joining ----------------------------------------------------------
    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        return spawn(coro, self._tasks)

    async def _run(self, wake: asyncio.Event) -> None:
        backoff = self.config.seconds("retry.backoff.ms")
        while True:
            if self._rejoin_reason is None or self._poll_expired:
                wake.clear()
                await wake.wait()
                continue
            try:
                await self._join_once()
            except _Rejoin:
                continue
            except KafkaError as e:
                if e.code in FATAL and not isinstance(e, KafkaConnectionError):
                    self._fail(e)
                    return
                log.info("group %s: join failed: %s; retrying", self.group_id, e)
                await asyncio.sleep(backoff)
            except Exception:
                log.exception("group %s: join failed", self.group_id)
                await asyncio.sleep(backoff)

    async def _join_once(self) -> None:
        """Java's onJoinPrepare, joinGroup/syncGroup and onJoinComplete, once."""
        reason = self._rejoin_reason
        if self._lost:
            self._lost = False
            await self._lose(set(self.owned))
        elif self.protocol == EAGER and self.owned:
            await self._revoke(set(self.owned))
        if self._patterns:
            await self.cluster.refresh(all_topics=True)
        self.subscribed = self._matching()
        self.cluster.track(self.subscribed)
        self._rejoin_reason = None
        self._in_join = True
        try:
            assignment = await self._join_and_sync(reason)
        except BaseException:
            self._rejoin_reason = self._rejoin_reason or reason
            raise
        finally:
            self._in_join = False
        await self._install(assignment)

    def _metadata(self) -> list[tuple[str | None, bytes]]:  # (assignor name, subscription)
        owned = sorted(self.owned) if self.protocol == COOPERATIVE else ()
        rack = self.config["client.rack"] or None
        return [(a.name, encode_subscription(a.subscription(sorted(self.subscribed), owned,
                                                            self.generation, rack)))
                for a in self.assignors]

    async def _join_and_sync(self, reason: str | None) -> Assignment:
        cfg = self.config
        rebalance_s = cfg.seconds("max.poll.interval.ms")
        while True:
            try:
                conn = await self.coordinator.connection("member")
                Join, P = _m(ApiKey.JOIN_GROUP), _m(ApiKey.JOIN_GROUP, "protocols")
                resp = await conn.send(ApiKey.JOIN_GROUP, Join(
                    group_id=self.group_id, session_timeout_ms=cfg["session.timeout.ms"],
                    rebalance_timeout_ms=cfg["max.poll.interval.ms"], member_id=self.member_id,
                    group_instance_id=self.instance_id, protocol_type=CONSUMER_PROTOCOL_TYPE,
                    protocols=[P(name=n, metadata=md) for n, md in self._metadata()],
                    reason=reason), timeout=rebalance_s + JOIN_TIMEOUT_LAPSE)
            except KafkaError as e:
                if isinstance(e, (KafkaConnectionError, KafkaTimeoutError)):
                    self.coordinator.mark_unknown(str(e))
                raise
            code = resp.error_code
            if code == ErrorCode.MEMBER_ID_REQUIRED:
                self.member_id = resp.member_id
                continue
            self._check(code, "JoinGroup")
            self.generation, self.member_id = resp.generation_id, resp.member_id
            self.protocol_name, self.leader_id = resp.protocol_name, resp.leader
            log.info("group %s: joined generation %d as %s (%s, leader %s)", self.group_id,
                     self.generation, self.member_id, self.protocol_name, self.leader_id)
            plans: list[tuple[str, bytes]] = []
            if self.leader_id == self.member_id:
                plans = await self._lead(resp)
            Sync, A = _m(ApiKey.SYNC_GROUP), _m(ApiKey.SYNC_GROUP, "assignments")
            try:
                sresp = await conn.send(ApiKey.SYNC_GROUP, Sync(
                    group_id=self.group_id, generation_id=self.generation,
                    member_id=self.member_id, group_instance_id=self.instance_id,
                    protocol_type=CONSUMER_PROTOCOL_TYPE, protocol_name=self.protocol_name,
                    assignments=[A(member_id=m, assignment=a) for m, a in plans]),
                    timeout=rebalance_s + JOIN_TIMEOUT_LAPSE)
            except KafkaError as e:
                if isinstance(e, (KafkaConnectionError, KafkaTimeoutError)):
                    self.coordinator.mark_unknown(str(e))
                raise
            self._check(sresp.error_code, "SyncGroup")
            return decode_assignment(sresp.assignment)

    def _check(self, code: int, what: str) -> None:
        """Raise what a JoinGroup/SyncGroup error means for the join loop."""
        if not code:
            return
        err = KafkaError(code, f"{what} of group {self.group_id!r}")
        if code in COORDINATOR_MOVED:
            self.coordinator.mark_unknown(err.name)
            raise _Rejoin()
        if code in FENCED:
            self._reset_generation(err.name)
            raise _Rejoin()
        if code == ErrorCode.REBALANCE_IN_PROGRESS:
            raise _Rejoin()
        raise err

    async def _lead(self, resp: Message) -> list[tuple[str, bytes]]:
        """The leader's part: run the chosen assignor over every member's subscription."""
        members = []
        for m in resp.members:
            try:
                sub = decode_subscription(m.metadata)
            except Exception as e:  # noqa: BLE001 - one member's junk must not stall the group
                log.warning("group %s: member %s sent an unreadable subscription: %s",
                            self.group_id, m.member_id, e)
                sub = self.assignors[0].subscription(())
            members.append(Member(m.member_id, m.group_instance_id, sub))
        self._group_topics = {t for m in members for t in m.subscription.topics}
        self.cluster.track(self._group_topics)
        self._lead_counts = None
        if getattr(resp, "skip_assignment", False):
            return []  # a static leader rejoining: the broker keeps the current assignment
        await self.cluster.refresh(self._group_topics)
        self._lead_counts = self._partition_counts(self._group_topics)
        counts = {t: n for t, n in self._lead_counts.items() if n}
        assignor = next(a for a in self.assignors if a.name == resp.protocol_name)
        result = assignor.assign(counts, members)
        log.info("group %s: %s assigned %s", self.group_id, assignor.name,
                 {mid: [str(tp) for tp in tps] for mid, tps in result.items()})
        return [(m.member_id, encode_assignment(Assignment(tuple(result.get(m.member_id, ()))),
                                                min(m.subscription.version, 3)))
                for m in members]

    def _partition_counts(self, topics: Iterable[str]) -> dict[str, int]:
        return {t: len(self.cluster.partitions_for(t) or ()) for t in topics}

    async def _install(self, assignment: Assignment) -> None:
        """Java's onJoinComplete: revoke what was taken away, add what is new, call back."""
        new = {TopicPartition(*tp) for tp in assignment.partitions}
        revoked = self.owned - new
        added = new - self.owned
        if revoked:
            await self._revoke(revoked)
        self.owned |= added
        await self._take_snapshot()
        self._committed_positions = {}
        self._last_heartbeat_ok = time.monotonic()
        self.owner.group_assign(sorted(added))
        if self._tick is not None:  # it is: a join runs only in a running membership
            self._tick.set()
        if self._listeners.get("assign"):
            await self._at_poll("assign", self._listeners["assign"],
                                (self.owner.group_face, sorted(added)))
        if revoked and self.protocol == COOPERATIVE:
            self._request_rejoin("partitions revoked in a cooperative rebalance")

    async def _take_snapshot(self) -> None:
        """Partition counts to watch: the leader's are those it assigned from; a follower's
        come from fresh metadata, so a topic it had not looked up yet is no false change."""
        if self.leader_id == self.member_id and self._lead_counts is not None:
            self._watched, self._snapshot = set(self._group_topics), self._lead_counts
            return
        self._watched = set(self.subscribed)
        try:
            await self.cluster.refresh(self._watched)
        except KafkaError as e:
            log.debug("group %s: metadata refresh failed: %s", self.group_id, e)
        self._snapshot = self._partition_counts(self._watched)

    async def _revoke(self, partitions: Iterable[TopicPartition]) -> None:
        """At the next poll: commit their positions (auto-commit), call on_revoke, drop them."""
        tps = sorted(set(partitions) & self.owned)
        if not tps:
            return

        async def commit_first() -> None:
            if self.config["enable.auto.commit"] and self.is_member():
                try:  # bounded by close's timeout too: it may run in the caller's thread
                    await asyncio.wait_for(self._commit_sync(self._positions(tps),
                                                             self._deadline(None)),
                                           self._close_time_left())
                except (KafkaError, asyncio.TimeoutError) as e:
                    log.warning("group %s: commit before revoking failed: %r", self.group_id, e)

        await self._at_poll("revoke", self._listeners.get("revoke"), (self.owner.group_face, tps),
                            pre=commit_first, post=lambda: self._drop(tps))

    async def _lose(self, partitions: Iterable[TopicPartition]) -> None:
        """Partitions another member may own already: no commit; on_lost, then drop them."""
        tps = sorted(partitions)
        if not tps:
            return
        if self._listeners.get("lost") is None:
            self._drop(tps)
        else:
            await self._at_poll("lost", self._listeners["lost"], (self.owner.group_face, tps),
                                post=lambda: self._drop(tps))

    def _drop(self, tps: Iterable[TopicPartition]) -> None:
        self.owned.difference_update(tps)
        self.owner.group_unassign(tps)

    def _fail(self, err: KafkaError) -> None:
        """A fatal error (fenced static member, bad configuration): stop heartbeating and
        rejoining, lose the partitions, and raise `err` from every poll, as Java does."""
        log.error("group %s: %s", self.group_id, err)
        self._fatal = err
        self.generation, self.member_id = -1, ""
        if self._runner is not None and self._runner is not asyncio.current_task():
            self._runner.cancel()
        if self.owned:  # queued now, so poll calls on_lost before it raises `err`
            tps = sorted(self.owned)
            if self._listeners.get("lost") is None:
                self._drop(tps)
            else:
                self._enqueue("lost", self._listeners["lost"], (self.owner.group_face, tps),
                              post=lambda: self._drop(tps))
        self.owner.group_notify()

    def _reset_generation(self, why: str) -> None:
        """Fenced or timed out: a new member id next time; what we own is lost, not revoked."""
        log.info("group %s: generation %d of %s is over: %s", self.group_id, self.generation,
                 self.member_id, why)
        self.generation, self.member_id = -1, ""
        if self.owned:
            self._lost = True
        self._request_rejoin(why)

    # ---- the ticker: heartbeats, metadata, poll timeout -------------------------------------
    async def _tick_loop(self, tick: asyncio.Event) -> None:
        cfg = self.config
        interval, backoff = cfg.seconds("heartbeat.interval.ms"), cfg.seconds("retry.backoff.ms")
        meta_every, max_poll = cfg.seconds("metadata.max.age.ms"), cfg.seconds("max.poll.interval.ms")
        now = time.monotonic()
        next_hb, next_meta = now, now + meta_every
        while True:
            try:
                now = time.monotonic()
                if self.generation >= 0 and now - self._last_poll > max_poll:
                    await self._poll_timeout()
                if self.is_member() and now >= next_hb:
                    ok = await self._heartbeat()
                    next_hb = time.monotonic() + (interval if ok else min(interval, backoff))
                if now >= next_meta:
                    next_meta = now + meta_every
                    await self._refresh_metadata()
                self._check_metadata()
            except Exception:  # the heartbeat must outlive any one failure
                log.exception("group %s: background step failed", self.group_id)
                next_hb = time.monotonic() + backoff
            wake = min(next_hb, next_meta, self._last_poll + max_poll + 0.01)
            tick.clear()
            await wait_set(tick, max(0.01, wake - time.monotonic()))

    async def _heartbeat(self) -> bool:
        """One Heartbeat; False when it failed for a reason worth a quick retry."""
        generation, member_id = self.generation, self.member_id
        Req = _m(ApiKey.HEARTBEAT)
        try:
            conn = await self.coordinator.connection("member")
            resp = await conn.send(ApiKey.HEARTBEAT, Req(
                group_id=self.group_id, generation_id=generation, member_id=member_id,
                group_instance_id=self.instance_id),
                timeout=min(self.config.seconds("request.timeout.ms"),
                            self.config.seconds("session.timeout.ms")))
            code = resp.error_code
        except KafkaError as e:
            code = e.code if not isinstance(e, (KafkaConnectionError, KafkaTimeoutError)) \
                else ErrorCode.COORDINATOR_NOT_AVAILABLE
            log.debug("group %s: heartbeat failed: %s", self.group_id, e)
        now = time.monotonic()
        if code in (ErrorCode.NONE, ErrorCode.REBALANCE_IN_PROGRESS):
            self._last_heartbeat_ok = now
            if code:
                self._request_rejoin("the group is rebalancing")
            return True
        if generation != self.generation or self._in_join:
            return True  # the answer is about a generation we already left
        if code in FENCED:
            self._reset_generation(f"heartbeat: {ErrorCode(code).name}")
        elif code == ErrorCode.FENCED_INSTANCE_ID:
            self._fail(KafkaError(code, f"group.instance.id {self.instance_id!r} was fenced by "
                                  "another member with the same id"))
        else:
            if code in COORDINATOR_MOVED:
                self.coordinator.mark_unknown(f"heartbeat: {ErrorCode(code).name}")
            if now - self._last_heartbeat_ok > self.config.seconds("session.timeout.ms"):
                self.coordinator.mark_unknown("no heartbeat answered within the session timeout")
        return False

    async def _poll_timeout(self) -> None:
        log.warning("group %s: poll() was not called for max.poll.interval.ms=%d: leaving the "
                    "group (its partitions go to other members); the next poll rejoins",
                    self.group_id, self.config["max.poll.interval.ms"])
        if self.instance_id is None:
            await self._leave("consumer poll timeout has expired")
        self._reset_generation("poll timeout")
        self._poll_expired = True

    async def _refresh_metadata(self) -> None:
        try:
            if self._patterns:
                await self.cluster.refresh(all_topics=True)
            else:
                await self.cluster.maybe_refresh()
        except KafkaError as e:
            log.debug("group %s: metadata refresh failed: %s", self.group_id, e)

    def _check_metadata(self) -> None:
        """Rejoin when the regex matches other topics or a watched topic's partitions change."""
        if self._runner is None or self._rejoin_reason is not None or self._in_join:
            return
        if self._patterns and self._matching() != self.subscribed:
            self._request_rejoin("the topics matching the subscription changed")
        elif self.generation >= 0 and self._partition_counts(self._watched) != self._snapshot:
            self._request_rejoin("partitions of subscribed topics changed")

    # ---- leaving -------------------------------------------------------------------------
    async def _leave(self, reason: str, channel: str = "member") -> None:
        if not self.member_id or not self.coordinator.known:
            return
        try:
            conn = await self.coordinator.connection(channel)
            version = conn.version_for(ApiKey.LEAVE_GROUP)
            Req, M = _m(ApiKey.LEAVE_GROUP), _m(ApiKey.LEAVE_GROUP, "members")
            resp = await conn.send(ApiKey.LEAVE_GROUP, Req(
                group_id=self.group_id, member_id=self.member_id,
                members=[M(member_id=self.member_id, group_instance_id=self.instance_id,
                           reason=reason)]), version,
                timeout=min(5.0, self.config.seconds("request.timeout.ms")))
            code = resp.error_code or next((m.error_code for m in resp.members), 0)
            if code:
                log.info("group %s: LeaveGroup: %s", self.group_id, ErrorCode(code).name)
        except KafkaError as e:
            log.info("group %s: LeaveGroup failed: %s", self.group_id, e)

    def _leaves_on_close(self) -> bool:
        """Static members stay (their partitions wait for them until the session ends)."""
        return self.instance_id is None

    def _close_time_left(self) -> float | None:
        """Seconds left of close's timeout (None: not closing, or no timeout)."""
        if self._close_by is None:
            return None
        return max(0.0, self._close_by - time.monotonic())

    async def close(self, timeout: float | None = None) -> None:
        """Commit (auto-commit), revoke (or lose) what we own, leave (dynamic members), stop.
        The owner bounds it by `timeout`; the commit, which may run in the poll thread, is
        bounded here too."""
        if self._closed:
            return
        self._closed = True
        if timeout is not None:
            self._close_by = time.monotonic() + timeout
        joining = self._in_join
        tasks = [t for t in (self._runner, self._ticker) if t is not None]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        unannounced: set[TopicPartition] = set()  # partitions whose on_assign will not run now
        for item in self.take_callbacks():  # steps of a rebalance that will not happen now
            if not item.future.done():
                item.future.cancel()
            if item.kind == "assign":  # still queued: it never ran
                unannounced.update(item.args[1])
        try:
            if unannounced:  # the application never had them: no on_revoke, no commit
                self._drop(sorted(unannounced & self.owned))
            if self._runner is not None:
                if self._lost or self.generation < 0:
                    await self._lose(set(self.owned))
                else:
                    await self._revoke(set(self.owned))
                if self._leaves_on_close():  # Java: whenever it has a member id
                    # an abandoned JoinGroup or SyncGroup holds the member connection
                    await self._leave("the consumer is being closed",
                                      "leave" if joining else "member")
            pending = [t for t in self._tasks if not t.done()]
            if pending:
                await asyncio.wait(pending, timeout=self.config.seconds("request.timeout.ms"))
        finally:
            for t in list(self._tasks):
                t.cancel()
            self.coordinator.close()
