"""AlterPartitionReassignments and ListPartitionReassignments (KIP-455), as
`kafka-reassign-partitions.sh --execute/--verify/--cancel` and the admin clients send them.

Forwarded to the active controller like the other admin requests (`controller_router.py`),
authorized there with ALTER on the cluster (DESCRIBE to list). A reassignment is answered once
the change that starts it has committed; the new replicas then catch up and the controller
completes it when the leader adds the last of them to the ISR (`metadata/reassignment.py`).
"""
from minilog.connector.protocol import ApiKey, ErrorCode, response

from ...metadata.controller_result import NotController
from . import handles

_ALTER = response(ApiKey.ALTER_PARTITION_REASSIGNMENTS)
_LIST = response(ApiKey.LIST_PARTITION_REASSIGNMENTS)
_NOT_CONTROLLER = "This node is not the active controller."


@handles(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, 0)
async def alter_partition_reassignments(broker, header, req):
    controller = broker.controller
    wanted = {}
    for t in req.topics:
        wanted.setdefault(t.name, {}).update({p.partition_index: p.replicas for p in t.partitions})
    try:
        if controller is None or not controller.active:
            raise NotController(_NOT_CONTROLLER)
        results = await broker.quorum.commit(controller.alter_reassignments(wanted))
    except NotController:
        return _ALTER.cls(throttle_time_ms=0, error_code=ErrorCode.NOT_CONTROLLER,
                          error_message=_NOT_CONTROLLER, responses=[])
    return _ALTER.cls(throttle_time_ms=0, error_code=0, error_message=None, responses=[
        _ALTER.make("responses", name=topic, partitions=[
            _ALTER.make("responses", "partitions", partition_index=i, error_code=code,
                        error_message=message) for i, code, message in parts])
        for topic, parts in results.items()])


@handles(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, 0)
async def list_partition_reassignments(broker, header, req):
    controller = broker.controller
    if controller is None or not controller.active:
        return _LIST.cls(throttle_time_ms=0, error_code=ErrorCode.NOT_CONTROLLER,
                         error_message=_NOT_CONTROLLER, topics=[])
    wanted = None if req.topics is None else {t.name: t.partition_indexes for t in req.topics}
    ongoing = controller.list_reassignments(wanted)
    return _LIST.cls(throttle_time_ms=0, error_code=0, error_message=None, topics=[
        _LIST.make("topics", name=topic, partitions=[
            _LIST.make("topics", "partitions", partition_index=i, replicas=list(p.replicas),
                       adding_replicas=list(p.adding), removing_replicas=list(p.removing))
            for i, p in parts])
        for topic, parts in ongoing.items()])
