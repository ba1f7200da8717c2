"""The metadata loader in process: committed records make the next image (the old one never
changes), each publisher hears of it in the order installed with what changed, a snapshot
loaded makes the same image as replaying the records it stands for, and a publisher installed
late is caught up with the whole image."""
import dataclasses
import uuid

import pytest

from minilog.broker.metadata import records
from minilog.broker.metadata.delta import MetadataDelta, replayed
from minilog.broker.metadata.image import MetadataImage, PartitionState, TopicState
from minilog.broker.metadata.loader import MetadataLoader
from minilog.connector.acl_types import (
    AclBinding,
    AclOperation,
    PatternType,
    PermissionType,
    ResourceType,
)

READ = AclBinding(ResourceType.TOPIC, "orders", PatternType.LITERAL, "User:alice", "*",
                  AclOperation.READ, PermissionType.ALLOW)
CRED = {"salt": "c2FsdA==", "stored_key": "a2V5", "server_key": "c2s=", "iterations": 4096}
TOPIC_ID = uuid.UUID(int=7)


def _history():
    """A cluster's first records: three brokers, two unfenced, one fenced again, a topic of
    two partitions, its configs changed, an ACL, a SCRAM credential set then deleted, broker
    configs, producer ids, a feature level."""
    recs = [records.broker_record(1, "h1", 9001, listeners={"PLAINTEXT": ("h1", 9001)}),
            records.broker_record(2, "h2", 9002, rack="r2"),
            records.broker_record(3, "h3", 9003),
            records.fence_record(1, False), records.fence_record(2, False),
            records.fence_record(3, False), records.fence_record(3, True),
            records.topic_record(TopicState("orders", TOPIC_ID, configs={"retention.ms": "1"})),
            records.partition_record("orders", 0, PartitionState((1, 2), 1)),
            records.partition_record("orders", 1, PartitionState((2, 1), 2, 3, (2,), 1)),
            records.configs_record("orders", {"retention.ms": "2"}),
            records.acl_record(READ),
            records.scram_record("alice", "SCRAM-SHA-256", CRED),
            records.scram_record("bob", "SCRAM-SHA-256", CRED),
            records.scram_record("bob", "SCRAM-SHA-256", None),
            records.broker_config_record("", {"log.retention.ms": 5}),
            records.producer_ids_record(2000),
            records.feature_record("metadata.version", 21)]
    return [(offset, records.decode(records.encode(r))) for offset, r in enumerate(recs)]


class Recorder:
    def __init__(self, name, calls):
        self.name, self.calls = name, calls

    def on_metadata_update(self, delta, image):
        self.calls.append((self.name, delta, image))


def test_records_make_the_image():
    image = replayed(MetadataImage("c"), _history())
    assert image.offset == 17
    assert list(image.brokers) == [1, 2] and image.fenced == {3}
    assert image.broker_epochs == {1: 0, 2: 1, 3: 2} and image.fenced_at == {3: 6}
    assert image.registered[1].address_on("PLAINTEXT") == ("h1", 9001)
    assert image.registered[2].rack == "r2"
    ts = image.topics["orders"]
    assert image.by_id[TOPIC_ID] is ts and ts.configs == {"retention.ms": "2"}
    assert ts.partitions[1] == PartitionState((2, 1), 2, 3, (2,), 1)
    assert image.acls == {READ}
    assert image.scram == {("alice", "SCRAM-SHA-256"): CRED, ("bob", "SCRAM-SHA-256"): None}
    assert image.broker_configs == {"": {"log.retention.ms": 5}}
    assert image.next_producer_id == 2000 and image.features == {"metadata.version": 21}


def test_an_image_never_changes():
    loader = MetadataLoader(MetadataImage("c"))
    first = loader.handle_commit(_history())
    before = records.image_record(first)
    loader.handle_commit([(18, records.remove_topic_record("orders")),
                          (19, records.fence_record(1, True)),
                          (20, records.acl_record(READ, removed=True))])
    assert records.image_record(first) == before
    assert "orders" in first.topics and loader.image.topics == {}
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.next_producer_id = 1
    with pytest.raises(TypeError):
        first.topics["orders"].partitions[0] = None


def test_publishers_hear_each_change_in_order_with_what_changed():
    calls = []
    loader = MetadataLoader(MetadataImage("c"))
    loader.handle_commit(_history())
    loader.install([Recorder("cache", calls), Recorder("replicas", calls), Recorder("acls", calls)])
    calls.clear()
    new = PartitionState((1, 2), 2, 1, (1, 2), 1)
    image = loader.handle_commit([(18, records.partition_record("orders", 0, new)),
                                  (19, records.acl_record(READ, removed=True))])
    assert [name for name, _, _ in calls] == ["cache", "replicas", "acls"]
    delta = calls[0][1]
    assert all(d is delta and im is image for _, d, im in calls)
    assert delta.changed_partitions == {("orders", 0)} and not delta.changed_configs
    assert delta.acls_changed and not delta.scram_changed and not delta.brokers_changed
    assert image.topics["orders"].partitions[0] == new and image.acls == frozenset()


def test_a_deleted_topic_is_in_the_delta():
    loader = MetadataLoader(MetadataImage("c"))
    loader.handle_commit(_history())
    calls = []
    loader.install([Recorder("cleaner", calls)])
    loader.handle_commit([(18, records.remove_topic_record("orders"))])
    delta = calls[-1][1]
    assert sorted(delta.deleted_partitions()) == [("orders", 0), ("orders", 1)]
    assert delta.changed_partitions == {("orders", 0), ("orders", 1)}


def test_a_snapshot_loads_the_image_the_records_made():
    image = replayed(MetadataImage("c"), _history())
    snapshot = records.decode(records.encode(records.image_record(image)))
    loaded = replayed(MetadataImage("c"), [(17, snapshot)])
    assert loaded == image
    # ...whatever the image held before the snapshot
    other = replayed(MetadataImage("c"), [(0, records.topic_record(
        TopicState("gone", uuid.UUID(int=9))))])
    delta = MetadataDelta(other)
    delta.replay(snapshot, 17)
    assert delta.apply() == image and delta.snapshot
    assert delta.deleted_partitions() == [] and "gone" in delta.deleted_topics()


def test_a_late_publisher_is_caught_up_with_the_whole_image():
    loader = MetadataLoader(MetadataImage("c"))
    image = loader.handle_commit(_history())
    calls = []
    loader.install([Recorder("late", calls)])
    (_, delta, published), = calls
    assert published is image and delta.apply() == image
    assert delta.changed_partitions == {("orders", 0), ("orders", 1)}
    assert delta.acls_changed and delta.scram_changed and delta.broker_configs_changed


def test_a_reset_publishes_an_empty_image_then_the_replay():
    loader = MetadataLoader(MetadataImage("c"))
    loader.handle_commit(_history())
    calls = []
    loader.install([Recorder("replicas", calls)])
    empty = loader.reset()
    delta = calls[-1][1]
    assert delta.reset and empty == MetadataImage("c")
    assert delta.changed_partitions == {("orders", 0), ("orders", 1)}
    assert delta.deleted_partitions() == []  # forgotten, not deleted: the replay follows


def test_a_failing_publisher_does_not_starve_the_next():
    class Broken:
        def on_metadata_update(self, delta, image):
            raise RuntimeError("bug")
    calls = []
    loader = MetadataLoader(MetadataImage("c"))
    loader.install([Broken(), Recorder("next", calls)])
    loader.handle_commit(_history())
    assert calls[-1][2] is loader.image and "orders" in loader.image.topics
