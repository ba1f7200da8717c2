"""KIP-848's consumer group APIs: ConsumerGroupHeartbeat and ConsumerGroupDescribe.

Thin translations between the wire and `consumer_group_coordinator.py`; assignments travel as
topic ids on the heartbeat, and as ids with names in a describe (v1 adds each member's type:
classic or consumer, KIP-848's migration). As in Kafka 4, a subscribed topic name the member may
not DESCRIBE is refused, and a topic its regex matches but it may not DESCRIBE is silently left
out of its subscription.
"""
from minilog.connector.protocol import ApiKey, ErrorCode, response

from ...coordinator.group.consumer_group import ConsumerGroup, to_partitions
from ...coordinator.group.consumer_group_coordinator import HeartbeatRequest
from ...security.access import DESCRIBE, READ, TOPIC, allowed, group_refusal, topic_describer
from . import handles

_HEARTBEAT = response(ApiKey.CONSUMER_GROUP_HEARTBEAT)
_DESCRIBE = response(ApiKey.CONSUMER_GROUP_DESCRIBE)
NO_AUTH_OPS = -2147483648
CLASSIC_MEMBER, CONSUMER_MEMBER = 0, 1  # ConsumerGroupDescribe v1's MemberType


@handles(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, 1)
async def consumer_group_heartbeat(broker, header, req):
    refused = group_refusal(broker, header, READ, req.group_id)
    message = None
    if not refused and req.subscribed_topic_names:  # Kafka 4: DESCRIBE on every one
        hidden = sorted(t for t in set(req.subscribed_topic_names)
                        if not allowed(broker, header, DESCRIBE, TOPIC, t))
        if hidden:
            refused = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            message = f"not authorized to describe the subscribed topics {', '.join(hidden)}"
    if refused:
        return _HEARTBEAT.cls(throttle_time_ms=0, error_code=refused, error_message=message,
                              member_epoch=-1, heartbeat_interval_ms=0)
    result = await broker.groups.consumer.heartbeat(HeartbeatRequest(
        req.group_id, req.member_id, req.member_epoch, req.instance_id, req.rack_id,
        req.rebalance_timeout_ms, req.subscribed_topic_names,
        req.subscribed_topic_regex if header.api_version >= 1 else None, req.server_assignor,
        to_partitions(req.topic_partitions), header.client_id or "",
        f"/{header.client_host}" if header.client_host else "", header.api_version,
        topic_describer(broker, header)))
    assignment = None
    if result.assignment is not None:
        assignment = _HEARTBEAT.make("assignment", topic_partitions=[
            _HEARTBEAT.make("assignment", "topic_partitions", topic_id=t, partitions=sorted(ps))
            for t, ps in sorted(result.assignment.items())])
    return _HEARTBEAT.cls(throttle_time_ms=0, error_code=result.error,
                          error_message=result.message, member_id=result.member_id,
                          member_epoch=result.member_epoch,
                          heartbeat_interval_ms=result.heartbeat_interval_ms,
                          assignment=assignment)


def _assignment(broker, parts, field):
    by_id = broker.metadata.by_id
    return _DESCRIBE.make("groups", "members", field, topic_partitions=[
        _DESCRIBE.make("groups", "members", field, "topic_partitions", topic_id=t,
                       topic_name=by_id[t].name if t in by_id else "", partitions=sorted(ps))
        for t, ps in sorted(parts.items())])


def _described(broker, header, group_id):
    error = group_refusal(broker, header, DESCRIBE, group_id) or broker.groups.validate(group_id)
    group = broker.groups.groups.get(group_id)
    if not error and not isinstance(group, ConsumerGroup):
        error = ErrorCode.GROUP_ID_NOT_FOUND
    if error:
        message = f"Group {group_id} not found." if error == ErrorCode.GROUP_ID_NOT_FOUND \
            else None
        return _DESCRIBE.make("groups", error_code=error, error_message=message,
                              group_id=group_id, group_state="", group_epoch=-1,
                              assignment_epoch=-1, assignor_name="", members=[],
                              authorized_operations=NO_AUTH_OPS)
    members = [_DESCRIBE.make(
        "groups", "members", member_id=m.member_id, instance_id=m.instance_id,
        rack_id=m.rack_id, member_epoch=m.member_epoch, client_id=m.client_id,
        client_host=m.client_host, subscribed_topic_names=m.subscribed_topic_names,
        subscribed_topic_regex=m.subscribed_topic_regex,
        assignment=_assignment(broker, m.assigned, "assignment"),
        target_assignment=_assignment(broker, group.target.get(m.member_id, {}),
                                      "target_assignment"),
        member_type=CLASSIC_MEMBER if m.classic else CONSUMER_MEMBER)
        for m in group.members.values()]
    return _DESCRIBE.make("groups", error_code=0, error_message=None, group_id=group_id,
                          group_state=group.state, group_epoch=group.group_epoch,
                          assignment_epoch=group.assignment_epoch,
                          assignor_name=group.preferred_assignor
                          or group.assignor_name(broker.groups.consumer.assignors),
                          members=members, authorized_operations=NO_AUTH_OPS)


@handles(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, 1)
async def consumer_group_describe(broker, header, req):
    return _DESCRIBE.cls(throttle_time_ms=0,
                         groups=[_described(broker, header, g) for g in req.group_ids])
