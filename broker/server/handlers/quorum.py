"""Requests between the nodes of a replicated cluster: the Raft quorum (Vote, BeginQuorumEpoch,
EndQuorumEpoch), broker registration and heartbeats, and AlterPartition.

A single broker is the only voter of its own quorum and answers them as any voter does;
registration, heartbeats and AlterPartition reaching a node that is not the active controller
get NOT_CONTROLLER, as in Kafka.
"""
from minilog.connector.protocol import ApiKey, ErrorCode, response

from ...metadata.controller import broker_epoch_error
from ...metadata.controller_result import NotController
from . import handles

_VOTE, _BEGIN = response(ApiKey.VOTE), response(ApiKey.BEGIN_QUORUM_EPOCH)
_END, _REG = response(ApiKey.END_QUORUM_EPOCH), response(ApiKey.BROKER_REGISTRATION)
_BEAT, _ALTER = response(ApiKey.BROKER_HEARTBEAT), response(ApiKey.ALTER_PARTITION)


def _raft_partition(req):
    """The one (topic, partition) of a quorum request, or None if it names anything else."""
    from ...raft.raft_node import METADATA_TOPIC
    if len(req.topics) != 1 or req.topics[0].topic_name != METADATA_TOPIC or \
            len(req.topics[0].partitions) != 1 or req.topics[0].partitions[0].partition_index != 0:
        return None
    return req.topics[0].partitions[0]


def _quorum_answer(schema, raft, code, **fields):
    from ...raft.raft_node import METADATA_TOPIC
    if raft is None:
        return schema.cls(error_code=code, topics=[])
    leader = raft.leader_id
    part = schema.make("topics", "partitions", partition_index=0, error_code=code,
                       leader_id=-1 if leader is None else leader, leader_epoch=raft.epoch,
                       **fields)
    return schema.cls(error_code=0, topics=[schema.make("topics", topic_name=METADATA_TOPIC,
                                                        partitions=[part])])


def _answer(broker, req, schema, decide):
    """Run `decide(raft, partition request)` -> (error code, extra fields) and answer."""
    raft = broker.quorum.raft
    p = _raft_partition(req)
    if p is None:
        return _quorum_answer(schema, None, ErrorCode.INVALID_REQUEST)
    code, fields = decide(raft, p)
    return _quorum_answer(schema, raft, code, **fields)


@handles(ApiKey.VOTE, 0, 2)
async def vote(broker, header, req):
    return _answer(broker, req, _VOTE, lambda raft, p: (0, {"vote_granted": raft.handle_vote(
        p.candidate_epoch, p.candidate_id, p.last_offset_epoch, p.last_offset,
        pre_vote=getattr(p, "pre_vote", False))}))


@handles(ApiKey.BEGIN_QUORUM_EPOCH, 0, 0)
async def begin_quorum_epoch(broker, header, req):
    return _answer(broker, req, _BEGIN, lambda raft, p: (
        raft.handle_begin_epoch(p.leader_epoch, p.leader_id), {}))


@handles(ApiKey.END_QUORUM_EPOCH, 0, 0)
async def end_quorum_epoch(broker, header, req):
    return _answer(broker, req, _END, lambda raft, p: (
        raft.handle_end_epoch(p.leader_epoch, p.leader_id), {}))


def _controller(broker):
    """(controller or None, error code)."""
    if broker.controller is None or not broker.controller.active:
        return None, ErrorCode.NOT_CONTROLLER
    return broker.controller, 0


@handles(ApiKey.BROKER_REGISTRATION, 0, 0)
async def broker_registration(broker, header, req):
    broker.peer_connections.seen(req.broker_id, header.closed)
    controller, code = _controller(broker)
    if controller is None:
        return _REG.cls(throttle_time_ms=0, error_code=code)
    if req.cluster_id != broker.metadata.cluster_id:
        return _REG.cls(throttle_time_ms=0, error_code=ErrorCode.INCONSISTENT_CLUSTER_ID)
    if not req.listeners:
        return _REG.cls(throttle_time_ms=0, error_code=ErrorCode.INVALID_REQUEST)
    listener = req.listeners[0]  # the primary one: where other brokers reach it
    try:
        epoch = await broker.quorum.commit(controller.register(
            req.broker_id, listener.host, listener.port, req.rack,
            {lst.name: (lst.host, lst.port) for lst in req.listeners}))
    except NotController:
        return _REG.cls(throttle_time_ms=0, error_code=ErrorCode.NOT_CONTROLLER)
    return _REG.cls(throttle_time_ms=0, error_code=0, broker_epoch=epoch)


@handles(ApiKey.BROKER_HEARTBEAT, 0, 0)
async def broker_heartbeat(broker, header, req):
    broker.peer_connections.seen(req.broker_id, header.closed)
    controller, code = _controller(broker)
    if controller is None:
        return _BEAT.cls(throttle_time_ms=0, error_code=code)
    try:
        code, caught_up, fenced = await broker.quorum.commit(controller.heartbeat(
            req.broker_id, req.broker_epoch, req.current_metadata_offset, req.want_fence))
    except NotController:
        return _BEAT.cls(throttle_time_ms=0, error_code=ErrorCode.NOT_CONTROLLER)
    return _BEAT.cls(throttle_time_ms=0, error_code=code, is_caught_up=caught_up,
                     is_fenced=fenced, should_shut_down=False)


@handles(ApiKey.ALTER_PARTITION, 0, 3)
async def alter_partition(broker, header, req):
    controller, code = _controller(broker)
    if controller is None:
        return _ALTER.cls(throttle_time_ms=0, error_code=code, topics=[])
    if req.broker_epoch != -1 and broker_epoch_error(controller.image, req.broker_id,
                                                     req.broker_epoch):
        return _ALTER.cls(throttle_time_ms=0, error_code=ErrorCode.STALE_BROKER_EPOCH, topics=[])
    by_id = header.api_version >= 2
    answers = []  # (topic request, name, [(partition index, future of its answer)])
    try:
        for t in req.topics:
            if by_id:
                ts = controller.image.by_id.get(t.topic_id)
                name = ts.name if ts else None
            else:
                name = t.topic_name
            parts = []
            for p in t.partitions:
                if header.api_version >= 3:  # KIP-903: members with the epochs they fetched with
                    epochs = {s.broker_id: s.broker_epoch for s in p.new_isr_with_epochs}
                    new_isr = list(epochs)
                else:
                    epochs, new_isr = None, list(p.new_isr)
                parts.append((p.partition_index, broker.quorum.submit(controller.alter_partition(
                    req.broker_id, name, p.partition_index, p.leader_epoch, p.partition_epoch,
                    new_isr, epochs))))
            answers.append((t, name, parts))
        topics = []
        for t, name, parts in answers:
            done = []
            for index, answer in parts:
                code, state = await answer
                fields = {} if state is None else dict(
                    leader_id=state.leader, leader_epoch=state.leader_epoch, isr=list(state.isr),
                    partition_epoch=state.partition_epoch)
                done.append(_ALTER.make("topics", "partitions", partition_index=index,
                                        error_code=code, **fields))
            topics.append(_ALTER.make("topics", topic_name=name, topic_id=t.topic_id if by_id
                                      else None, partitions=done))
    except NotController:
        # Not committed (leadership lost): the leader must not assume it was.
        return _ALTER.cls(throttle_time_ms=0, error_code=ErrorCode.NOT_CONTROLLER, topics=[])
    return _ALTER.cls(throttle_time_ms=0, error_code=0, topics=topics)
