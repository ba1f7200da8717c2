"""The config topic's replay (connect/config_state.py) from Connect's own records: no worker,
no broker; the records are the ones Kafka's KafkaConfigBackingStore writes."""
import json

from minilog.connect.config_state import (
    ConfigState,
    connector_record,
    target_state_record,
    task_records,
)


def replay(*records):
    state = ConfigState()
    for key, value in records:
        state.apply(key, value)
    return state


def test_a_connector_tombstone_forgets_it():
    state = replay(connector_record("a", {"x": "1"}), target_state_record("a", "PAUSED"),
                   connector_record("a", None))
    assert state.connectors == {} and state.target_states == {}


def test_task_configs_appear_only_with_their_commit_record():
    *tasks, commit = task_records("a", [{"t": "0"}, {"t": "1"}])
    assert replay(connector_record("a", {}), *tasks).tasks == {}
    assert replay(connector_record("a", {}), *tasks, commit).tasks == {"a": [{"t": "0"},
                                                                          {"t": "1"}]}


def test_stopped_is_written_as_paused_for_older_workers_and_read_as_stopped():
    key, value = target_state_record("a", "STOPPED")
    assert json.loads(value) == {"state": "PAUSED", "state.v2": "STOPPED"}
    assert replay(connector_record("a", {}), (key, value)).target_states == {"a": "STOPPED"}


def test_a_record_kafka_wrote_without_state_v2_is_read():
    state = replay(connector_record("a", {}),
                   (b"target-state-a", json.dumps({"state": "PAUSED"}).encode()))
    assert state.target_states == {"a": "PAUSED"}
