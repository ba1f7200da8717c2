"""The settings a connector's query hands to `format("minilog")` (connect/queries.py)."""
from minilog.connect.queries import SOURCE_BATCH_SIZE, _producer_options
from minilog.connect.worker_config import worker_config

WORKER = {"bootstrap.servers": "127.0.0.1:9092", "group.id": "g",
          "config.storage.topic": "c", "offset.storage.topic": "o", "status.storage.topic": "s",
          "key.converter": "org.apache.kafka.connect.storage.StringConverter",
          "value.converter": "org.apache.kafka.connect.storage.StringConverter"}


def test_a_sources_producers_batch_a_micro_batch_in_large_batches():
    options = _producer_options(worker_config(WORKER))
    assert options["kafka.batch.size"] == str(SOURCE_BATCH_SIZE)
    assert options["kafka.bootstrap.servers"] == "127.0.0.1:9092"


def test_the_workers_producer_settings_reach_a_sources_producers():
    worker = worker_config({**WORKER, "producer.batch.size": "16384",
                            "producer.linger.ms": "7", "security.protocol": "PLAINTEXT"})
    options = _producer_options(worker)
    assert (options["kafka.batch.size"], options["kafka.linger.ms"]) == ("16384", "7")
    assert options["kafka.security.protocol"] == "PLAINTEXT"  # the client's own, as before
