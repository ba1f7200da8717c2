"""InitProducerId, and AllocateProducerIds between brokers and the controller (see
broker/metadata/producer_ids.py for why ids come in committed blocks). A transactional producer's
InitProducerId goes to the transaction coordinator (`txn_coordinator.py`)."""
from minilog.connector.protocol import ApiKey, ErrorCode, response

from ...metadata.producer_ids import ProducerIdsUnavailable
from ...security.access import CLUSTER, IDEMPOTENT_WRITE, TOPIC, WRITE, allowed, \
    allowed_on_any, txn_refusal
from . import handles
from .transactions import for_version

_PID = response(ApiKey.INIT_PRODUCER_ID)
_ALLOCATE = response(ApiKey.ALLOCATE_PRODUCER_IDS)


@handles(ApiKey.INIT_PRODUCER_ID, 0, 6)
async def init_producer_id(broker, header, req):
    if req.transactional_id is not None:
        refused = txn_refusal(broker, header, WRITE, req.transactional_id)
        if refused:
            return _PID.cls(throttle_time_ms=0, error_code=refused, producer_id=-1,
                            producer_epoch=-1)
        txn = getattr(broker, "txn", None)
        if txn is None:
            return _PID.cls(throttle_time_ms=0, error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
        v6 = header.api_version >= 6  # KIP-939's two-phase commit
        code, pid, epoch, (kept_pid, kept_epoch) = await txn.init_producer_id(
            req.transactional_id, req.transaction_timeout_ms,
            req.producer_id if header.api_version >= 3 else -1,
            req.producer_epoch if header.api_version >= 3 else -1,
            v6 and req.enable2_pc, v6 and req.keep_prepared_txn)
        return _PID.cls(throttle_time_ms=0, producer_id=pid, producer_epoch=epoch,
                        ongoing_txn_producer_id=kept_pid, ongoing_txn_producer_epoch=kept_epoch,
                        error_code=for_version(code, ApiKey.INIT_PRODUCER_ID,
                                               header.api_version))
    # Without a transactional id Kafka ignores any producer id and epoch sent (a KIP-360 bump
    # request included) and hands out a new id: bumping the one sent would let any client
    # fence any producer.
    if not (allowed(broker, header, IDEMPOTENT_WRITE, CLUSTER)
            or allowed_on_any(broker, header, WRITE, TOPIC)):  # Kafka's rule since KIP-679
        return _PID.cls(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                        producer_id=-1, producer_epoch=-1)
    try:
        pid = await broker.producer_ids.next_id()
    except ProducerIdsUnavailable:
        return _PID.cls(throttle_time_ms=0, error_code=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
    return _PID.cls(throttle_time_ms=0, error_code=0, producer_id=pid, producer_epoch=0)


@handles(ApiKey.ALLOCATE_PRODUCER_IDS, 0, 0)
async def allocate_producer_ids(broker, header, req):
    allocator = broker.producer_id_allocator
    if allocator is None:
        return _ALLOCATE.cls(throttle_time_ms=0, error_code=ErrorCode.NOT_CONTROLLER)
    try:
        block = await allocator.allocate(req.broker_id, req.broker_epoch)
    except ProducerIdsUnavailable as e:
        return _ALLOCATE.cls(throttle_time_ms=0, error_code=e.code)
    return _ALLOCATE.cls(throttle_time_ms=0, error_code=0, producer_id_start=block.start,
                         producer_id_len=block.length)
