"""Transactions (KIP-98, KIP-447): AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit
and, between brokers, WriteTxnMarkers. InitProducerId with a transactional id is in
`producer_ids.py`, beside the idempotent one.

The coordinator's rules are in `txn_coordinator.py` and `txn_state.py`; handlers translate the
versions' shapes. AddPartitionsToTxn v4 is KIP-890 part 1's broker-to-broker form (batched by
transaction, with `verify_only`: a partition leader asking, `txn_verify.py`), refused to
principals without CLUSTER_ACTION as in Kafka; v5 (the TRANSACTION_ABORTABLE error) and EndTxn
v5 belong to KIP-890 part 2 (epoch bumped per transaction), not implemented, so not advertised.
"""
import asyncio
import time

from minilog.connector.protocol import ApiKey, ErrorCode, response

from ...coordinator.group.group_records import OffsetAndMetadata
from ...coordinator.transaction import txn_markers
from ...security.access import CLUSTER, CLUSTER_ACTION, READ, WRITE, allowed, group_refusal, \
    topic_refusal, txn_refusal
from . import Pending, handles

_ADD_PARTITIONS = response(ApiKey.ADD_PARTITIONS_TO_TXN)
_ADD_OFFSETS = response(ApiKey.ADD_OFFSETS_TO_TXN)
_END = response(ApiKey.END_TXN)
_TXN_COMMIT = response(ApiKey.TXN_OFFSET_COMMIT)
_MARKERS = response(ApiKey.WRITE_TXN_MARKERS)

# KIP-588: versions before these know PRODUCER_FENCED as INVALID_PRODUCER_EPOCH.
PRODUCER_FENCED_SINCE = {ApiKey.INIT_PRODUCER_ID: 4, ApiKey.ADD_PARTITIONS_TO_TXN: 2,
                         ApiKey.ADD_OFFSETS_TO_TXN: 2, ApiKey.END_TXN: 2,
                         ApiKey.TXN_OFFSET_COMMIT: 2}


def for_version(code: int, api_key: int, version: int) -> int:
    if code == ErrorCode.PRODUCER_FENCED and version < PRODUCER_FENCED_SINCE[api_key]:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return code


def _coordinator(broker):
    return getattr(broker, "txn", None)


def _add_partitions_refusals(broker, header, transactional_id, wanted) -> dict:
    """Kafka's answer when the transactional id or a topic may not be written: the refused
    partitions get their authorization error, the others OPERATION_NOT_ATTEMPTED."""
    code = txn_refusal(broker, header, WRITE, transactional_id)
    if code:
        return dict.fromkeys(wanted, code)
    topics = {t: topic_refusal(broker, header, WRITE, t) for t, _ in wanted}
    if not any(topics.values()):
        return {}
    return {(t, i): topics[t] or ErrorCode.OPERATION_NOT_ATTEMPTED for t, i in wanted}


@handles(ApiKey.ADD_PARTITIONS_TO_TXN, 0, 4)
async def add_partitions_to_txn(broker, header, req):
    if header.api_version >= 4:
        return await _add_partitions_between_brokers(broker, header, req)
    results = await _add_partitions(broker, header, req.v3_and_below_transactional_id,
                                    req.v3_and_below_producer_id,
                                    req.v3_and_below_producer_epoch,
                                    req.v3_and_below_topics, header.api_version)
    return _ADD_PARTITIONS.cls(throttle_time_ms=0, results_by_topic_v3_and_below=results)


