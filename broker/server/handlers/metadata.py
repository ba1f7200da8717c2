"""Metadata and DescribeCluster: brokers, topics, partitions, leaders, replicas."""
from minilog.connector.protocol import ApiKey, ErrorCode, response

from ...security.access import (
    CLUSTER,
    CREATE,
    DESCRIBE,
    NOT_REQUESTED,
    TOPIC,
    allowed,
    authorized_operations,
)
from . import handles, on_listener

_META = response(ApiKey.METADATA)
_CLUSTER = response(ApiKey.DESCRIBE_CLUSTER)


def _brokers(broker, schema, header, id_field="node_id", forming=True):
    """The live (registered, unfenced) brokers. Metadata of a cluster still forming names at
    least this broker, so a client keeps a broker to ask (`forming`); DescribeCluster names
    only the brokers the controller unfenced, so waiting on it waits for a placeable cluster."""
    live = broker.metadata.brokers.values()
    if not live and forming:
        live = [broker.quorum.own_endpoint]
    live = [on_listener(broker, header, b) for b in live]
    return [schema.make("brokers", **{id_field: b.node_id}, host=b.host, port=b.port, rack=b.rack)
            for b in live]


def describe_topic(broker, ts, ops: int = NOT_REQUESTED):
    fenced = broker.metadata.fenced
    parts = [_META.make("topics", "partitions",
                        error_code=ErrorCode.LEADER_NOT_AVAILABLE if p.leader < 0 else 0,
                        partition_index=i, leader_id=p.leader, leader_epoch=p.leader_epoch,
                        replica_nodes=list(p.replicas), isr_nodes=list(p.isr),
                        offline_replicas=[r for r in p.replicas if r in fenced])
             for i, p in sorted(ts.partitions.items())]
    return _META.make("topics", error_code=0, name=ts.name, topic_id=ts.topic_id,
                      is_internal=ts.internal, partitions=parts,
                      topic_authorized_operations=ops)


def _may_create(broker, header, name: str) -> bool:
    return allowed(broker, header, CREATE, CLUSTER) or allowed(broker, header, CREATE, TOPIC, name)


@handles(ApiKey.METADATA, 0, 12)
async def metadata(broker, header, req):
    image = broker.metadata
    v = header.api_version
    if v >= 8 and req.include_topic_authorized_operations:
        def described(ts):
            return describe_topic(broker, ts, authorized_operations(broker, header, TOPIC, ts.name))
    else:
        def described(ts):
            return describe_topic(broker, ts)
    if req.topics is None or (header.api_version == 0 and not req.topics):
        # a principal sees only the topics it may describe
        topics = [described(ts) for ts in image.topics.values()
                  if allowed(broker, header, DESCRIBE, TOPIC, ts.name)]
    else:
        topics = []
        auto = req.allow_auto_topic_creation if header.api_version >= 4 else True
        for t in req.topics:
            ts = image.topics.get(t.name) if t.name is not None else image.by_id.get(t.topic_id)
            name = t.name if ts is None else ts.name
            if name is not None and not allowed(broker, header, DESCRIBE, TOPIC, name):
                topics.append(_META.make("topics", error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                         name=t.name, topic_id=t.topic_id, is_internal=False))
                continue
            if ts is None and t.name is not None and auto and \
                    broker.config["auto.create.topics.enable"]:
                if not _may_create(broker, header, name):  # Kafka: it may know, not create
                    topics.append(_META.make(
                        "topics", error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=t.name,
                        is_internal=False))
                    continue
                code = broker.auto_create_topic(t.name, header)
                if code:
                    topics.append(_META.make("topics", error_code=code, name=t.name))
                    continue
                # Images are immutable: the creation is in the broker's newest one, if yet.
                created = broker.metadata.topics.get(t.name)
                topics.append(_META.make("topics", error_code=ErrorCode.LEADER_NOT_AVAILABLE,
                                         name=t.name, topic_id=created.topic_id if created
                                         else t.topic_id))
                continue
            if ts is None:
                code = (ErrorCode.UNKNOWN_TOPIC_ID if t.name is None
                        else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                topics.append(_META.make("topics", error_code=code, name=t.name,
                                         topic_id=t.topic_id))
            else:
                topics.append(described(ts))
    # In a cluster every broker forwards admin requests to the active controller, so, as Kafka's
    # KRaft brokers do, Metadata names a live broker (this one): a client never waits on a
    # controller id that went stale during an election. DescribeCluster names the real one.
    controller = broker.config.node_id
    cluster_ops = authorized_operations(broker, header, CLUSTER) \
        if 8 <= v <= 10 and req.include_cluster_authorized_operations else NOT_REQUESTED
    return _META.cls(throttle_time_ms=0, brokers=_brokers(broker, _META, header),
                     cluster_id=image.cluster_id, controller_id=controller,
                     topics=topics, cluster_authorized_operations=cluster_ops)


@handles(ApiKey.DESCRIBE_CLUSTER, 0, 1)
async def describe_cluster(broker, header, req):
    """Answered to anyone, as Metadata is (Kafka's AuthHelper.computeDescribeClusterResponse):
    without DESCRIBE on the cluster a principal's authorized operations are 0."""
    ops = NOT_REQUESTED
    if req.include_cluster_authorized_operations:
        ops = authorized_operations(broker, header, CLUSTER) \
            if allowed(broker, header, DESCRIBE, CLUSTER) else 0
    return _CLUSTER.cls(throttle_time_ms=0, error_code=0, error_message=None, endpoint_type=1,
                        cluster_id=broker.metadata.cluster_id,
                        controller_id=broker.store.controller_id,
                        brokers=_brokers(broker, _CLUSTER, header, "broker_id", forming=False),
                        cluster_authorized_operations=ops)
