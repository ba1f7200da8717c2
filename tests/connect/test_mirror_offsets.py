"""MirrorMaker 2's connectors' offsets checked as Kafka's alterOffsets checks them, without a
worker: each connector's shapes and Kafka's messages, maps printed as Java prints them."""
import pytest
from minilog.connect.errors import ConnectRestError
from minilog.connect.mirror_offsets import check_entry, java_map, resume_positions
from minilog.connect.mirror_plugins import MIRROR_CHECKPOINT, MIRROR_HEARTBEAT, MIRROR_SOURCE


def test_maps_print_in_javas_hashmap_order():
    assert java_map({"topic": "t", "partition": 0, "cluster": "A"}) == (
        "{cluster=A, partition=0, topic=t}")
    assert java_map({"group": "g", "topic": "t", "partition": 1}) == (
        "{partition=1, topic=t, group=g}")


@pytest.mark.parametrize("plugin, partition, offset, message", [
    (MIRROR_SOURCE, {"cluster": "A", "topic": "t", "partition": 2**31}, {"offset": 1},
     "Source partition {cluster=A, partition=2147483648, topic=t} has an invalid value "
     "2147483648 for the 'partition' key, which must be an integer"),
    (MIRROR_SOURCE, {"cluster": 7, "topic": "t", "partition": 0}, {"offset": 1},
     "Source partition {cluster=7, partition=0, topic=t} has an invalid value 7 for the "
     "'cluster' key, which must be a string"),
    (MIRROR_SOURCE, {"cluster": "A", "topic": ["t"], "partition": 0}, {"offset": 1},
     "Offsets may only contain primitive types as values, but field topic contains ARRAY"),
    (MIRROR_CHECKPOINT, {"group": "g", "topic": "t", "partition": 0}, {"offset": 3},
     "Source offset {offset=3} for source partition {partition=0, topic=t, group=g} has an "
     "invalid value 3 for the 'offset' key; the only accepted value is 0"),
    (MIRROR_HEARTBEAT, {"sourceClusterAlias": "A"}, {"offset": 0},
     "Source partition {sourceClusterAlias=A} is missing the 'targetClusterAlias' key, which "
     "is required"),
])
def test_refusals_are_kafkas(plugin, partition, offset, message):
    with pytest.raises(ConnectRestError) as refused:
        check_entry(plugin, partition, offset)
    assert (refused.value.status, refused.value.message) == (500, message)


def test_what_each_connector_accepts():
    check_entry(MIRROR_SOURCE, {"cluster": "A", "topic": "t", "partition": 0}, {"offset": 9})
    check_entry(MIRROR_SOURCE, {"anything": "else"}, None)  # a tombstone cleans anything up
    check_entry(MIRROR_CHECKPOINT, {"group": "g", "topic": "t", "partition": 0}, {"offset": 0})
    check_entry(MIRROR_HEARTBEAT, {"sourceClusterAlias": "A", "targetClusterAlias": "B"},
                {"offset": 0})


def test_the_copy_resumes_one_past_its_source_clusters_offsets():
    stored = [
        {"partition": {"cluster": "A", "topic": "t", "partition": 0}, "offset": {"offset": 9}},
        {"partition": {"cluster": "C", "topic": "t", "partition": 1}, "offset": {"offset": 4}}]
    assert resume_positions(stored, "A") == {("t", 0): 10}
