"""Per-record checks of produced batches that Kafka's LogValidator makes before an append.

The broker otherwise moves batches without decoding records; a compacted topic is the
exception, as in Kafka: the cleaner deletes records without a key, so they must be refused
before they are acknowledged. Refusals name each bad record by its index in its batch
(KIP-467 `record_errors`), which lets clients fail exactly those records.
"""
from typing import NamedTuple

from minilog.connector import compression as codecs
from minilog.connector.batch import HEADER_SIZE
from minilog.connector.protocol import ErrorCode
from minilog.connector.records import record_spans


class RecordErrors(NamedTuple):
    """A refused append: Kafka's error code and message, and (batch index, message) pairs."""

    code: int
    message: str
    records: list


def batch_payload(raw, h):
    """The records of one batch, decompressed."""
    data = raw[HEADER_SIZE:]
    return codecs.decompress(h.compression, data) if h.compression else data


def validate_keys(batches, topic, partition):
    """RecordErrors for the keyless records of `batches` (a compacted topic's), or None.

    `batches` is a list of (batch bytes, BatchHeader) from `batch.split_batches`.
    """
    where = f"{topic}-{partition}"
    errors = []
    for raw, h in batches:
        if h.is_control:
            continue
        try:
            spans = list(record_spans(batch_payload(raw, h), h.record_count))
        except Exception as e:  # noqa: BLE001 - any undecodable payload is a corrupt batch
            return RecordErrors(ErrorCode.CORRUPT_MESSAGE, f"unreadable records: {e}", [])
        errors += [(index, "Compacted topic cannot accept message without key in topic "
                           f"partition {where}")
                   for index, span in enumerate(spans) if span[4] is None]
    if not errors:
        return None
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in errors[:3])
    return RecordErrors(ErrorCode.INVALID_RECORD,
                        f"One or more records have been rejected due to {len(errors)} record "
                        f"errors in total, and only showing the first three errors at most: "
                        f"[{shown}]", errors)
