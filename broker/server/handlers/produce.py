"""Produce: validate whole batches, append them to partition leaders, answer per partition.

The broker checks each batch's framing, CRC and record count, then stamps offsets; records
are never decoded, except for Produce v0-v2's message formats v0/v1, converted to v2 as Kafka 3.9
does (`up_convert.py`). acks=0 requests get no response at all, as in Kafka: one that fails closes
the connection instead, the only way its client can notice.
"""
import time

from minilog.connector import batch as batch_format
from minilog.connector.protocol import ApiKey, ErrorCode, response

from ...coordinator.transaction import txn_verify
from ...security.access import TOPIC, TXN, WRITE, allowed
from ...storage.log_validator import validate_keys
from ...storage.producer_errors import append_error_code
from ...storage.up_convert import to_v2_batch
from . import NO_RESPONSE, CloseConnection, Pending, handles, leader_partition

_RESP = response(ApiKey.PRODUCE)
_PARTITION = _RESP.child("responses", "partition_responses").cls  # one per partition produced to
_RECORD_ERROR = _RESP.child("responses", "partition_responses", "record_errors").cls


def _partition_result(index, code, base_offset=-1, log_append_time=-1, log_start=-1, message=None,
                      record_errors=()):
    return _PARTITION(index=index, error_code=code, base_offset=base_offset,
                      log_append_time_ms=log_append_time, log_start_offset=log_start,
                      error_message=message,
                      record_errors=[_RECORD_ERROR(batch_index=i, batch_index_error_message=m)
                                     for i, m in record_errors])


def _batch_refusal(batches, transactional_id):
    """(error code, message) for batches a client may not write, in Kafka's order of checks;
    None when all may be appended. One pass over the headers: every produce asks."""
    control = anonymous_txn = txn = False
    for _, h in batches:
        control |= h.is_control
        if h.is_transactional:
            txn = True
            anonymous_txn |= h.producer_id < 0
    if control:
        return ErrorCode.INVALID_RECORD, "clients may not write control batches"
    if anonymous_txn:
        return ErrorCode.INVALID_RECORD, "a transactional batch needs a producer id"
    if txn and transactional_id is None:
        return (ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                "a transactional batch needs a transactional id")
    return None


def produce_to_partition(broker, topic, index, records, acks, message_sets=False,
                         transactional_id=None):
    """`message_sets`: the records may be in message formats v0/v1 (Produce v0-v2);
    `transactional_id`: the request's, which any transactional batch needs."""
    partition, code = leader_partition(broker, topic, index)
    if partition is None:
        return _partition_result(index, code)
    if not records:
        return _partition_result(index, ErrorCode.CORRUPT_MESSAGE, message="empty record set")
    if message_sets:
        try:
            records = to_v2_batch(records, partition.log.config.message_timestamp_type
                                  == "LogAppendTime")
        except batch_format.InvalidBatch as e:
            return _partition_result(index, e.code, message=str(e))
    try:
        batches = batch_format.split_batches(records, partition.max_message_bytes)
    except batch_format.InvalidBatch as e:
        return _partition_result(index, e.code, message=str(e))
    refused = _batch_refusal(batches, transactional_id)
    if refused is not None:
        return _partition_result(index, refused[0], message=refused[1])
    if "compact" in partition.log.config.cleanup_policy.split(","):
        refused = validate_keys([(records[pos:pos + h.size], h) for pos, h in batches],
                                topic, index)
        if refused:
            return _partition_result(index, refused.code, log_start=partition.log_start_offset,
                                     message=refused.message, record_errors=refused.records)
    if acks == -1 and len(partition.isr) < partition.min_insync_replicas:
        return _partition_result(index, ErrorCode.NOT_ENOUGH_REPLICAS)
    try:
        view = memoryview(records)  # writable when it is the request's own receive buffer
        result = partition.append_as_leader([(view[pos:pos + h.size], h) for pos, h in batches],
                                            in_place=True)
    except Exception as e:  # noqa: BLE001 - mapped to Kafka's codes below
        code, message = append_error_code(e)
        return _partition_result(index, code, message=message)
    broker.metrics.produced(topic, len(records), sum(h.record_count for _, h in batches))
    return _partition_result(index, 0, result.first_offset, result.log_append_time,
                             partition.log_start_offset)


