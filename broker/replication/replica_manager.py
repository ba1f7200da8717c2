"""This broker's replicas in a replicated cluster: which it leads, which it follows, and their ISR.

The replica manager follows the metadata image. For every partition with a replica here it
opens the log and makes the partition a leader (tracking followers, a high watermark at the
smallest log end of the ISR, a new leader epoch starting at its log end) or a follower (fetched
by the `ReplicaFetcher` of its leader's broker); replicas moved away or deleted are dropped.
As leader it shrinks the ISR of followers not caught up for `replica.lag.time.max.ms` and adds
back those that caught up, through AlterPartition to the controller, and it answers acks=all
produce requests once the high watermark passes their records. The coordinators learn which of
their partitions are led here from the metadata too (`coordinator/coordinator_elections.py`,
installed after this manager), asking `leading_epoch` whether the replica leads yet.

It acts on committed metadata only, and not at all before this broker has registered, caught
up with the metadata log and been unfenced (`broker_ready`): a broker restarted with an old
image must not lead, or coordinate groups, from it. An ISR change counts once the controller
has committed it, but while a replica is being added the high watermark already waits for it
(Kafka's maximal ISR), so a replica never joins the ISR lacking committed records. High
watermarks are checkpointed (`hw_checkpoint.py`) and a replica opened again starts from its
checkpoint, never from its log end.
"""
import asyncio
import logging
import time
from collections.abc import Iterable
from typing import Any

from minilog.connector.client.connection import wait_set
from minilog.connector.client.types import KafkaConnectionError
from minilog.connector.protocol import ApiKey, ErrorCode, KafkaError, request

from ..storage import hw_checkpoint
from ..storage.leader_epoch_cache import LeaderEpochCache
from .partition import Partition, wait_for_any
from .replica_fetcher import ReplicaFetcher

log = logging.getLogger("minilog.broker.replicas")

_ALTER = request(ApiKey.ALTER_PARTITION)


def _isr_high_watermark(p: Partition) -> int:
    """The smallest log end among the ISR and any replica being added to it: what every
    in-sync replica has."""
    members = set(p.isr) | p.joining_isr
    followers = p.followers
    assert followers is not None  # the rule of a leader, which tracks its followers
    ends = [p.log_end_offset if r == p.leader_id else followers.end_offset(r) for r in members]
    return min(ends, default=p.log_end_offset)


Key = tuple[str, int]  # (topic, partition index)


