"""The idempotent producer's sequence numbers, per partition, and how they recover (KIP-360).

Each batch carries the producer id, epoch and the sequence number of its first record; the
broker takes a partition's batches only in sequence order. A sequence can go missing for
good: a batch sent once, then failed or expired before an answer, may or may not be written
(`unresolved`), and a broker that lost the producer's state (a re-created topic, retention,
an unclean restart) expects sequence 0. As the Java client's TransactionManager does, the
partition then waits until nothing of it is in flight, and if the sequences really have a
gap (or the broker said UNKNOWN_PRODUCER_ID) the producer bumps its epoch and numbers that
partition's batches from 0 again, retries first; a broker accepts sequence 0 from a newer
epoch. Other partitions move to the new epoch once their own in-flight batches answered.

The sender (`sender.py`) owns the batches and queues; this module owns the numbers and the
decisions, and knows nothing of connections.
"""
from collections.abc import Iterable

from minilog.connector.protocol import ErrorCode

from .producer_batch import ProducerBatch

SEQ_WRAP = 1 << 31
MAX_EPOCH = 32767
SEQUENCE_ERRORS = frozenset({ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                             ErrorCode.UNKNOWN_PRODUCER_ID})


def _after(batch: ProducerBatch) -> int:
    """The sequence number that follows `batch`."""
    return ((batch.base_sequence or 0) + len(batch.records or ())) % SEQ_WRAP


class PartitionState:
    """One partition's batches in flight and to retry, and its sequence numbering.

    `epoch` is the producer epoch `next_sequence` counts in (None: not numbered yet);
    `last_acked` the last sequence the broker acknowledged in it; `unresolved` the sequence
    after a batch that failed once sent; `restart` asks for a new epoch and sequences from 0.
    """
    __slots__ = ("epoch", "in_flight", "last_acked", "next_sequence", "restart", "retry",
                 "unresolved")

    def __init__(self) -> None:
        self.in_flight = 0
        self.retry: list[ProducerBatch] = []
        self.reset(None)

    def reset(self, epoch: int | None) -> None:
        """Number from 0 in `epoch` (a new producer id or epoch)."""
        self.epoch, self.next_sequence, self.last_acked = epoch, 0, -1
        self.unresolved: int | None = None
        self.restart = False

    def take(self, n: int) -> int:
        """The base sequence of a batch of `n` records, sent for the first time."""
        base = self.next_sequence
        self.next_sequence = (base + n) % SEQ_WRAP
        return base

    def _counts(self, batch: ProducerBatch) -> bool:
        """Whether `batch` was numbered in this partition's current epoch."""
        return batch.base_sequence is not None and batch.epoch == self.epoch

    def acked(self, batch: ProducerBatch) -> None:
        if self._counts(batch):
            self.last_acked = (_after(batch) - 1) % SEQ_WRAP

    def lost(self, batch: ProducerBatch) -> None:
        """`batch` failed after it was sent: whether its sequences were written is unknown."""
        if self._counts(batch):
            end = _after(batch)
            self.unresolved = end if self.unresolved is None else max(self.unresolved, end)

    def retry_sequence_error(self, code: int, batch: ProducerBatch) -> bool:
        """Java's canRetry for OUT_OF_ORDER_SEQUENCE_NUMBER and UNKNOWN_PRODUCER_ID: always
        retried; a restart is asked when the broker lost our state, or when the batch is the
        very next one expected (nothing earlier of ours is missing: the gap is real). A batch
        further on is out of order only because an earlier one failed: it just waits for it.
        """
        if not self._counts(batch):
            return False
        if code == ErrorCode.UNKNOWN_PRODUCER_ID:
            self.restart = True
        elif self.unresolved is not None:
            self.restart = self.restart or batch.base_sequence == self.unresolved
        elif batch.base_sequence == (self.last_acked + 1) % SEQ_WRAP:
            self.restart = True
        return True

    def settle(self, head: ProducerBatch, epoch: int) -> bool:
        """Before the head batch of the partition's queue is sent: True if it may go now.
        False while answers in flight are awaited, or when `restart` is set: the sender then
        bumps the producer epoch and calls `start_over`."""
        if self.restart or self.unresolved is not None:
            if head.data is not None and not self.restart:
                return True  # an already numbered retry goes first: its answer settles it
            if self.in_flight:
                return False
            if not self.restart and self.last_acked == (self.next_sequence - 1) % SEQ_WRAP:
                self.unresolved = None  # what failed was written after all: no gap
            else:
                self.restart = True
                return False
        if head.data is None and self.epoch != epoch:
            if self.in_flight:
                return False  # batches of the old epoch first, or they would be fenced
            self.reset(epoch)
        return True

    def start_over(self, epoch: int, queue: Iterable[ProducerBatch]) -> None:
        """Number the partition's queued batches from 0 in the bumped `epoch` (nothing of it
        is in flight): the already numbered ones, at the front, are encoded again."""
        for b in queue:
            if b.data is None:
                break
            b.data = None
        self.reset(epoch)
