"""A partition directory that the committed metadata names no topic of is kept and named in one
warning; the metadata log's own directory, which belongs to Raft and not to a topic, is not."""
from brokers import MinilogBroker
from confluent_kafka.admin import AdminClient
from waiting import wait_until


def test_an_orphan_partition_directory_is_kept_and_named_but_not_the_metadata_log(tmp_path):
    first = MinilogBroker(data_dir=tmp_path).start()  # writes __cluster_metadata-0
    first.stop()
    (first.log_dir / "ghost-0").mkdir()
    broker = MinilogBroker(data_dir=tmp_path).start()
    try:
        AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=30)
        wait_until(lambda: "ghost-0 has no topic" in broker.log(), 60, "the warning")
        assert "__cluster_metadata-0 has no topic" not in broker.log(), broker.log()
        assert (broker.log_dir / "ghost-0").is_dir()
        assert (broker.log_dir / "__cluster_metadata-0").is_dir()
    finally:
        broker.kill()
