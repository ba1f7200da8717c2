"""A consumer's membership with KIP-848's protocol (`group.protocol=consumer`).

No JoinGroup, SyncGroup or client-side assignor: one loop sends ConsumerGroupHeartbeat every
`heartbeat_interval_ms` the coordinator asks for, carrying the member epoch and the partitions
this member owns; an answer with an assignment starts a reconciliation beside the loop:
partitions taken away are revoked first (auto-commit and `on_revoke` inside poll, as for the
classic protocol), then the new ones are added (`on_assign`), and the next heartbeat, sent at
once, tells the coordinator, which hands a partition to its next owner only after that.
Fenced (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID): the partitions are lost and the member joins
again with epoch 0. Leaving sends epoch -1, or -2 for a static member (`group.instance.id`),
whose partitions then wait for it. The server runs the assignor (`group.remote.assignor`).

Everything else (poll steps, commits, revocation, close) is the classic `GroupMembership`'s;
commits carry the member epoch where the classic protocol carries the generation.
"""
import asyncio
import base64
import logging
import time
import uuid
from collections.abc import Callable
from typing import Any

from minilog.connector.protocol import ApiKey, ErrorCode, KafkaError

from .cluster import Cluster
from .config import Config
from .connection import wait_set
from .group import FATAL, GroupMembership
from .group_api import COORDINATOR_MOVED, RETRY_LATER, GroupOwner, _m
from .types import KafkaConnectionError, KafkaTimeoutError, Message, TopicPartition

log = logging.getLogger("minilog.client.group")

LEAVE_EPOCH, STATIC_LEAVE_EPOCH = -1, -2
FENCED_848 = frozenset({ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID})
FATAL_848 = FATAL | {ErrorCode.UNSUPPORTED_ASSIGNOR, ErrorCode.INVALID_REQUEST,
                     ErrorCode.INVALID_REGULAR_EXPRESSION, ErrorCode.GROUP_ID_NOT_FOUND}


