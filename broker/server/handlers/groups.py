"""Consumer groups: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit,
OffsetFetch, ListGroups, DescribeGroups, DeleteGroups, OffsetDelete.

Handlers translate each version's request shape to the coordinator's calls and back; the
protocol itself lives in `group_coordinator.py` and `classic_group_protocol.py`. JoinGroup
and SyncGroup may wait for the rest of the group: their handler awaits the coordinator,
holding only this client's connection.
"""
import time

from minilog.connector.protocol import ApiKey, ErrorCode, response

from ...coordinator.group.group_records import OffsetAndMetadata
from ...security.access import (
    CLUSTER,
    DELETE,
    DESCRIBE,
    GROUP,
    NOT_REQUESTED,
    READ,
    allowed,
    authorized_operations,
    group_refusal,
    topic_refusal,
    txn_refusal,
)
from . import handles, on_listener

_FIND = response(ApiKey.FIND_COORDINATOR)
_JOIN = response(ApiKey.JOIN_GROUP)
_SYNC = response(ApiKey.SYNC_GROUP)
_HEARTBEAT = response(ApiKey.HEARTBEAT)
_LEAVE = response(ApiKey.LEAVE_GROUP)
_COMMIT = response(ApiKey.OFFSET_COMMIT)
_FETCH = response(ApiKey.OFFSET_FETCH)
_LIST = response(ApiKey.LIST_GROUPS)
_DESCRIBE = response(ApiKey.DESCRIBE_GROUPS)
_DELETE = response(ApiKey.DELETE_GROUPS)
_OFFSET_DELETE = response(ApiKey.OFFSET_DELETE)

GROUP_KEY, TRANSACTION_KEY = 0, 1


# -- FindCoordinator ------------------------------------------------------------------------------
def _coordinator(broker, header, key, key_type):
    """(error, message, endpoint or None) for one coordinator key."""
    if key_type == TRANSACTION_KEY and key and txn_refusal(broker, header, DESCRIBE, key):
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, None, None
    if key_type == GROUP_KEY and key is not None and group_refusal(broker, header, DESCRIBE, key):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, None, None
    if key_type == TRANSACTION_KEY and key:
        txn = getattr(broker, "txn", None)
        if txn is None or not txn.active:
            return (ErrorCode.COORDINATOR_NOT_AVAILABLE,
                    "the transaction coordinator is not running", None)
        if not txn.ensure_topic():
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, "creating the transaction log", None
        endpoint = txn.store.coordinator(key)
        if endpoint is None:
            return (ErrorCode.COORDINATOR_NOT_AVAILABLE,
                    "the transactional id's partition has no leader", None)
        return 0, None, endpoint
    if key_type != GROUP_KEY or key is None:
        return ErrorCode.INVALID_REQUEST, f"unsupported coordinator key type {key_type}", None
    if not broker.groups.active:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, "the group coordinator is not running", None
    endpoint = broker.groups.store.coordinator(key)
    if endpoint is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, "the group's partition has no leader", None
    return 0, None, endpoint


@handles(ApiKey.FIND_COORDINATOR, 0, 6)
async def find_coordinator(broker, header, req):
    batched = header.api_version >= 4
    found = [(key, code, message, on_listener(broker, header, ep))
             for key in (req.coordinator_keys if batched else [req.key])
             for code, message, ep in [_coordinator(broker, header, key, req.key_type)]]
    if batched:
        return _FIND.cls(throttle_time_ms=0, coordinators=[_FIND.make(
            "coordinators", key=key, error_code=code, error_message=message,
            node_id=ep.node_id if ep else -1, host=ep.host if ep else "",
            port=ep.port if ep else -1) for key, code, message, ep in found])
    _, code, message, ep = found[0]
    return _FIND.cls(throttle_time_ms=0, error_code=code, error_message=message,
                     node_id=ep.node_id if ep else -1, host=ep.host if ep else "",
                     port=ep.port if ep else -1)


