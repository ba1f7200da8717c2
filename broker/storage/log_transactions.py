"""A log's producer state and transactions, kept in step with its batches.

Apart from `log.py` because it is the other half of an append (Kafka's ProducerAppendInfo and
the marker handling of UnifiedLog): before anything is written each idempotent or transactional
batch is checked against the producer state (`ProducerBatches.check`), and once written the
state moves on and transaction markers close their transactions (`ProducerBatches.apply`,
`end_transaction`), indexing the aborted ones. After a truncation or on open the same state is
rebuilt from a snapshot and the batches after it (`rebuild`).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from minilog.connector.batch import BatchHeader
from minilog.connector.records import CONTROL_ABORT, control_marker

from .producer_state import (
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    ProducerAppend,
    ProducerStateManager,
    next_sequence,
)
from .txn_index import AbortedTxn, TxnIndex

if TYPE_CHECKING:
    from .log import Log


class ProducerBatches:
    """The producer-state side of one append: checks per batch, applied once written."""

    __slots__ = ("_state", "_staged", "_markers")

    def __init__(self, state: ProducerStateManager) -> None:
        self._state = state
        self._staged: ProducerAppend | None = None
        # (header, offset, marker bytes or None for a coordinator's transactional write, ts)
        self._markers: list[tuple[BatchHeader, int, Any, int]] = []

    def check(self, h: BatchHeader, data: Any, offset: int, last: int,
              ts: int) -> tuple[int, int] | None:
        """Check a batch of producer `h.producer_id` (not NO_PRODUCER_ID) about to be written at
        `offset`..`last`: (first, last offset) it was written at before if it repeats one of the
        producer's last batches, else None. Raises ProducerStateError (sequence gap, stale
        producer or coordinator epoch): nothing of the append is written then."""
        if h.is_control:
            self._state.check_marker(h.producer_id, h.producer_epoch, control_marker(data)[1])
            self._markers.append((h, offset, data, ts))
        elif h.base_sequence == NO_SEQUENCE and h.is_transactional:
            # A coordinator's transactional write (TxnOffsetCommit): no sequence.
            self._state.check_epoch(h.producer_id, h.producer_epoch)
            self._markers.append((h, offset, None, ts))
        else:
            staged = self._staged = self._staged or self._state.stage()
            last_seq = next_sequence(h.base_sequence, h.last_offset_delta)
            dup = staged.check(h.producer_id, h.producer_epoch, h.base_sequence, last_seq)
            if dup is not None:
                return dup[1], dup[2]
            staged.update(h.producer_id, h.producer_epoch, h.base_sequence, last_seq,
                          offset, last, ts, h.is_transactional)
        return None

    def apply(self, end: Callable[[BatchHeader, int, Any, int], None]) -> None:
        """The batches are written: commit the sequences, begin the transactions of
        coordinator writes and end those the markers close (`end(h, offset, data, ts)`)."""
        if self._staged is not None:
            self._staged.commit()
        for h, at, data, ts in self._markers:
            if data is None:
                self._state.begin_transaction(h.producer_id, h.producer_epoch, at, ts)
            else:
                end(h, at, data, ts)


def end_transaction(state: ProducerStateManager, index: TxnIndex, h: BatchHeader, offset: int,
                    data: Any, ts: int, segment_base: int) -> None:
    """A commit or abort marker at `offset`: close the producer's open transaction here,
    and index it (in the segment at `segment_base`) if aborted."""
    kind, coordinator_epoch = control_marker(data)
    first = state.end_transaction(h.producer_id, h.producer_epoch, coordinator_epoch, ts)
    if first >= 0 and kind == CONTROL_ABORT:
        unstable = state.first_unstable_offset()
        index.append(AbortedTxn(h.producer_id, first, offset,
                                offset + 1 if unstable is None else unstable), segment_base)


def rebuild(log: Log, state: ProducerStateManager, index: TxnIndex, log_end: int,
            first_base: int) -> None:
    """Newest snapshot at or below the log end, then replay of the batches after it
    (markers included: the aborts after the snapshot are indexed again)."""
    state.truncate_snapshots_after(log_end)
    snap = state.load()
    start = first_base if snap is None else max(snap, first_base)
    index.truncate_to(start)

    def replay_marker(h: BatchHeader) -> None:
        data = log.read(h.base_offset, h.size)
        end_transaction(state, index, h, h.base_offset, bytes(data[:h.size]), h.max_timestamp,
                        log.active_segment.base_offset)
    state.rebuild_from(log, start, on_marker=replay_marker)

