"""What tools ask about transactions: DescribeTransactions and ListTransactions (answered by the
transaction coordinator for the ids it owns, as in Kafka: tools ask every broker), and
DescribeProducers (answered by a partition's leader from its producer state)."""
from minilog.connector.protocol import ApiKey, ErrorCode, response

from ...coordinator.transaction import txn_state
from ...security.access import DESCRIBE, READ, topic_refusal, txn_refusal
from . import handles, leader_partition

_DESCRIBE = response(ApiKey.DESCRIBE_TRANSACTIONS)
_LIST = response(ApiKey.LIST_TRANSACTIONS)
_PRODUCERS = response(ApiKey.DESCRIBE_PRODUCERS)


@handles(ApiKey.DESCRIBE_TRANSACTIONS, 0, 0)
async def describe_transactions(broker, header, req):
    out = []
    for txn_id in req.transactional_ids:
        code, md = txn_refusal(broker, header, DESCRIBE, txn_id), None
        if not code:
            code, md = broker.txn.describe(txn_id) if broker.txn else \
                (ErrorCode.COORDINATOR_NOT_AVAILABLE, None)
        fields = {} if md is None else dict(
            transaction_state=md.state, transaction_timeout_ms=md.timeout_ms,
            transaction_start_time_ms=md.start_ms, producer_id=md.producer_id,
            producer_epoch=md.producer_epoch, topics=[
                _DESCRIBE.make("transaction_states", "topics", topic=t, partitions=ps)
                for t, ps in _by_topic(md.partitions).items()])
        out.append(_DESCRIBE.make("transaction_states", error_code=code,
                                  transactional_id=txn_id, **{
                                      "transaction_state": "", "transaction_timeout_ms": 0,
                                      "transaction_start_time_ms": -1, "producer_id": -1,
                                      "producer_epoch": -1, "topics": [], **fields}))
    return _DESCRIBE.cls(throttle_time_ms=0, transaction_states=out)


@handles(ApiKey.LIST_TRANSACTIONS, 0, 1)
async def list_transactions(broker, header, req):
    wanted = set(req.state_filters or ())
    unknown = sorted(wanted - set(txn_state.STATES))
    duration = req.duration_filter if header.api_version >= 1 else -1
    found = [] if broker.txn is None else broker.txn.list(
        wanted, set(req.producer_id_filters or ()), duration)
    if broker.authorizer is not None:  # only the ids it may describe (Kafka: no exception)
        found = [md for md in found if not txn_refusal(broker, header, DESCRIBE,
                                                       md.transactional_id)]
    return _LIST.cls(throttle_time_ms=0, error_code=0, unknown_state_filters=unknown,
                     transaction_states=[_LIST.make(
                         "transaction_states", transactional_id=md.transactional_id,
                         producer_id=md.producer_id, transaction_state=md.state)
                         for md in found])


@handles(ApiKey.DESCRIBE_PRODUCERS, 0, 0)
async def describe_producers(broker, header, req):
    topics = []
    for t in req.topics:
        parts = []
        refused = topic_refusal(broker, header, READ, t.name)
        for index in t.partition_indexes:
            partition, code = (None, refused) if refused else \
                leader_partition(broker, t.name, index)
            active = [] if partition is None else [_PRODUCERS.make(
                "topics", "partitions", "active_producers", producer_id=e.producer_id,
                producer_epoch=e.epoch, last_sequence=e.last_sequence,
                last_timestamp=e.last_timestamp, coordinator_epoch=-1,
                current_txn_start_offset=e.txn_first_offset)
                for e in partition.log.producer_state.producers.values()]
            parts.append(_PRODUCERS.make("topics", "partitions", partition_index=index,
                                         error_code=code, error_message=None,
                                         active_producers=active))
        topics.append(_PRODUCERS.make("topics", name=t.name, partitions=parts))
    return _PRODUCERS.cls(throttle_time_ms=0, topics=topics)


def _by_topic(partitions):
    out = {}
    for topic, index in sorted(partitions):
        out.setdefault(topic, []).append(index)
    return out