# -- membership -----------------------------------------------------------------------------------
@handles(ApiKey.JOIN_GROUP, 0, 9)
async def join_group(broker, header, req):
    v = header.api_version
    refused = group_refusal(broker, header, READ, req.group_id)
    if refused:
        return _JOIN.cls(throttle_time_ms=0, error_code=refused, generation_id=-1,
                         protocol_type=None, protocol_name=None if v >= 7 else "", leader="",
                         skip_assignment=False, member_id=req.member_id, members=[])
    result = await broker.groups.join_group(
        req.group_id, req.member_id, req.group_instance_id if v >= 5 else None,
        header.client_id or "", f"/{header.client_host}" if header.client_host else "",
        req.rebalance_timeout_ms if v >= 1 else req.session_timeout_ms, req.session_timeout_ms,
        req.protocol_type, [(p.name, p.metadata) for p in req.protocols],
        require_known_member_id=v >= 4, supports_skip_assignment=v >= 9)
    members = [_JOIN.make("members", member_id=mid, group_instance_id=iid, metadata=md)
               for mid, iid, md in result.members]
    name = result.protocol_name
    return _JOIN.cls(throttle_time_ms=0, error_code=result.error,
                     generation_id=result.generation_id, protocol_type=result.protocol_type,
                     protocol_name=name if name is not None or v >= 7 else "",
                     leader=result.leader_id or "", skip_assignment=result.skip_assignment,
                     member_id=result.member_id, members=members)


@handles(ApiKey.SYNC_GROUP, 0, 5)
async def sync_group(broker, header, req):
    v = header.api_version
    refused = group_refusal(broker, header, READ, req.group_id)
    if refused:
        return _SYNC.cls(throttle_time_ms=0, error_code=refused, protocol_type=None,
                         protocol_name=None, assignment=b"")
    result = await broker.groups.sync_group(
        req.group_id, req.generation_id, req.member_id, req.group_instance_id if v >= 3 else None,
        req.protocol_type if v >= 5 else None, req.protocol_name if v >= 5 else None,
        {a.member_id: a.assignment for a in req.assignments})
    return _SYNC.cls(throttle_time_ms=0, error_code=result.error,
                     protocol_type=result.protocol_type, protocol_name=result.protocol_name,
                     assignment=result.assignment)


@handles(ApiKey.HEARTBEAT, 0, 4)
async def heartbeat(broker, header, req):
    refused = group_refusal(broker, header, READ, req.group_id)
    if refused:
        return _HEARTBEAT.cls(throttle_time_ms=0, error_code=refused)
    code = broker.groups.heartbeat(req.group_id, req.generation_id, req.member_id,
                                   req.group_instance_id if header.api_version >= 3 else None)
    return _HEARTBEAT.cls(throttle_time_ms=0, error_code=code)


@handles(ApiKey.LEAVE_GROUP, 0, 5)
async def leave_group(broker, header, req):
    batched = header.api_version >= 3
    leaving = ([(m.member_id, m.group_instance_id) for m in req.members] if batched
               else [(req.member_id, None)])
    refused = group_refusal(broker, header, READ, req.group_id)
    if refused:
        return _LEAVE.cls(throttle_time_ms=0, error_code=refused, members=[])
    code, errors = await broker.groups.leave_group(req.group_id, leaving)
    if not batched:  # one member: its error is the response's error
        return _LEAVE.cls(throttle_time_ms=0, error_code=code or next((e for e in errors if e), 0))
    return _LEAVE.cls(throttle_time_ms=0, error_code=code, members=[
        _LEAVE.make("members", member_id=mid, group_instance_id=iid, error_code=e)
        for (mid, iid), e in zip(leaving, errors)])


