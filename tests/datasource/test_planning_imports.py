"""Spark forks a Python process for each planning step of a data source (look it up, make it,
plan a read, start a write, commit it) and each imports `minilog.datasource`. Those steps mostly
need the options and the schema, not a Kafka client: the client package imports its producer,
consumer and admin machinery on first use, so the connector's import stays light."""
import subprocess
import sys

MACHINERY = ("minilog.connector.client.producer", "minilog.connector.client.sync_consumer",
             "minilog.connector.client.admin", "minilog.connector.client.connection")


def test_importing_the_data_source_leaves_the_client_machinery_unimported():
    probe = ("import sys; import minilog.datasource; "
             "from minilog.connector.client import Config, KafkaError, TopicPartition; "
             f"print([m for m in {MACHINERY!r} if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    assert out.strip() == "[]", out


def test_every_public_name_of_the_client_resolves():
    import minilog.connector.client as client
    for name in client.__all__:
        assert getattr(client, name) is not None, name
    assert sorted(client.__all__) == sorted(client._WHERE)
