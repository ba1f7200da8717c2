"""`spark.readStream.format("minilog")`: micro-batches under availableNow and processing-time
triggers, admission control, checkpoints, new partitions, data loss and group commits, against
real brokers (minilog, and Tansu: the connector is a Kafka client and must not depend on
minilog-only behaviour)."""
import json
import time

import pytest
from sparktools import (
    add_partitions,
    committed,
    create_topic,
    produce,
    run_available_now,
    unique,
    wait_for,
)

from minilog.connector.client import AdminClient
from minilog.jobs.pipeline import start_query


def fill(bootstrap, topic, partitions, per_partition, start=0, one_per_batch=False):
    produce(bootstrap, topic, [(p, f"k{i}".encode(), f"{p}:{i}".encode(), None)
                               for p in range(partitions)
                               for i in range(start, start + per_partition)], one_per_batch)


def stream(spark, bootstrap, topic, **options):
    reader = (spark.readStream.format("minilog").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic).option("startingOffsets", "earliest"))
    for k, v in options.items():
        reader = reader.option(k, str(v))
    return reader.load()


def memory_rows(spark, name):
    return spark.sql(f"select partition, offset, value from `{name}`").collect()


@pytest.fixture(scope="module", params=["minilog", "minilog-3-brokers", "tansu"])
def cluster(request):
    return request.getfixturevalue({"minilog": "broker", "minilog-3-brokers": "three_brokers",
                                    "tansu": "tansu"}[request.param])


@pytest.mark.parametrize("group_option", ["kafka.group.id", "group.id"])
def test_available_now_reads_all_in_bounded_batches_and_commits_the_group(
        spark, cluster, tmp_path, group_option):
    topic = create_topic(cluster.bootstrap, unique("avail"), 3)
    fill(cluster.bootstrap, topic, 3, 40, one_per_batch=cluster is not None and
         type(cluster).__name__ == "TansuBroker")
    group, name = unique("spark-group"), unique("avail").replace("-", "_")
    df = stream(spark, cluster.bootstrap, topic, maxOffsetsPerTrigger=25,
                **{group_option: group})
    progress = run_available_now(df, tmp_path / "ck", name=name)
    rows = memory_rows(spark, name)
    assert sorted((r.partition, r.offset) for r in rows) == [
        (p, i) for p in range(3) for i in range(40)]
    sizes = [p["numInputRows"] for p in progress if p["numInputRows"]]
    assert sum(sizes) == 120 and max(sizes) <= 25 and len(sizes) >= 5
    # the last batch of an availableNow query is never passed to commit(): the group must
    # still reach the end (lag 0), as Kafka's own tools see it
    wait_for(lambda: committed(cluster.bootstrap, group, topic, 3) == {0: 40, 1: 40, 2: 40},
             "the group's offsets at the end of the topic")
    if type(cluster).__name__ == "TansuBroker":
        return  # Tansu keeps no commit metadata
    with AdminClient({"bootstrap.servers": cluster.bootstrap}) as admin:
        metadata = {om.metadata for om in admin.list_group_offsets(group).values()}
    assert [json.loads(m)["spark"]["source"] for m in metadata] == ["format(minilog)"]


def test_restart_from_checkpoint_continues_exactly_after_the_last_batch(spark, broker,
                                                                       tmp_path):
    topic = create_topic(broker.bootstrap, unique("restart"), 2)
    out = tmp_path / "out"
    fill(broker.bootstrap, topic, 2, 30)
    df = stream(spark, broker.bootstrap, topic, maxOffsetsPerTrigger=20)
    sel = df.select("partition", "offset", "value")
    run_available_now(sel, tmp_path / "ck", sink="parquet", path=str(out))
    fill(broker.bootstrap, topic, 2, 30, start=30)
    run_available_now(sel, tmp_path / "ck", sink="parquet", path=str(out))
    rows = spark.read.parquet(str(out)).collect()
    got = sorted((r.partition, r.offset) for r in rows)
    assert got == [(p, i) for p in range(2) for i in range(60)]  # no gap, no duplicate


