"""A producer batch: records of one partition queued, sent and answered together.

Apart from the sender (`sender.py`) because it is the unit every part of the producer passes
around (Kafka's ProducerBatch): the accumulator fills it, the sender seals and sends it, and
completed futures keep it (only its offsets and timestamps) to build RecordMetadata when asked.
"""
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

from .types import RecordMetadata, TopicPartition

if TYPE_CHECKING:
    from minilog.connector.value_column import ValueColumn

    from .delivery import Delivery

# A key or value as the producer holds it: bytes, or (`Producer.send_arrow`, values of over
# 1 KB on average) a view of the Arrow column's buffer, which the batch encoder reads as is
Payload: TypeAlias = "bytes | memoryview | None"
# A record as the producer queues it: (timestamp ms, key, value, headers)
Record: TypeAlias = "tuple[int, Payload, Payload, Sequence[tuple[str, bytes | None]]]"
# What the producer queues: a record, or (`Producer.send_arrow` of values alone) rows of an
# Arrow column that become one batch, named with the partition `sender.COLUMN_PARTITION`
Queued: TypeAlias = "Record | ValueColumn"
# A record `Producer.send` queued for the loop thread: (topic, partition or None, record, its
# size, its future)
Pending: TypeAlias = "tuple[str, int | None, Queued, int, Delivery]"
# A record waiting for its topic's metadata: (partition or None, record, future, size, deadline)
Waiting: TypeAlias = "tuple[int | None, Queued, Delivery, int, float]"

_new_tuple = tuple.__new__


class ProducerBatch:
    """Records of one partition sent together, and what they became once answered."""

    __slots__ = (
        "attempts",
        "base_offset",
        "base_sequence",
        "created",
        "data",
        "deadline",
        "epoch",
        "futures",
        "last_error",
        "log_append_time",
        "open",
        "parts",
        "pid",
        "records",
        "retry_at",
        "size",
        "timestamps",
        "tp",
    )

    def __init__(self, tp: TopicPartition, now: float, deadline: float,
                 parts: list[int] | None) -> None:
        self.tp, self.created, self.deadline, self.parts = tp, now, deadline, parts
        # the records and their futures; deleted once completed (the futures keep the batch)
        self.records: list[Record] | ValueColumn = []
        self.futures: list[Delivery] = []
        self.size, self.open, self.attempts, self.retry_at = 0, True, 0, 0.0
        self.data: Any = None  # the encoded batch, fixed at its first send
        self.base_sequence: int | None = None
        self.pid: int | None = None
        self.epoch: int | None = None
        self.last_error: BaseException | None = None
        self.base_offset = -1
        self.log_append_time: int | None = None
        self.timestamps: list[int] | None = None

    def metadata(self, index: int) -> RecordMetadata:
        """RecordMetadata of the `index`th record of this completed batch."""
        lat, timestamps = self.log_append_time, self.timestamps
        ts = lat if lat is not None and lat >= 0 else timestamps[index] if timestamps else -1
        return _new_tuple(RecordMetadata, (
            self.tp[0], self.tp[1], self.base_offset + index if self.base_offset >= 0 else -1,
            ts))