# -- offsets --------------------------------------------------------------------------------------
@handles(ApiKey.OFFSET_COMMIT, 0, 9)
async def offset_commit(broker, header, req):
    v = header.api_version
    now = time.time_ns() // 1_000_000
    retention = req.retention_time_ms if 2 <= v <= 4 else -1
    offsets, refused = {}, {}
    group_refused = group_refusal(broker, header, READ, req.group_id)
    for t in req.topics:
        code = group_refused or topic_refusal(broker, header, READ, t.name)
        for p in t.partitions:
            if code:
                refused[(t.name, p.partition_index)] = code
                continue
            commit_ts = p.commit_timestamp if v == 1 and p.commit_timestamp >= 0 else now
            offsets[(t.name, p.partition_index)] = OffsetAndMetadata(
                p.committed_offset, p.committed_leader_epoch if v >= 6 else -1,
                p.committed_metadata or "", commit_ts, now + retention if retention >= 0 else None)
    results = await broker.groups.offsets.commit_offsets(
        req.group_id, req.member_id if v >= 1 else "", req.group_instance_id if v >= 7 else None,
        req.generation_id_or_member_epoch if v >= 1 else -1, offsets, api_version=v) \
        if offsets or not refused else {}
    results.update(refused)
    return _COMMIT.cls(throttle_time_ms=0, topics=[_COMMIT.make("topics", name=t.name, partitions=[
        _COMMIT.make("topics", "partitions", partition_index=p.partition_index,
                     error_code=results[(t.name, p.partition_index)]) for p in t.partitions])
        for t in req.topics])


def _fetch_group(broker, header, group_id, topics, require_stable=False, member=(None, -1)):
    """(error, {topic: [(partition, OffsetAndMetadata or None, error)]}) in request order.
    With `require_stable` an offset still waiting for its transaction is answered
    UNSTABLE_OFFSET_COMMIT (KIP-447), which the client retries. `member` is the (member id,
    member epoch) of a KIP-848 consumer fetching (v9+), checked as Kafka 4 checks it. Topics the principal may not
    describe are answered TOPIC_AUTHORIZATION_FAILED when named, left out when all are asked."""
    refused = group_refusal(broker, header, DESCRIBE, group_id)
    if refused:
        return refused, {}
    wanted = None if topics is None else [(t.name, i) for t in topics for i in t.partition_indexes]
    code, found = broker.groups.offsets.fetch_offsets(group_id, wanted, *member)
    pending = broker.groups.txn_offsets.is_pending
    by_topic, hidden = {}, {}
    for (topic, partition), om in found:
        if topic not in hidden:
            hidden[topic] = topic_refusal(broker, header, DESCRIBE, topic)
        if hidden[topic]:
            if topics is not None:
                by_topic.setdefault(topic, []).append((partition, None, hidden[topic]))
            continue
        unstable = require_stable and pending(group_id, (topic, partition))
        by_topic.setdefault(topic, []).append(
            (partition, None, ErrorCode.UNSTABLE_OFFSET_COMMIT) if unstable else
            (partition, om, 0))
    return code, by_topic


def _fetched_topics(path, by_topic, error=0):
    def part(partition, om, own_error):
        return _FETCH.make(*path, "partitions", partition_index=partition,
                           committed_offset=om.offset if om else -1,
                           committed_leader_epoch=om.leader_epoch if om else -1,
                           metadata=om.metadata if om else "", error_code=error or own_error)
    return [_FETCH.make(*path, name=topic, partitions=[part(*entry) for entry in parts])
            for topic, parts in by_topic.items()]


@handles(ApiKey.OFFSET_FETCH, 0, 9)
async def offset_fetch(broker, header, req):
    v = header.api_version
    if v >= 8:
        groups = []
        for grp in req.groups:
            member = (grp.member_id, grp.member_epoch) if v >= 9 else (None, -1)
            code, by_topic = _fetch_group(broker, header, grp.group_id, grp.topics,
                                          req.require_stable, member)
            groups.append(_FETCH.make("groups", group_id=grp.group_id, error_code=code,
                                      topics=[] if code else _fetched_topics(("groups", "topics"),
                                                                             by_topic)))
        return _FETCH.cls(throttle_time_ms=0, groups=groups)
    code, by_topic = _fetch_group(broker, header, req.group_id, req.topics, v >= 7 and req.require_stable)
    if code and v < 2:  # no top-level error before v2: each requested partition carries it
        by_topic = {t.name: [(i, None, 0) for i in t.partition_indexes] for t in req.topics or ()}
        return _FETCH.cls(topics=_fetched_topics(("topics",), by_topic, code))
    return _FETCH.cls(throttle_time_ms=0, error_code=code,
                      topics=[] if code else _fetched_topics(("topics",), by_topic))