def _when_replicated(broker, results, timeout_ms):
    """acks=all: the response once the ISR has every batch appended; at once (None) when it
    has already (a partition whose ISR is its leader alone). The offsets to wait for are taken
    now, before the connection's next request appends."""
    waits = []
    for t in results:
        for part in t.partition_responses:
            if part.error_code == 0:
                partition = broker.partition(t.name, part.index)
                last = partition.log_end_offset - 1
                code = broker.replicas.acks_now(partition, last)
                if code is None:
                    waits.append((part, partition, last))
                else:
                    part.error_code = code
    if not waits:
        return None

    async def respond():
        # One partition after the other against one deadline: the answer is ready when the
        # slowest is, as with a wait each, without a task per partition for the usual one.
        deadline = time.monotonic() + timeout_ms / 1000
        for part, partition, last in waits:
            left_ms = max(0.0, (deadline - time.monotonic()) * 1000)
            part.error_code = await broker.replicas.wait_for_acks(partition, last, left_ms)
        return _RESP.cls(responses=results, throttle_time_ms=0)
    return respond()


def _has_transactional_records(req) -> bool:
    """Whether a partition's first batch is transactional (Kafka's
    `RequestUtils.hasTransactionalRecords`; a later one is refused by `produce_to_partition`).
    Produce v0-v2 carry message formats v0/v1, which cannot be."""
    for t in req.topic_data:
        for p in t.partition_data:
            records = p.records
            if records is not None and len(records) >= batch_format.HEADER_SIZE \
                    and records[16] == 2 and batch_format.read_header(records).is_transactional:
                return True
    return False


def _refusal(broker, header, req) -> int:
    """Transactional records need a transactional id, and WRITE on it (Kafka's check before
    any topic's, authorizer or not: without an id nothing would ever end their transaction);
    the topics need WRITE each."""
    if header.api_version < 3 or not _has_transactional_records(req):
        return 0
    txn = req.transactional_id
    if txn is None or not allowed(broker, header, WRITE, TXN, txn):
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    return 0


@handles(ApiKey.PRODUCE, 0, 11)
async def produce(broker, header, req):
    acks = req.acks
    if acks not in (0, 1, -1):
        results = [_RESP.make("responses", name=t.name, partition_responses=[
            _partition_result(p.index, ErrorCode.INVALID_REQUIRED_ACKS) for p in t.partition_data])
            for t in req.topic_data]
        return _RESP.cls(responses=results, throttle_time_ms=0)
    refused = _refusal(broker, header, req)
    unverified = {} if refused else await txn_verify.refused(broker, req)
    results = []
    for t in req.topic_data:
        code = refused or (0 if allowed(broker, header, WRITE, TOPIC, t.name)
                           else ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        if code:
            parts = [_partition_result(p.index, code) for p in t.partition_data]
        else:
            parts = [_partition_result(p.index, unverified[(t.name, p.index)])
                     if (t.name, p.index) in unverified else
                     produce_to_partition(broker, t.name, p.index, p.records, acks,
                                          header.api_version < 3,
                                          getattr(req, "transactional_id", None))
                     for p in t.partition_data]
        results.append(_RESP.make("responses", name=t.name, partition_responses=parts))
    if acks == -1 and broker.replicas is not None:
        for t in req.topic_data:  # appended: let the frame's buffer serve the next request
            for p in t.partition_data:
                p.records = None
        replicated = _when_replicated(broker, results, req.timeout_ms)
        if replicated is not None:
            return Pending(replicated)
    elif acks == 0:
        failed = [f"{t.name}-{p.index}: error {p.error_code}" for t in results
                  for p in t.partition_responses if p.error_code]
        if failed:  # the client hears of it only by the connection closing, as in Kafka
            raise CloseConnection(f"acks=0 produce failed ({', '.join(failed)})")
        return NO_RESPONSE
    return _RESP.cls(responses=results, throttle_time_ms=0)