def test_processing_time_trigger_bounds_batches_and_reads_a_new_partition(spark, broker,
                                                                          tmp_path):
    topic = create_topic(broker.bootstrap, unique("live"), 2)
    name = unique("live").replace("-", "_")
    df = stream(spark, broker.bootstrap, topic, maxOffsetsPerTrigger=15)
    # no checkpoint: a memory sink's query started again (start_query) could not reuse it
    q = start_query(df.writeStream.format("memory").queryName(name)
                    .trigger(processingTime="300 milliseconds"))
    try:
        fill(broker.bootstrap, topic, 2, 20)
        wait_for(lambda: len(memory_rows(spark, name)) >= 40, "the first 40 records")
        add_partitions(broker.bootstrap, topic, 3)
        produce(broker.bootstrap, topic, [(2, None, f"2:{i}".encode(), None) for i in range(7)])
        wait_for(lambda: len(memory_rows(spark, name)) >= 47, "the new partition's records")
        time.sleep(1)  # a few more triggers: nothing may arrive twice
        rows = memory_rows(spark, name)
        assert sorted((r.partition, r.offset) for r in rows) == (
            [(p, i) for p in range(2) for i in range(20)] + [(2, i) for i in range(7)])
        sizes = [p["numInputRows"] for p in q.recentProgress]
        assert max(sizes) <= 15
        latest = q.lastProgress["sources"][0]["latestOffset"]
        assert '"2":7' in latest.replace(" ", "")  # reportLatestOffset: progress shows the end
    finally:
        q.stop()


def delete_by_retention(bootstrap, topic, before):
    """Retention removes whole segments: shrink retention.bytes until the log starts after
    `before`; the new log start offset."""
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        admin.alter_configs("topic", topic, set={"retention.bytes": "1"})
        start = lambda: admin.list_offsets({(topic, 0): "earliest"})[(topic, 0)].offset  # noqa: E731
        wait_for(lambda: start() > before, "retention to delete the unread segments")
        return start()


@pytest.mark.parametrize("how", ["retention", "delete-records"])
@pytest.mark.parametrize("fail", [True, False])
def test_records_deleted_before_they_are_read_fail_or_are_skipped(spark, make_broker, tmp_path,
                                                                   fail, how):
    b = make_broker(extra=["-o", "log.retention.check.interval.ms=100"]).bootstrap
    topic = create_topic(b, unique("loss"), 1, {"segment.bytes": "400"})
    fill(b, topic, 1, 10, one_per_batch=True)
    df = stream(spark, b, topic, failOnDataLoss=str(fail).lower())
    sel, out = df.select("offset"), str(tmp_path / "out")
    run_available_now(sel, tmp_path / "ck", sink="parquet", path=out)
    fill(b, topic, 1, 10, start=10, one_per_batch=True)
    if how == "retention":  # 10 and more go before the query sees them
        start = delete_by_retention(b, topic, 10)
    else:
        with AdminClient({"bootstrap.servers": b}) as admin:
            start = admin.delete_records({(topic, 0): 15})[(topic, 0)]
    assert 10 < start < 20
    if fail:
        with pytest.raises(Exception, match=rf"{topic}-0: offsets 10 to {start - 1} were deleted"):
            run_available_now(sel, tmp_path / "ck", sink="parquet", path=out)
    else:
        run_available_now(sel, tmp_path / "ck", sink="parquet", path=out)
        offsets = sorted(r.offset for r in spark.read.parquet(out).collect())
        assert offsets == list(range(10)) + list(range(start, 20))


def test_starting_offsets_group_resumes_from_the_groups_commits(spark, broker, tmp_path):
    topic = create_topic(broker.bootstrap, unique("grp"), 2)
    fill(broker.bootstrap, topic, 2, 10)
    group = unique("resume")
    with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
        admin.alter_group_offsets(group, {(topic, 0): 6})  # partition 1: no commit
    name = unique("grp").replace("-", "_")
    df = stream(spark, broker.bootstrap, topic, startingOffsets="group",
                **{"kafka.group.id": group, "kafka.auto.offset.reset": "earliest"})
    run_available_now(df, tmp_path / "ck", name=name)
    got = sorted((r.partition, r.offset) for r in memory_rows(spark, name))
    assert got == [(0, i) for i in range(6, 10)] + [(1, i) for i in range(10)]


def test_a_memory_query_started_again_does_not_trip_on_the_first_starts_checkpoint(
        spark, broker, tmp_path):
    """start_query starts a query again when Spark's source worker was late: with a memory
    sink, which Spark never recovers from a checkpoint, the second start failed on the offsets
    the first had written ("This query does not support recovering from checkpoint location")."""
    topic = create_topic(broker.bootstrap, unique("again"), 1)
    fill(broker.bootstrap, topic, 1, 5)
    for _ in ("first start", "started again"):
        name = unique("again").replace("-", "_")
        run_available_now(stream(spark, broker.bootstrap, topic), tmp_path / "ck", name=name)
        assert len(memory_rows(spark, name)) == 5