async def _add_partitions(broker, header, txn_id, producer_id, epoch, topics, version,
                          verify_only=False) -> list:
    """One transaction's partitions added (or, `verify_only`, checked): its topic results."""
    wanted = [(t.name, p) for t in topics for p in t.partitions]
    txn = _coordinator(broker)
    refused = _add_partitions_refusals(broker, header, txn_id, wanted)
    if refused:
        results = refused
    elif txn is None:
        results = dict.fromkeys(wanted, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    elif verify_only:
        results = txn.verify_partitions(txn_id, producer_id, epoch, wanted)
    else:
        results = await txn.add_partitions(txn_id, producer_id, epoch, wanted)
    by_topic = {}
    for (topic, index), code in results.items():
        by_topic.setdefault(topic, []).append(_ADD_PARTITIONS.make(
            "results_by_topic_v3_and_below", "results_by_partition", partition_index=index,
            partition_error_code=for_version(code, ApiKey.ADD_PARTITIONS_TO_TXN, version)))
    return [_ADD_PARTITIONS.make("results_by_topic_v3_and_below", name=t, results_by_partition=r)
            for t, r in by_topic.items()]


async def _add_partitions_between_brokers(broker, header, req):
    if not allowed(broker, header, CLUSTER_ACTION, CLUSTER):
        return _ADD_PARTITIONS.cls(throttle_time_ms=0,
                                   error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                   results_by_transaction=[])
    out = []
    for t in req.transactions:
        topics = await _add_partitions(broker, header, t.transactional_id, t.producer_id,
                                       t.producer_epoch, t.topics, header.api_version,
                                       verify_only=t.verify_only)
        out.append(_ADD_PARTITIONS.make("results_by_transaction",
                                        transactional_id=t.transactional_id,
                                        topic_results=topics))
    return _ADD_PARTITIONS.cls(throttle_time_ms=0, error_code=0, results_by_transaction=out)


@handles(ApiKey.ADD_OFFSETS_TO_TXN, 0, 4)
async def add_offsets_to_txn(broker, header, req):
    txn = _coordinator(broker)
    code = txn_refusal(broker, header, WRITE, req.transactional_id) or \
        group_refusal(broker, header, READ, req.group_id)
    if not code:
        code = ErrorCode.COORDINATOR_NOT_AVAILABLE if txn is None else await txn.add_offsets(
            req.transactional_id, req.producer_id, req.producer_epoch, req.group_id)
    return _ADD_OFFSETS.cls(throttle_time_ms=0, error_code=for_version(
        code, ApiKey.ADD_OFFSETS_TO_TXN, header.api_version))


@handles(ApiKey.END_TXN, 0, 4)
async def end_txn(broker, header, req):
    txn = _coordinator(broker)
    code = txn_refusal(broker, header, WRITE, req.transactional_id)
    if not code:
        code = ErrorCode.COORDINATOR_NOT_AVAILABLE if txn is None else await txn.end_txn(
            req.transactional_id, req.producer_id, req.producer_epoch, req.committed)
    return _END.cls(throttle_time_ms=0, error_code=for_version(code, ApiKey.END_TXN,
                                                               header.api_version))


@handles(ApiKey.TXN_OFFSET_COMMIT, 0, 4)
async def txn_offset_commit(broker, header, req):
    v = header.api_version
    offsets, refused = {}, {}
    whole = txn_refusal(broker, header, WRITE, req.transactional_id) or \
        group_refusal(broker, header, READ, req.group_id)
    for t in req.topics:
        code = whole or topic_refusal(broker, header, READ, t.name)
        for p in t.partitions:
            if code:
                refused[(t.name, p.partition_index)] = code
                continue
            offsets[(t.name, p.partition_index)] = OffsetAndMetadata(
                p.committed_offset, p.committed_leader_epoch if v >= 2 else -1,
                p.committed_metadata or "", time.time_ns() // 1_000_000, None)
    if refused and not offsets:
        results = {}
    elif broker.groups is None:
        results = dict.fromkeys(offsets, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    else:
        results = await broker.groups.offsets.commit_txn_offsets(
            req.group_id, req.producer_id, req.producer_epoch,
            req.member_id if v >= 3 else "", req.group_instance_id if v >= 3 else None,
            req.generation_id if v >= 3 else -1, offsets)
    results = {**results, **refused}
    return _TXN_COMMIT.cls(throttle_time_ms=0, topics=[_TXN_COMMIT.make(
        "topics", name=t.name, partitions=[_TXN_COMMIT.make(
            "topics", "partitions", partition_index=p.partition_index,
            error_code=for_version(results[(t.name, p.partition_index)],
                                   ApiKey.TXN_OFFSET_COMMIT, v))
            for p in t.partitions]) for t in req.topics])


@handles(ApiKey.WRITE_TXN_MARKERS, 0, 1)
async def write_txn_markers(broker, header, req):
    """Every marker appended now, in request order; the answer once their replicas have them
    all (`Pending`: the coordinator's next request on this connection is handled meanwhile)."""
    appended = [txn_markers.append_local(broker, txn_markers.TxnMarker(
        m.producer_id, m.producer_epoch, m.coordinator_epoch, m.transaction_result,
        tuple((t.name, i) for t in m.topics for i in t.partition_indexes)))
        for m in req.markers]
    return Pending(_markers_answer(broker, appended))


async def _markers_answer(broker, appended: list) -> object:
    answers = await asyncio.gather(*(txn_markers.acknowledged(broker, a) for a in appended))
    out = []
    for a, results in zip(appended, answers):
        by_topic = {}
        for (topic, index), code in results.items():
            by_topic.setdefault(topic, []).append(_MARKERS.make(
                "markers", "topics", "partitions", partition_index=index, error_code=code))
        out.append(_MARKERS.make("markers", producer_id=a.marker.producer_id, topics=[
            _MARKERS.make("markers", "topics", name=t, partitions=ps)
            for t, ps in by_topic.items()]))
    return _MARKERS.cls(markers=out)
