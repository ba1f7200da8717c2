"""Producer ids, handed out only from blocks the controller has committed.

Kafka's scheme (KIP-730): the active controller allocates blocks of ids to brokers with
AllocateProducerIds; the allocation is a metadata record, and a block is given to a broker only
once the quorum has committed that record, so a controller that has lost its majority can never
give the same ids twice. Each broker then answers InitProducerId from its own block, whether or
not it is the controller. A broker without ids (no block yet, no controller reachable, the
controller unable to commit) answers COORDINATOR_LOAD_IN_PROGRESS, which clients retry.

`ProducerIdBlocks` is the broker side, `ProducerIdAllocator` the controller side; a single
broker, the active controller of its one-voter quorum, allocates to itself the same way.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple

from minilog.connector.client.types import KafkaConnectionError
from minilog.connector.protocol import ApiKey, ErrorCode, KafkaError, request

from . import records
from .controller import broker_epoch_error
from .controller_result import ControllerResult, NotController

log = logging.getLogger("minilog.broker.producer_ids")

BLOCK_SIZE = 1000           # Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE
FIND_CONTROLLER_S = 5.0
_ALLOCATE = request(ApiKey.ALLOCATE_PRODUCER_IDS)


class Block(NamedTuple):
    start: int
    length: int


class ProducerIdsUnavailable(Exception):
    """No committed block could be had right now; the client should retry."""

    def __init__(self, reason: str, code: int = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS):
        super().__init__(reason)
        self.code = code


class ProducerIdBlocks:
    """A broker's current block of producer ids, refilled through `fetch_block` when spent."""

    def __init__(self, fetch_block: Callable[[], Awaitable[Block]]):
        self._fetch_block = fetch_block
        self._next = self._end = 0
        self._lock = asyncio.Lock()

    async def next_id(self) -> int:
        """A producer id no other producer has had; raises ProducerIdsUnavailable."""
        async with self._lock:
            if self._next >= self._end:
                block = await self._fetch_block()
                self._next, self._end = block.start, block.start + block.length
                log.info("producer ids %d..%d allocated to this broker", block.start,
                         self._end - 1)
            pid = self._next
            self._next += 1
            return pid


class ProducerIdAllocator:
    """The active controller's side: one committed metadata record per block, given only to a
    broker whose registration it is (the request's broker epoch; Kafka answers
    STALE_BROKER_EPOCH otherwise)."""

    def __init__(self, store: Any) -> None:
        self.store = store

    def decide(self, broker_id: int, broker_epoch: int) -> ControllerResult[Block | int]:
        """The next block (the working view holds this controller's own appends, committed or
        not, so two allocations in flight never overlap), or an error code."""
        view = self.store.working
        error = broker_epoch_error(view, broker_id, broker_epoch)
        if error:
            return ControllerResult.of(error)
        start = view.next_producer_id
        return ControllerResult.of(Block(start, BLOCK_SIZE),
                                   [records.producer_ids_record(start + BLOCK_SIZE)])

    async def allocate(self, broker_id: int, broker_epoch: int) -> Block:
        """A block for broker `broker_id`, once its record is committed; raises
        ProducerIdsUnavailable with the error to answer."""
        try:
            answer = await self.store.commit(self.decide(broker_id, broker_epoch))
        except NotController:
            raise ProducerIdsUnavailable("not (or no longer) the active controller",
                                         ErrorCode.NOT_CONTROLLER) from None
        if isinstance(answer, Block):
            return answer
        raise ProducerIdsUnavailable(f"broker {broker_id} at epoch {broker_epoch}: "
                                     f"{ErrorCode(answer).name}", answer)


def quorum_blocks(broker: Any) -> ProducerIdBlocks:
    """Blocks from the active controller, itself or remote."""
    async def fetch() -> Block:
        deadline = time.monotonic() + FIND_CONTROLLER_S
        while True:
            try:
                return await _fetch_once(broker)
            except ProducerIdsUnavailable as e:
                if time.monotonic() > deadline:
                    raise ProducerIdsUnavailable(str(e)) from None
                await asyncio.sleep(0.1)
    return ProducerIdBlocks(fetch)


async def _fetch_once(broker: Any) -> Block:
    raft = broker.quorum.raft
    epoch = broker.lifecycle.epoch if broker.lifecycle else -1
    if raft.is_leader and broker.producer_id_allocator is not None:
        return await broker.producer_id_allocator.allocate(broker.config.node_id, epoch)  # type: ignore[no-any-return]
    leader = raft.leader_id
    if leader is None or leader not in raft.voters or leader == broker.config.node_id:
        raise ProducerIdsUnavailable("no active controller known")
    body = _ALLOCATE.cls(broker_id=broker.config.node_id, broker_epoch=epoch)
    try:
        reply = await broker.peers.send(raft.voters[leader], ApiKey.ALLOCATE_PRODUCER_IDS,
                                         body, 0, timeout=15.0, purpose="forward")
    except (KafkaError, KafkaConnectionError, OSError) as e:
        raise ProducerIdsUnavailable(f"controller {leader} unreachable: {e}") from None
    if reply.error_code:
        raise ProducerIdsUnavailable(f"controller {leader} answered "
                                     f"{ErrorCode(reply.error_code).name}")
    return Block(reply.producer_id_start, reply.producer_id_len)
