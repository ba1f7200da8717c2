"""One transactional id's state, as the transaction coordinator keeps it in `__transaction_state`.

Kafka's TransactionMetadata and its record (key version 0: the transactional id; value
version 0: producer id and epoch, timeout, state, partitions, timestamps), and the rules of its
state machine: which request is allowed in which state, with which error. No clock or I/O:
the coordinator passes in the time and writes what these functions return.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, replace
from typing import Any

from minilog.connector.protocol import ErrorCode

EMPTY, ONGOING, PREPARE_COMMIT, PREPARE_ABORT = "Empty", "Ongoing", "PrepareCommit", "PrepareAbort"
COMPLETE_COMMIT, COMPLETE_ABORT, DEAD, PREPARE_EPOCH_FENCE = (
    "CompleteCommit", "CompleteAbort", "Dead", "PrepareEpochFence")
STATES = (EMPTY, ONGOING, PREPARE_COMMIT, PREPARE_ABORT, COMPLETE_COMMIT, COMPLETE_ABORT, DEAD,
          PREPARE_EPOCH_FENCE)  # Kafka's TransactionState ids are these positions
MAX_EPOCH = 32767 - 1  # Kafka keeps Short.MaxValue for itself

_I16, _I32, _I64 = struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">q")
_VALUE_HEAD = struct.Struct(">hqhib")  # version, producer id, epoch, timeout, state
_TIMES = struct.Struct(">qq")          # last update, start


@dataclass
class TxnMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: str = EMPTY
    partitions: frozenset[tuple[str, int]] = frozenset()  # {(topic, partition)}
    update_ms: int = -1
    start_ms: int = -1
    last_producer_epoch: int = -1  # the epoch before the last bump, for KIP-360 retries
    pending: str | None = None     # a state being written: other requests must wait

    def to(self, state: str, now_ms: int, **changes: Any) -> TxnMetadata:
        """The metadata after a transition (a new object: the old stays until it is written)."""
        return replace(self, state=state, update_ms=now_ms, pending=None, **changes)


def txn_key(transactional_id: str) -> bytes:
    raw = transactional_id.encode()
    return _I16.pack(0) + _I16.pack(len(raw)) + raw


def parse_txn_key(key: bytes) -> str | None:
    """The transactional id, or None for a key of another version."""
    if len(key) < 4 or _I16.unpack_from(key, 0)[0] != 0:
        return None
    (n,) = _I16.unpack_from(key, 2)
    return bytes(key[4:4 + n]).decode()


def txn_value(md: TxnMetadata) -> bytes:
    parts = [_VALUE_HEAD.pack(0, md.producer_id, md.producer_epoch, md.timeout_ms,
                              STATES.index(md.state))]
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(md.partitions):
        by_topic.setdefault(topic, []).append(partition)
    parts.append(_I32.pack(len(by_topic)))
    for topic, ids in by_topic.items():
        raw = topic.encode()
        parts += [_I16.pack(len(raw)), raw, _I32.pack(len(ids)), *(_I32.pack(i) for i in ids)]
    parts.append(_TIMES.pack(md.update_ms, md.start_ms))
    return b"".join(parts)


def parse_txn_value(transactional_id: str, value: bytes) -> TxnMetadata:
    _, pid, epoch, timeout, state = _VALUE_HEAD.unpack_from(value, 0)
    pos = _VALUE_HEAD.size
    (count,) = _I32.unpack_from(value, pos)
    pos += 4
    partitions = set()
    for _ in range(max(count, 0)):
        (n,) = _I16.unpack_from(value, pos)
        topic = bytes(value[pos + 2:pos + 2 + n]).decode()
        pos += 2 + n
        (k,) = _I32.unpack_from(value, pos)
        pos += 4
        for _ in range(k):
            partitions.add((topic, _I32.unpack_from(value, pos)[0]))
            pos += 4
    update_ms, start_ms = _TIMES.unpack_from(value, pos)
    return TxnMetadata(transactional_id, pid, epoch, timeout, STATES[state],
                       frozenset(partitions), update_ms, start_ms)


# -- the rules -------------------------------------------------------------------------------------
def producer_error(md: TxnMetadata, producer_id: int, epoch: int) -> int:
    """0 if the request comes from the current producer of this transactional id."""
    if producer_id != md.producer_id:
        return ErrorCode.INVALID_PRODUCER_ID_MAPPING
    if epoch != md.producer_epoch:
        return ErrorCode.PRODUCER_FENCED
    return 0


def add_error(md: TxnMetadata) -> int:
    """AddPartitionsToTxn / AddOffsetsToTxn in this state: 0 or the error to answer."""
    if md.pending is not None or md.state in (PREPARE_COMMIT, PREPARE_ABORT):
        return ErrorCode.CONCURRENT_TRANSACTIONS
    if md.state == PREPARE_EPOCH_FENCE or md.state == DEAD:
        return ErrorCode.INVALID_TXN_STATE
    return 0


def end_decision(md: TxnMetadata, commit: bool) -> tuple[int, str | None]:
    """EndTxn in this state: (error, the PREPARE_* state to write or None when nothing to do)."""
    if md.pending is not None:
        return ErrorCode.CONCURRENT_TRANSACTIONS, None
    if md.state == ONGOING:
        return 0, PREPARE_COMMIT if commit else PREPARE_ABORT
    if md.state == (COMPLETE_COMMIT if commit else COMPLETE_ABORT):
        return 0, None  # a retry of the EndTxn that completed
    if md.state == (PREPARE_COMMIT if commit else PREPARE_ABORT):
        return ErrorCode.CONCURRENT_TRANSACTIONS, None
    return ErrorCode.INVALID_TXN_STATE, None


def bumped(md: TxnMetadata, new_producer_id: int | None, now_ms: int) -> TxnMetadata:
    """A new epoch for InitProducerId, or `new_producer_id` (given once the epoch is
    exhausted) at epoch 0; the transaction starts out empty."""
    if new_producer_id is not None:
        return md.to(EMPTY, now_ms, producer_id=new_producer_id, producer_epoch=0,
                     last_producer_epoch=-1, partitions=frozenset(), start_ms=-1)
    return md.to(EMPTY, now_ms, producer_epoch=md.producer_epoch + 1,
                 last_producer_epoch=md.producer_epoch, partitions=frozenset(), start_ms=-1)

