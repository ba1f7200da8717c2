"""DescribeLogDirs: the bytes each partition's segments hold on this broker.

minilog keeps every partition in one log directory (the first of `log.dirs`), so the answer
has one result. Sizes come from the segments' lengths, kept in memory: the request reads
nothing from disk. The Spark source asks it to turn `maxBytesPerTrigger` into offsets. It
needs DESCRIBE on the cluster, as in Kafka: the answer names every topic and the data directory.
"""
from minilog.connector.protocol import ApiKey, ErrorCode, response

from ...security.access import CLUSTER, DESCRIBE, allowed
from . import handles

_RESP = response(ApiKey.DESCRIBE_LOG_DIRS)


def _partitions_wanted(broker, topics):
    """{topic: [partition index]} held here: every partition for a null `topics`."""
    held = {}
    for topic, index in sorted(broker.partitions):
        held.setdefault(topic, []).append(index)
    if topics is None:
        return held
    return {t.topic: [i for i in t.partitions if i in held.get(t.topic, ())]
            for t in topics if t.topic in held}


@handles(ApiKey.DESCRIBE_LOG_DIRS, 0, 4)
async def describe_log_dirs(broker, header, req):
    if not allowed(broker, header, DESCRIBE, CLUSTER):  # Kafka: nothing, and from v3 the code
        return _RESP.cls(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                         results=[])
    topics = []
    for name, indexes in _partitions_wanted(broker, req.topics).items():
        parts = []
        for index in indexes:
            p = broker.partition(name, index)
            parts.append(_RESP.make("results", "topics", "partitions", partition_index=index,
                                   partition_size=p.log.size,
                                   offset_lag=max(0, p.log_end_offset - p.high_watermark),
                                   is_future_key=False))
        topics.append(_RESP.make("results", "topics", name=name, partitions=parts))
    result = _RESP.make("results", error_code=0, log_dir=str(broker.config.data_dir.resolve()),
                       topics=topics)
    return _RESP.cls(throttle_time_ms=0, error_code=0, results=[result])
