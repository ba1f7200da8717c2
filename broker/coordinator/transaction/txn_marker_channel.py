"""The coordinator's channel to partition leaders for transaction markers, batched per broker.

As Kafka's TransactionMarkerChannelManager, markers queue per destination broker and go out
together: every marker queued for a broker in the same turn of the event loop (transactions
of several producers ending at once) goes in one WriteTxnMarkers request, and the requests to
different brokers go out at once. The receiving broker appends them all, then waits for their
replication together (`txn_markers.acknowledged`). Markers for partitions this broker leads are
written here directly.
"""
from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from minilog.connector.client.types import KafkaConnectionError
from minilog.connector.protocol import ApiKey, ErrorCode, KafkaError, request

from .txn_markers import MARKER_ACK_TIMEOUT_MS, TopicPartition, TxnMarker, indexes_by_topic
from .txn_markers import write_local

if TYPE_CHECKING:
    from ..broker_view import MarkerBroker

log = logging.getLogger("minilog.broker.txn")
_WRITE = request(ApiKey.WRITE_TXN_MARKERS)

Results = dict[TopicPartition, int]


class MarkerChannel:
    def __init__(self, broker: MarkerBroker) -> None:
        self.broker = broker
        self._queued: dict[int, list[tuple[TxnMarker, asyncio.Future[Results]]]] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    async def write(self, leader: int, marker: TxnMarker) -> Results:
        """{tp: error code} once broker `leader` answered for `marker` (its partitions all
        led there, as far as this broker knows)."""
        if leader == self.broker.config.node_id:
            return await write_local(self.broker, marker)
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[Results] = loop.create_future()
        queue = self._queued.setdefault(leader, [])
        if not queue:
            loop.call_soon(self._flush, leader)
        queue.append((marker, answer))
        return await answer

    def _flush(self, leader: int) -> None:
        batch = self._queued.pop(leader, [])
        if batch:
            task = asyncio.ensure_future(self._send(leader, batch))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _send(self, leader: int, batch: list[tuple[TxnMarker, asyncio.Future[Results]]]) -> None:
        try:
            answers = await self._request(leader, [m for m, _ in batch])
        except asyncio.CancelledError:  # the broker stops
            for _, future in batch:
                future.cancel()
            raise
        except Exception as e:  # noqa: BLE001 - a bug: each waiting transaction hears of it
            for _, future in batch:
                if not future.done():
                    future.set_exception(e)
            return
        for (_, future), results in zip(batch, answers):
            if not future.done():
                future.set_result(results)

    async def _request(self, leader: int, markers: list[TxnMarker]) -> list[Results]:
        """One WriteTxnMarkers to `leader`: {tp: error} per marker, in order."""
        failed: list[Results] = [dict.fromkeys(m.partitions, int(ErrorCode.NOT_LEADER_OR_FOLLOWER))
                                 for m in markers]
        endpoint = self.broker.metadata.brokers.get(leader)
        if leader < 0 or endpoint is None:
            return failed
        body = _WRITE.cls(markers=[_WRITE.make(
            "markers", producer_id=m.producer_id, producer_epoch=m.producer_epoch,
            transaction_result=m.commit, coordinator_epoch=m.coordinator_epoch, topics=[
                _WRITE.make("markers", "topics", name=t, partition_indexes=ids)
                for t, ids in indexes_by_topic(m.partitions).items()]) for m in markers])
        address = endpoint.address_on(self.broker.config.inter_broker_listener.name)
        try:
            answer = await self.broker.peers.send(address, ApiKey.WRITE_TXN_MARKERS, body, 1,
                                                  timeout=MARKER_ACK_TIMEOUT_MS / 1000 + 5,
                                                  purpose="txn-markers")
        except (KafkaError, KafkaConnectionError, OSError) as e:
            log.info("WriteTxnMarkers to broker %d failed: %s", leader, e)
            return failed
        # answers come per producer id, in request order (one transaction per producer)
        by_producer: dict[int, list[Any]] = {}
        for m in answer.markers:
            by_producer.setdefault(m.producer_id, []).append(m)
        out: list[Results] = []
        for m in markers:
            results: Results = dict.fromkeys(m.partitions, int(ErrorCode.UNKNOWN_SERVER_ERROR))
            entries = by_producer.get(m.producer_id)
            entry = entries.pop(0) if entries else None
            for t in entry.topics if entry is not None else ():
                for p in t.partitions:
                    results[(t.name, p.partition_index)] = p.error_code
            out.append(results)
        return out

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
