"""The Kafka source's progress metrics, from a streaming query's progress.

Spark's Kafka source reports `minOffsetsBehindLatest`, `maxOffsetsBehindLatest` and
`avgOffsetsBehindLatest` in each source's `metrics` (KafkaMicroBatchStream.metrics, through
ReportsSourceMetrics). pyspark 4.3's Python streaming sources cannot: the JVM side of a Python
stream (PythonMicroBatchStream) does not implement ReportsSourceMetrics, so `metrics` stays
`{}`. The same numbers follow from what each progress does carry: `endOffset` (what the batch
read up to) and `latestOffset` (the log ends the source saw, `reportLatestOffset`).
"""
import json


def offsets_of(value) -> dict:
    """{(topic, partition): offset} of a progress's offsets in Spark's Kafka form
    (`{"topic": {"0": 12}}`, as a dict or its JSON); {} for None."""
    if isinstance(value, str):
        value = json.loads(value)
    if value is None:
        return {}
    return {(t, int(p)): int(o) for t, parts in value.items() for p, o in parts.items()}


def _getter(source):
    return source.get if isinstance(source, dict) else (lambda k: getattr(source, k, None))


def offsets_read(source) -> dict[tuple[str, int], int]:
    """{(topic, partition): offsets the micro-batch read} for one source's progress: its
    `endOffset` less its `startOffset` (0 where the batch started a partition)."""
    get = _getter(source)
    start, end = offsets_of(get("startOffset")), offsets_of(get("endOffset"))
    return {tp: off - start.get(tp, 0) for tp, off in end.items()}


def offsets_behind_latest(source) -> dict[str, str]:
    """Spark's three metrics for one source's progress (a `SourceProgress` as a listener gets
    it, or its dict from `query.lastProgress["sources"]`), as Spark computes them: for each
    partition, its latest offset less the offset consumed (0 when none was); {} when the
    progress has no latest offsets."""
    get = _getter(source)
    latest, consumed = offsets_of(get("latestOffset")), offsets_of(get("endOffset"))
    behind = [off - consumed.get(tp, 0) for tp, off in latest.items()]
    if not behind:
        return {}
    return {"minOffsetsBehindLatest": str(min(behind)),
            "maxOffsetsBehindLatest": str(max(behind)),
            "avgOffsetsBehindLatest": str(sum(behind) / len(behind))}
