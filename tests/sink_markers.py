"""A replay-marker group made as the exactly-once Spark sink makes one (datasource/
transactional.py): a transaction that writes a record and commits the micro-batch id as the
offset of the group named after its transactional id, with the sink's marker metadata."""
from minilog.connector.client import Producer, TopicPartition
from minilog.connector.internal_groups import SINK_MARKER


def make_sink_marker(bootstrap, topic, transactional_id, batch_id=3, query_id="q-1"):
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id})
    try:
        producer.init_transactions(60)
        producer.begin_transaction()
        producer.send(topic, value=b"sunk")
        producer.send_offsets_to_transaction(
            {TopicPartition(topic, 0): (batch_id, SINK_MARKER + query_id)}, transactional_id)
        producer.commit_transaction(60)
    finally:
        producer.close()
