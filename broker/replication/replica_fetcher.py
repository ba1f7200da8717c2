"""A follower's pull loop: one task per leader broker, fetching every partition it follows there.

Requests are ordinary Fetch requests (v15: topic ids, current leader epoch, last fetched epoch,
and the replica's id with its broker epoch, so the leader readmits to the ISR only a fetch of
this broker's current incarnation, KIP-903),
so the leader answers from the same code path as consumers, sending stored batches as they are.
Each answer is applied per partition: a `diverging_epoch` truncates the divergent tail, records
are appended at the leader's offsets, and the follower's high watermark follows the leader's.
A partition whose leadership changed while a request was in flight ignores that answer.
"""
import asyncio
import logging
from typing import Any, Protocol

from minilog.connector.client.types import KafkaConnectionError
from minilog.connector.protocol import ApiKey, ErrorCode, KafkaError, request

from .partition import Partition

log = logging.getLogger("minilog.broker.fetcher")

FETCH_VERSION = 15
_FETCH = request(ApiKey.FETCH)
_RETRY = {ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH,
          ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}


class FetchSource(Protocol):
    """What a fetcher reads of its replica manager (the manager imports the fetcher)."""

    image: Any  # the metadata image: topic ids
    peers: Any  # the broker's peer connections
    node_id: int
    fetch_wait_ms: int
    fetch_max_bytes: int
    fetch_response_max_bytes: int

    @property
    def broker_epoch(self) -> int: ...

    def address_of(self, node_id: int) -> tuple[str, int] | None: ...


class ReplicaFetcher:
    def __init__(self, manager: FetchSource, leader_id: int) -> None:
        self.manager, self.leader_id = manager, leader_id
        self.partitions: dict[tuple[str, int], Partition] = {}
        self._task: asyncio.Future[None] | None = None

    def add(self, partition: Partition) -> None:
        self.partitions[(partition.topic, partition.index)] = partition
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._run())

    def remove(self, partition: Partition) -> None:
        self.partitions.pop((partition.topic, partition.index), None)

    async def stop(self) -> None:
        self.partitions.clear()
        if self._task:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    def _request(self, sent: dict[tuple[str, int], int], names: dict[bytes, str]) -> Any:
        """The next Fetch; fills `sent` (partition -> leader epoch asked in) and `names`
        (topic id -> name, to read the answer)."""
        by_topic: dict[str, list[Any]] = {}
        for key, p in self.partitions.items():
            ts = self.manager.image.topics.get(p.topic)
            if ts is None:
                continue  # deleted: the replica manager drops it next
            sent[key] = p.leader_epoch
            names[ts.topic_id] = p.topic
            by_topic.setdefault(p.topic, []).append(_FETCH.make(
                "topics", "partitions", partition=p.index, current_leader_epoch=p.leader_epoch,
                fetch_offset=p.log_end_offset,
                last_fetched_epoch=p.epoch_cache.latest_epoch if p.epoch_cache else -1,
                log_start_offset=p.log_start_offset,
                partition_max_bytes=self.manager.fetch_max_bytes))
        state = _FETCH.make("replica_state", replica_id=self.manager.node_id,
                            replica_epoch=self.manager.broker_epoch)
        ids = {name: i for i, name in names.items()}
        return _FETCH.cls(replica_state=state, max_wait_ms=self.manager.fetch_wait_ms,
                          min_bytes=1, max_bytes=self.manager.fetch_response_max_bytes,
                          isolation_level=0, session_id=0,
                          session_epoch=-1, forgotten_topics_data=[], rack_id="",
                          topics=[_FETCH.make("topics", topic_id=ids[t], partitions=ps)
                                  for t, ps in by_topic.items()])

    async def _run(self) -> None:
        while self.partitions:
            address = self.manager.address_of(self.leader_id)
            if address is None:
                await asyncio.sleep(0.2)
                continue
            sent: dict[tuple[str, int], int] = {}
            names: dict[bytes, str] = {}
            body = self._request(sent, names)
            if not sent:
                await asyncio.sleep(0.2)
                continue
            try:
                resp = await self.manager.peers.send(
                    address, ApiKey.FETCH, body, FETCH_VERSION,
                    timeout=self.manager.fetch_wait_ms / 1000 + 10, purpose="replica")
            except (KafkaError, KafkaConnectionError, OSError) as e:
                log.debug("fetch from broker %d failed: %s", self.leader_id, e)
                await asyncio.sleep(0.2)
                continue
            backoff = False
            for t in resp.responses:
                for r in t.partitions:
                    backoff |= not self._apply(names.get(t.topic_id), r, sent)
            if backoff:
                await asyncio.sleep(0.1)

    def _apply(self, topic: str | None, r: Any, sent: dict[tuple[str, int], int]) -> bool:

        """Apply one partition's answer; False if it was an error worth backing off for."""
        if topic is None:
            return True  # not a topic this request named
        key = (topic, r.partition_index)
        p = self.partitions.get(key)
        if p is None or p.is_leader or p.leader_epoch != sent.get(key):
            return True
        if r.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
            # Behind the leader's log start (retention, DeleteRecords): start over there. A
            # follower ahead of the leader's log end is told so with a diverging epoch instead
            # (`Partition.follower_fetched`), so nothing here cuts records the leader may have.
            if p.log_end_offset < r.log_start_offset:
                p.log.truncate_fully_and_start_at(r.log_start_offset)
                if p.epoch_cache is not None:
                    p.epoch_cache.clear()
                p.high_watermark = r.log_start_offset
                return True
            return False
        if r.error_code:
            if r.error_code not in _RETRY:
                log.warning("fetching %s-%d from broker %d: error %d", topic, r.partition_index,
                            self.leader_id, r.error_code)
            return False
        if r.diverging_epoch is not None:
            at = p.truncate_for_divergence(r.diverging_epoch.epoch, r.diverging_epoch.end_offset)
            log.info("%s-%d truncated to %d after a leader change", topic, r.partition_index, at)
            return True
        if r.records:
            p.append_as_follower(r.records)
        if p.log_start_offset < r.log_start_offset <= p.log_end_offset:  # DeleteRecords, retention
            p.log.delete_records_before(r.log_start_offset)
        p.follower_high_watermark(r.high_watermark)
        return True