class ConsumerProtocolMembership(GroupMembership):
    def __init__(self, owner: GroupOwner, cluster: Cluster, config: Config,
                 on_commit: Callable[..., Any] | None = None) -> None:
        super().__init__(owner, cluster, config, on_commit)
        # KIP-1082: the member id is the client's, for the consumer's whole life
        self.member_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        self.member_epoch = 0
        self._interval: float = config.seconds("heartbeat.interval.ms")
        # the latest assignment not reconciled yet: the answer's TopicPartitions structs
        self._target: list[Message] | None = None
        self._reconciler: asyncio.Task[None] | None = None

    def is_member(self) -> bool:
        return self.member_epoch > 0

    def _leaves_on_close(self) -> bool:
        return True  # a static member too: with epoch -2, keeping its place

    # ---- the loop: heartbeats ---------------------------------------------------------------
    async def _run(self, wake: asyncio.Event) -> None:
        while True:
            try:
                wait = await self._heartbeat_once()
            except Exception:  # the heartbeat must outlive any one failure
                log.exception("group %s: heartbeat failed", self.group_id)
                wait = self.config.seconds("retry.backoff.ms")
            if self._fatal is not None:
                return
            wake.clear()
            if wait > 0:
                await wait_set(wake, wait)

    async def _tick_loop(self, tick: asyncio.Event) -> None:
        """The heartbeat loop does the ticker's work (the poll timeout) here."""

    async def _heartbeat_once(self) -> float:
        """One ConsumerGroupHeartbeat; seconds until the next."""
        if self._poll_expired:
            return 3600.0  # poll() wakes us
        if self.is_member() and time.monotonic() - self._last_poll > \
                self.config.seconds("max.poll.interval.ms"):
            await self._poll_timeout()
            return 0.0
        full = self.member_epoch == 0 or self._rejoin_reason is not None
        try:
            conn = await self.coordinator.connection("member")
            resp = await conn.send(ApiKey.CONSUMER_GROUP_HEARTBEAT, self._request(full),
                                   timeout=self.config.seconds("request.timeout.ms"))
            code = resp.error_code
        except KafkaError as e:
            if isinstance(e, (KafkaConnectionError, KafkaTimeoutError)):
                self.coordinator.mark_unknown(str(e))
                return self.config.seconds("retry.backoff.ms")
            code, resp = e.code, None
        if code:
            return await self._failed(code, resp)
        if resp.member_id:
            self.member_id = resp.member_id
        if resp.member_epoch != self.member_epoch:
            log.info("group %s: member %s at epoch %d", self.group_id, self.member_id,
                     resp.member_epoch)
        self.member_epoch = self.generation = resp.member_epoch
        self._interval = resp.heartbeat_interval_ms / 1000
        self._rejoin_reason = None
        self._last_heartbeat_ok = time.monotonic()
        if resp.assignment is not None:
            self._target = resp.assignment.topic_partitions
            if self._reconciler is None or self._reconciler.done():
                self._reconciler = self._spawn(self._reconcile())
        return self._interval

    def _request(self, full: bool) -> Message:
        Req, TP = _m(ApiKey.CONSUMER_GROUP_HEARTBEAT), \
            _m(ApiKey.CONSUMER_GROUP_HEARTBEAT, "topic_partitions")
        owned: dict[uuid.UUID, list[int]] = {}  # by topic id
        for tp in self.owned:
            owned.setdefault(self.cluster.topic_id(tp.topic), []).append(tp.partition)
        regex = "|".join(f"({p.pattern})" for p in self._patterns)
        return Req(group_id=self.group_id, member_id=self.member_id,
                   member_epoch=self.member_epoch, instance_id=self.instance_id,
                   rack_id=(self.config["client.rack"] or None) if full else None,
                   rebalance_timeout_ms=self.config["max.poll.interval.ms"] if full else -1,
                   subscribed_topic_names=sorted(self._explicit) if full else None,
                   subscribed_topic_regex=regex if full else None,
                   server_assignor=self.config["group.remote.assignor"] if full else None,
                   topic_partitions=[TP(topic_id=t, partitions=sorted(ps))
                                     for t, ps in sorted(owned.items())])

    async def _failed(self, code: int, resp: Message | None) -> float:
        message = getattr(resp, "error_message", None)
        err = KafkaError(code, message or f"ConsumerGroupHeartbeat of group {self.group_id!r}")
        if code in FENCED_848:
            log.info("group %s: %s: rejoining", self.group_id, err)
            self._reset_generation(err.name)
            await self._lose(set(self.owned))
            return 0.0
        if code in COORDINATOR_MOVED:
            self.coordinator.mark_unknown(err.name)
        if code in RETRY_LATER or code == ErrorCode.UNRELEASED_INSTANCE_ID:
            return self.config.seconds("retry.backoff.ms")
        if code in FATAL_848:
            self._fail(err)
            return 0.0
        log.info("group %s: heartbeat: %s; retrying", self.group_id, err)
        return self.config.seconds("retry.backoff.ms")

    def _reset_generation(self, why: str) -> None:
        """Fenced or timed out: join again with epoch 0 (same member id)."""
        log.info("group %s: member %s left epoch %d: %s", self.group_id, self.member_id,
                 self.member_epoch, why)
        self.member_epoch, self.generation = 0, -1
        self._target = None
        self._request_rejoin(why)

    # ---- reconciliation ------------------------------------------------------------------------
    async def _reconcile(self) -> None:
        """Move to the latest assignment: revoke first, then add; heartbeat at once after."""
        while self._target is not None:
            target, self._target = self._target, None
            wanted: set[TopicPartition] = set()
            for tp in target:
                name = self.cluster.topic_name(tp.topic_id)
                if name is None:
                    await self.cluster.refresh(all_topics=True)
                    name = self.cluster.topic_name(tp.topic_id)
                if name is None:  # not in metadata yet: ask for the whole assignment again
                    self._request_rejoin("assigned a topic not in metadata yet")
                    continue
                wanted |= {TopicPartition(name, p) for p in tp.partitions}
            revoked, added = self.owned - wanted, wanted - self.owned
            if revoked:
                await self._revoke(revoked)
            if added:
                self.owned |= added
                self.cluster.track({tp.topic for tp in added})
                self.owner.group_assign(sorted(added))
                if self._listeners.get("assign"):
                    await self._at_poll("assign", self._listeners["assign"],
                                        (self.owner.group_face, sorted(added)))
            if revoked or added:
                log.info("group %s: epoch %d: -%s +%s", self.group_id, self.member_epoch,
                         sorted(map(str, revoked)), sorted(map(str, added)))
                if self._wake is not None:  # it is: the heartbeat loop started this
                    self._wake.set()  # tell the coordinator now

    # ---- leaving -------------------------------------------------------------------------
    async def _poll_timeout(self) -> None:
        log.warning("group %s: poll() was not called for max.poll.interval.ms=%d: leaving the "
                    "group; the next poll rejoins", self.group_id,
                    self.config["max.poll.interval.ms"])
        await self._leave("consumer poll timeout has expired")
        await self._lose(set(self.owned))
        self._reset_generation("poll timeout")
        self._poll_expired = True

    async def _leave(self, reason: str, channel: str = "member") -> None:
        if self.member_epoch <= 0 or not self.coordinator.known:
            return
        epoch = LEAVE_EPOCH if self.instance_id is None else STATIC_LEAVE_EPOCH
        try:
            conn = await self.coordinator.connection(channel)
            resp = await conn.send(ApiKey.CONSUMER_GROUP_HEARTBEAT, _m(
                ApiKey.CONSUMER_GROUP_HEARTBEAT)(
                group_id=self.group_id, member_id=self.member_id, member_epoch=epoch,
                instance_id=self.instance_id),
                timeout=min(5.0, self.config.seconds("request.timeout.ms")))
            if resp.error_code:
                log.info("group %s: leaving: %s", self.group_id, ErrorCode(resp.error_code).name)
        except KafkaError as e:
            log.info("group %s: leaving failed: %s", self.group_id, e)
        self.member_epoch, self.generation = epoch, -1

    async def close(self, timeout: float | None = None) -> None:
        if self._reconciler is not None and not self._reconciler.done():
            self._reconciler.cancel()
            await asyncio.gather(self._reconciler, return_exceptions=True)
        await super().close(timeout)
