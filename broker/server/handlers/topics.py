"""Topic administration: CreateTopics, DeleteTopics, CreatePartitions, DeleteRecords."""
from minilog.connector.protocol import ApiKey, ErrorCode, response

from ...coordinator.transaction.txn_coordinator import TRANSACTION_TOPIC, create_transaction_topic
from ...security.access import DELETE, topic_refusal
from . import handles, leader_partition

_CREATE = response(ApiKey.CREATE_TOPICS)
_DELETE = response(ApiKey.DELETE_TOPICS)
_PARTS = response(ApiKey.CREATE_PARTITIONS)
_RECORDS = response(ApiKey.DELETE_RECORDS)


@handles(ApiKey.CREATE_TOPICS, 0, 7)
async def create_topics(broker, header, req):
    results = []
    seen = set()
    for t in req.topics:
        if t.name in seen:
            results.append(_CREATE.make("topics", name=t.name, error_code=ErrorCode.INVALID_REQUEST,
                                        error_message="topic listed twice in one request"))
            continue
        seen.add(t.name)
        configs = {c.name: c.value for c in t.configs}
        if t.name == TRANSACTION_TOPIC and not req.validate_only:
            # a broker asking for the transaction log (Kafka's auto topic creation)
            code, message, ts = create_transaction_topic(broker)
        else:
            code, message, ts = broker.topics.create(t.name, t.num_partitions,
                                                     t.replication_factor, configs,
                                                     validate_only=req.validate_only,
                                                     assignments=t.assignments)
        out = _CREATE.make("topics", name=t.name, error_code=code, error_message=message)
        if not code:
            if t.assignments:
                out.num_partitions = len(t.assignments)
                out.replication_factor = len(t.assignments[0].broker_ids)
            else:
                out.num_partitions = (t.num_partitions if t.num_partitions > 0
                                      else broker.config["num.partitions"])
                out.replication_factor = (t.replication_factor if t.replication_factor > 0
                                          else broker.config["default.replication.factor"])
            out.configs = [_CREATE.make("topics", "configs", name=k, value=str(v), read_only=False,
                                        config_source=src, is_sensitive=False)
                           for k, (v, src) in broker.topics.effective_configs(t.name, configs).items()]
            if ts is not None:
                out.topic_id = ts.topic_id
        results.append(out)
    return _CREATE.cls(throttle_time_ms=0, topics=results)


@handles(ApiKey.DELETE_TOPICS, 0, 6)
async def delete_topics(broker, header, req):
    if header.api_version >= 6:
        wanted = [(t.name, t.topic_id) for t in req.topics]
    else:
        wanted = [(name, None) for name in req.topic_names]
    results = []
    for name, topic_id in wanted:
        if name is None:
            ts = broker.metadata.by_id.get(topic_id)
            if ts is None:
                results.append(_DELETE.make("responses", name=None, topic_id=topic_id,
                                            error_code=ErrorCode.UNKNOWN_TOPIC_ID))
                continue
            name = ts.name
        code, message, ts = broker.topics.delete(name)
        results.append(_DELETE.make("responses", name=name, topic_id=ts.topic_id if ts else topic_id,
                                    error_code=code, error_message=message))
    return _DELETE.cls(throttle_time_ms=0, responses=results)


@handles(ApiKey.CREATE_PARTITIONS, 0, 3)
async def create_partitions(broker, header, req):
    results = []
    for t in req.topics:
        code, message = broker.topics.add_partitions(
            t.name, t.count, validate_only=req.validate_only,
            assignments=[list(a.broker_ids) for a in t.assignments or ()])
        results.append(_PARTS.make("results", name=t.name, error_code=code, error_message=message))
    return _PARTS.cls(throttle_time_ms=0, results=results)


@handles(ApiKey.DELETE_RECORDS, 0, 2)
async def delete_records(broker, header, req):
    topics = []
    for t in req.topics:
        parts = []
        refused = topic_refusal(broker, header, DELETE, t.name)
        for p in t.partitions:
            # only the leader moves the log start; followers copy it from their fetches
            partition, code = (None, refused) if refused else \
                leader_partition(broker, t.name, p.partition_index)
            if partition is None:
                parts.append(_RECORDS.make("topics", "partitions", partition_index=p.partition_index,
                                           low_watermark=-1, error_code=code))
                continue
            target = partition.high_watermark if p.offset == -1 else p.offset
            if target < 0 or target > partition.high_watermark:
                parts.append(_RECORDS.make("topics", "partitions", partition_index=p.partition_index,
                                           low_watermark=partition.log_start_offset,
                                           error_code=ErrorCode.OFFSET_OUT_OF_RANGE))
                continue
            low = partition.truncate_before(target)
            parts.append(_RECORDS.make("topics", "partitions", partition_index=p.partition_index,
                                       low_watermark=low, error_code=0))
        topics.append(_RECORDS.make("topics", name=t.name, partitions=parts))
    return _RECORDS.cls(throttle_time_ms=0, topics=topics)