@handles(ApiKey.OFFSET_DELETE, 0, 0)
async def offset_delete(broker, header, req):
    refused = {t.name: topic_refusal(broker, header, READ, t.name) for t in req.topics}
    wanted = [(t.name, p.partition_index) for t in req.topics for p in t.partitions
              if not refused[t.name]]
    code = group_refusal(broker, header, DELETE, req.group_id)
    if not code:
        code, results = broker.groups.offsets.delete_offsets(req.group_id, wanted)
        results.update({(t.name, p.partition_index): refused[t.name] for t in req.topics
                        for p in t.partitions if refused[t.name]})
    topics = [] if code else [_OFFSET_DELETE.make("topics", name=t.name, partitions=[
        _OFFSET_DELETE.make("topics", "partitions", partition_index=p.partition_index,
                            error_code=results.get((t.name, p.partition_index), 0))
        for p in t.partitions]) for t in req.topics]
    return _OFFSET_DELETE.cls(error_code=code, throttle_time_ms=0, topics=topics)


# -- administration -------------------------------------------------------------------------------
@handles(ApiKey.LIST_GROUPS, 0, 5)
async def list_groups(broker, header, req):
    v = header.api_version
    code, groups = broker.groups.offsets.list_groups(req.states_filter if v >= 4 else (),
                                             req.types_filter if v >= 5 else ())
    if not allowed(broker, header, DESCRIBE, CLUSTER):  # then only the groups it may describe
        groups = [g for g in groups if not group_refusal(broker, header, DESCRIBE, g[0])]
    return _LIST.cls(throttle_time_ms=0, error_code=code, groups=[
        _LIST.make("groups", group_id=gid, protocol_type=ptype, group_state=state,
                   group_type=kind) for gid, ptype, state, kind in groups])


@handles(ApiKey.DESCRIBE_GROUPS, 0, 5)
async def describe_groups(broker, header, req):
    out = []
    for group_id in req.groups:
        refused = group_refusal(broker, header, DESCRIBE, group_id)
        if refused:
            out.append(_DESCRIBE.make("groups", error_code=refused, group_id=group_id,
                                      group_state="", protocol_type="", protocol_data="",
                                      members=[], authorized_operations=NOT_REQUESTED))
            continue
        code, s = broker.groups.offsets.describe_group(group_id)
        ops = authorized_operations(broker, header, GROUP, group_id) \
            if header.api_version >= 3 and req.include_authorized_operations else NOT_REQUESTED
        members = [_DESCRIBE.make("groups", "members", member_id=m.member_id,
                                  group_instance_id=m.group_instance_id, client_id=m.client_id,
                                  client_host=m.client_host, member_metadata=m.metadata,
                                  member_assignment=m.assignment) for m in s.members]
        out.append(_DESCRIBE.make("groups", error_code=code, group_id=group_id,
                                  group_state=s.state, protocol_type=s.protocol_type,
                                  protocol_data=s.protocol, members=members,
                                  authorized_operations=ops))
    return _DESCRIBE.cls(throttle_time_ms=0, groups=out)


@handles(ApiKey.DELETE_GROUPS, 0, 2)
async def delete_groups(broker, header, req):
    refused = {g: group_refusal(broker, header, DELETE, g) for g in req.groups_names}
    results = broker.groups.offsets.delete_groups([g for g in req.groups_names if not refused[g]])
    results.update({g: code for g, code in refused.items() if code})
    return _DELETE.cls(throttle_time_ms=0, results=[
        _DELETE.make("results", group_id=gid, error_code=results[gid]) for gid in req.groups_names])
