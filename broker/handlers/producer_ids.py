"""InitProducerId for idempotent producers, and AllocateProducerIds between brokers and the
controller (see broker/producer_ids.py for why ids come in committed blocks)."""
from minilog.connector.protocol import ApiKey, ErrorCode, response

from ..producer_ids import ProducerIdsUnavailable
from . import handles

_PID = response(ApiKey.INIT_PRODUCER_ID)
_ALLOCATE = response(ApiKey.ALLOCATE_PRODUCER_IDS)


@handles(ApiKey.INIT_PRODUCER_ID, 0, 5)
async def init_producer_id(broker, header, req):
    if req.transactional_id is not None:
        # No transaction coordinator: transactional producers are refused, idempotent ones served.
        return _PID.cls(throttle_time_ms=0, error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    # Without a transactional id Kafka ignores any producer id and epoch sent (a KIP-360 bump
    # request included) and hands out a new id: bumping the one sent would let any client
    # fence any producer.
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
        block = await allocator.allocate()
    except ProducerIdsUnavailable as e:
        return _ALLOCATE.cls(throttle_time_ms=0, error_code=e.code)
    return _ALLOCATE.cls(throttle_time_ms=0, error_code=0, producer_id_start=block.start,
                         producer_id_len=block.length)
