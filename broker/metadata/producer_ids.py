"""Producer ids, handed out only from blocks the controller has committed.

Kafka's scheme (KIP-730): the active controller allocates blocks of ids to brokers with
AllocateProducerIds; the allocation is a metadata record, and a block is given to a broker only
once the quorum has committed that record, so a controller that has lost its majority can never
give the same ids twice. Each broker then answers InitProducerId from its own block, whether or
not it is the controller. A broker without ids (no block yet, no controller reachable, the
controller unable to commit) answers COORDINATOR_LOAD_IN_PROGRESS, which clients retry.

`ProducerIdBlocks` is the broker side, `ProducerIdAllocator` the controller side; a single
broker without a quorum allocates its blocks from its local metadata file.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import NamedTuple

from minilog.connector.client.types import KafkaConnectionError
from minilog.connector.protocol import ApiKey, ErrorCode, KafkaError, request

from ..raft.raft_node import NotLeader
from . import records

log = logging.getLogger("minilog.broker.producer_ids")

BLOCK_SIZE = 1000           # Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE
COMMIT_TIMEOUT_S = 5.0
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
    """The active controller's side: one committed metadata record per block."""

    def __init__(self, store):
        self.store = store

    async def allocate(self) -> Block:
        raft = self.store.raft
        if not raft.is_leader:
            raise ProducerIdsUnavailable("not the active controller", ErrorCode.NOT_CONTROLLER)
        # Everything in the log committed first, so that blocks the previous controllers
        # gave out are in the image we read next.
        if not await raft.wait_committed(raft.partition.log_end_offset - 1, COMMIT_TIMEOUT_S):
            raise ProducerIdsUnavailable("the metadata log could not be committed",
                                         ErrorCode.NOT_CONTROLLER)
        # The working view holds this controller's own appends, committed or not, so two
        # allocations in flight never overlap.
        start = self.store.working.next_producer_id
        try:
            offset = self.store.append([records.producer_ids_record(start + BLOCK_SIZE)])
        except NotLeader:
            raise ProducerIdsUnavailable("no longer the active controller",
                                         ErrorCode.NOT_CONTROLLER) from None
        if not await raft.wait_committed(offset, COMMIT_TIMEOUT_S):
            raise ProducerIdsUnavailable(
                f"the allocation of producer ids {start}.. was not committed",
                ErrorCode.NOT_CONTROLLER)
        return Block(start, BLOCK_SIZE)


def local_blocks(store) -> ProducerIdBlocks:
    """A broker without a quorum: blocks from its own metadata file, saved before use."""
    async def fetch() -> Block:
        return Block(store.allocate_producer_id_block(BLOCK_SIZE), BLOCK_SIZE)
    return ProducerIdBlocks(fetch)


def quorum_blocks(broker) -> ProducerIdBlocks:
    """A broker of a replicated cluster: blocks from the active controller, itself or remote."""
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


async def _fetch_once(broker) -> Block:
    raft = broker.quorum.raft
    if raft.is_leader and broker.producer_id_allocator is not None:
        return await broker.producer_id_allocator.allocate()
    leader = raft.leader_id
    if leader is None or leader not in raft.voters or leader == broker.config.node_id:
        raise ProducerIdsUnavailable("no active controller known")
    body = _ALLOCATE.cls(broker_id=broker.config.node_id,
                         broker_epoch=broker.lifecycle.epoch if broker.lifecycle else -1)
    try:
        answer = await broker.peers.send(raft.voters[leader], ApiKey.ALLOCATE_PRODUCER_IDS,
                                         body, 0, timeout=15.0, purpose="forward")
    except (KafkaError, KafkaConnectionError, OSError) as e:
        raise ProducerIdsUnavailable(f"controller {leader} unreachable: {e}") from None
    if answer.error_code:
        raise ProducerIdsUnavailable(f"controller {leader} answered "
                                     f"{ErrorCode(answer.error_code).name}")
    return Block(answer.producer_id_start, answer.producer_id_len)