class ReplicaManager:
    # The broker (server.broker.Broker), its metadata store and its peer connections come from
    # packages above this one (test_import_graph's order), so they are typed by use only.
    def __init__(self, broker: Any, store: Any, peers: Any) -> None:
        self.broker, self.store, self.peers = broker, store, peers
        self.image = store.image  # the newest committed image published to this manager
        self.node_id = broker.config.node_id
        self.lag_max_ms = broker.config["replica.lag.time.max.ms"]
        self.fetch_wait_ms = broker.config["replica.fetch.wait.max.ms"]
        self.fetch_max_bytes = broker.config["replica.fetch.max.bytes"]
        self.fetch_response_max_bytes = broker.config["replica.fetch.response.max.bytes"]
        self.inter_broker_name = broker.config.inter_broker_listener.name
        self.fetchers: dict[int, ReplicaFetcher] = {}  # by leader id
        self._dirty: set[Key] = set()
        self._rebuilding = False  # after a reset: a replica missing from the image is kept
        self._sync_scheduled = False
        self._pending_isr: dict[Key, int] = {}  # -> partition epoch an AlterPartition was sent at
        self._task: asyncio.Future[None] | None = None
        self._leads_replicated = asyncio.Event()  # wakes `_maintain_isr`: an ISR to keep now
        self.ready = False       # registered, caught up and unfenced once since start
        self.checkpoint_every = broker.config["replica.high.watermark.checkpoint.interval.ms"] / 1000
        self._checkpointed: dict[Key, int] = hw_checkpoint.read(broker.logs.data_dir)

    def start(self) -> "ReplicaManager":
        self._task = asyncio.ensure_future(self._maintain_isr())
        return self

    def broker_ready(self) -> None:
        """The controller unfenced this broker: from now on it acts on the committed image."""
        if not self.ready:
            self.ready = True
            self._look_at_everything()

    async def stop(self) -> None:
        if self._task:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await asyncio.gather(*(f.stop() for f in self.fetchers.values()))
        self.checkpoint_high_watermarks()

    def checkpoint_high_watermarks(self) -> None:
        marks = {**self._checkpointed, **{key: p.high_watermark
                                          for key, p in self.broker.partitions.items()}}
        marks = {key: hw for key, hw in marks.items() if key in self.broker.logs.logs}
        if marks != self._checkpointed:
            hw_checkpoint.write(self.broker.logs.data_dir, marks)
            self._checkpointed = marks

    @property
    def broker_epoch(self) -> int:
        """This broker's current registration (-1 before it has one): its fetches carry it."""
        lifecycle = getattr(self.broker, "lifecycle", None)
        epoch: int = lifecycle.epoch if lifecycle is not None else -1
        return epoch

    def address_of(self, node_id: int) -> tuple[str, int] | None:
        """Where broker `node_id` takes replica fetches: its inter-broker listener."""
        ep = self.image.registered.get(node_id)
        if ep is None:
            return None
        address: tuple[str, int] = ep.address_on(self.inter_broker_name)
        return address

    # -- following the metadata -------------------------------------------------------------------
    def on_metadata_update(self, delta: Any, image: Any) -> None:
        """A metadata publisher: the partitions the delta changed are made leaders, followers
        or removed here (once ready); topics whose configs changed adopt them."""
        self.image = image
        if delta.reset:  # the image was thrown away and is being replayed: look at it all
            self._look_at_everything()
            return
        self._dirty |= delta.changed_partitions
        for name in delta.changed_configs:
            config = self.broker.topics.log_config(name)
            for index in image.topics[name].partitions:
                p = self.broker.partitions.get((name, index))
                if p is not None:
                    p.apply_config(config)
        self._schedule_sync()

    def _look_at_everything(self) -> None:
        """Every replica here and every partition of the image; one missing from the image is
        kept until a record deletes or moves it."""
        self._rebuilding = True
        self._dirty |= set(self.broker.partitions) | self.image.partition_keys()
        self._schedule_sync()

    def _schedule_sync(self) -> None:
        if self._dirty and not self._sync_scheduled:
            self._sync_scheduled = True
            asyncio.get_running_loop().call_soon(self._sync)

    def _sync(self) -> None:
        self._sync_scheduled = False
        if not self.ready:
            return  # kept dirty until the broker is unfenced
        dirty, self._dirty = self._dirty, set()
        rebuilding, self._rebuilding = self._rebuilding, False
        for key in sorted(dirty):
            ts = self.image.topics.get(key[0])
            state = ts.partitions.get(key[1]) if ts else None
            if state is None or self.node_id not in state.replicas:
                if rebuilding:  # only a record deleting or moving it may delete data
                    self._detach(key)
                else:
                    self._remove(key, deleted=ts is None or state is None)
                continue
            p = self._open(ts, key[1])
            if state.leader == self.node_id:
                self._become_leader(p, state)
            else:
                self._become_follower(p, state)

    def _open(self, ts: Any, index: int) -> Partition:
        p: Partition | None = self.broker.partitions.get((ts.name, index))
        if p is None:
            config = self.broker.topics.log_config(ts.name)
            log_ = self.broker.logs.open(ts.name, index, config)
            # Committed is what the checkpoint says, not what the log holds (0 if unknown).
            p = Partition(ts.name, index, log_, ts.topic_id, is_leader=False,
                          high_watermark=max(log_.log_start_offset, min(
                              self._checkpointed.get((ts.name, index), 0), log_.log_end_offset)),
                          epoch_cache=LeaderEpochCache.load(log_))
            p.apply_config(config)
            self.broker.partitions[(ts.name, index)] = p
        return p

    def _detach(self, key: Key) -> Partition | None:
        """Stop serving a replica the image no longer names, keeping its log."""
        p: Partition | None = self.broker.partitions.pop(key, None)
        if p is not None:
            self._stop_fetching(p)
            p.stop_serving()
        return p

    def _remove(self, key: Key, deleted: bool) -> None:
        if self._detach(key) is None:
            return
        self.broker.logs.delete(*key)
        self._checkpointed.pop(key, None)
        log.info("replica %s-%d removed from this broker%s", *key, " (topic deleted)" if deleted else "")

    def _become_leader(self, p: Partition, state: Any) -> None:
        self.broker.replica_metrics.isr_changed(p, state.isr)
        if not p.is_leader or p.leader_epoch != state.leader_epoch:
            self._stop_fetching(p)
        if p.make_leader(self.node_id, state.leader_epoch, state.replicas, state.isr,
                         state.partition_epoch, _isr_high_watermark):
            log.info("leading %s-%d in epoch %d from offset %d (ISR %s)", p.topic, p.index,
                     p.leader_epoch, p.log_end_offset, p.isr)
        if self._replicated(p):
            self._leads_replicated.set()  # an ISR to keep, if `_maintain_isr` had none

    def _become_follower(self, p: Partition, state: Any) -> None:
        if p.make_follower(state.leader, state.leader_epoch, state.replicas, state.isr,
                           state.partition_epoch):
            self._stop_fetching(p)
            if state.leader >= 0:
                fetcher = self.fetchers.get(state.leader)
                if fetcher is None:
                    fetcher = self.fetchers[state.leader] = ReplicaFetcher(self, state.leader)
                fetcher.add(p)

    def leading_epoch(self, topic: str, index: int) -> int | None:
        """The leader epoch this broker's replica of the partition leads at, None if it does
        not lead it (or the broker is not unfenced yet)."""
        p: Partition | None = self.broker.partitions.get((topic, index)) if self.ready else None
        return p.leader_epoch if p is not None and p.is_leader else None

    def _stop_fetching(self, p: Partition) -> None:
        for fetcher in self.fetchers.values():
            fetcher.remove(p)

    # -- acks=all ---------------------------------------------------------------------------------
    @staticmethod
    def acks_now(p: Partition, last_offset: int) -> int | None:
        """What an acks=all producer hears for `last_offset` if that is decided already (the
        ISR has it: 0, or NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank below
        min.insync.replicas), else None. A partition whose ISR is its leader alone (RF=1, a
        single broker) decides at the append: its answer needs no wait, task or timer."""
        if p.high_watermark <= last_offset:
            return None
        if len(p.isr) < p.min_insync_replicas:
            return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return 0

    async def wait_for_acks(self, p: Partition, last_offset: int, timeout_ms: int) -> int:
        """0 once the ISR has `last_offset`, else the Kafka error to answer the producer with."""
        deadline = time.monotonic() + timeout_ms / 1000
        while (code := self.acks_now(p, last_offset)) is None:
            if not p.is_leader:
                return ErrorCode.NOT_LEADER_OR_FOLLOWER
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self.broker.stopping:
                return ErrorCode.REQUEST_TIMED_OUT
            await wait_for_any([p], remaining)
        return code

    # -- ISR --------------------------------------------------------------------------------------
    async def _maintain_isr(self) -> None:
        """Check the ISR of every replicated partition led here each half
        `replica.lag.time.max.ms` (at most 0.5 s), and checkpoint the high watermarks every
        `replica.high.watermark.checkpoint.interval.ms`. A broker that leads no replicated
        partition (a single broker: its replicas are alone in their ISRs) has no ISR to keep
        and wakes for the checkpoints only, or when it starts to lead one."""
        check_every = min(0.5, self.lag_max_ms / 2000)
        next_checkpoint = time.monotonic() + self.checkpoint_every
        while True:
            if self._replicated_leaders():
                await asyncio.sleep(check_every)
                for p in self._replicated_leaders():
                    self._check_isr(p)
            else:
                await wait_set(self._leads_replicated,
                               max(0.0, next_checkpoint - time.monotonic()))
                self._leads_replicated.clear()
            if time.monotonic() >= next_checkpoint:
                next_checkpoint = time.monotonic() + self.checkpoint_every
                self.checkpoint_high_watermarks()

    def _replicated_leaders(self) -> list[Partition]:
        """The partitions led here with a replica elsewhere, in their ISR or to join it."""
        return [p for p in list(self.broker.partitions.values())
                if p.is_leader and p.followers is not None and self._replicated(p)]

    def _replicated(self, p: Partition) -> bool:
        """Whether a replica other than this broker's is in the partition's replicas or ISR."""
        return any(r != self.node_id for r in p.replicas) or \
            any(r != self.node_id for r in p.isr)

    def _check_isr(self, p: Partition) -> None:
        key = (p.topic, p.index)
        if self._pending_isr.get(key) == p.partition_epoch:
            return
        followers = p.followers
        if followers is None:
            return
        out = followers.out_of_sync(p.isr, self.node_id, p.log_end_offset, self.lag_max_ms)
        joining = [r for r in followers.ready_to_join(p.isr, p.replicas, p.high_watermark,
                                                        p.epoch_start_offset,
                                                        self.image.broker_epochs)
                   if r in self.image.brokers]
        if not out and not joining:
            return
        new_isr = [r for r in p.replicas if (r in p.isr and r not in out) or r in joining]
        log.info("%s-%d: ISR %s -> %s", p.topic, p.index, p.isr, new_isr)
        self._pending_isr[key] = p.partition_epoch
        p.expanding_isr(joining)  # counted for the high watermark from now on
        asyncio.ensure_future(self._alter_partition(p, new_isr))

    async def _alter_partition(self, p: Partition, new_isr: list[int]) -> None:

        raft = self.store.raft
        address = raft.voters.get(raft.leader_id) if raft.leader_id is not None else None
        ts = self.image.topics.get(p.topic)
        if ts is None:
            self._pending_isr.pop((p.topic, p.index), None)
            return
        # KIP-903: each member with the broker epoch its fetches carried (the controller
        # refuses one whose registration has changed since), this leader with its own.
        fetched = p.followers.broker_epochs if p.followers is not None else {}
        epochs = [_ALTER.make("topics", "partitions", "new_isr_with_epochs", broker_id=r,
                              broker_epoch=self.broker_epoch if r == self.node_id
                              else fetched.get(r, -1)) for r in new_isr]
        body = _ALTER.cls(broker_id=self.node_id, broker_epoch=self.broker_epoch,
                          topics=[_ALTER.make("topics", topic_id=ts.topic_id, partitions=[
                              _ALTER.make("topics", "partitions", partition_index=p.index,
                                          leader_epoch=p.leader_epoch, new_isr_with_epochs=epochs,
                                          leader_recovery_state=0,
                                          partition_epoch=p.partition_epoch)])])
        code = ErrorCode.NOT_CONTROLLER
        if address is not None:
            try:
                resp = await self.peers.send(address, ApiKey.ALTER_PARTITION, body, 3,
                                             timeout=10.0, purpose="alter")
                code = resp.error_code or resp.topics[0].partitions[0].error_code
            except (KafkaError, KafkaConnectionError, OSError, IndexError):
                pass
        if code:
            log.info("AlterPartition for %s-%d failed with error %d", p.topic, p.index, code)
            self._pending_isr.pop((p.topic, p.index), None)
            p.isr_change_failed()
