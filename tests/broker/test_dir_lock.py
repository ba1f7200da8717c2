"""One broker per data directory (Kafka's `.lock`): a second broker process on a directory in
use is refused with one line naming the directory and the holder's pid, and leaves the first
serving; the kernel frees the lock when the holder dies, kill -9 included."""
import subprocess
import sys

from brokers import MinilogBroker, free_port
from confluent_kafka import Producer
from kafka import KafkaConsumer, TopicPartition
from waiting import kafka_python_to_end

START = [sys.executable, "-m", "minilog.broker", "start"]


def _produce(bootstrap, values):
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for v in values:
        producer.produce("ledger", v)
    assert producer.flush(60) == 0


def _read(bootstrap):
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        tp = TopicPartition("ledger", 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        return [r.value for r in kafka_python_to_end(consumer)]
    finally:
        consumer.close()


def _second_broker(data_dir):
    return subprocess.run([*START, "--listen", f"127.0.0.1:{free_port()}", "--data-dir",
                           str(data_dir), "--node-id", "2"],
                          capture_output=True, text=True, timeout=120, check=False)


def test_a_second_broker_on_a_data_directory_in_use_is_refused_and_the_first_serves_on(tmp_path):
    first = MinilogBroker(data_dir=tmp_path).start()
    try:
        _produce(first.bootstrap, [b"a", b"b"])
        second = _second_broker(first.log_dir)
        assert second.returncode == 1, second.stderr
        assert second.stderr == (f"minilog broker: {first.log_dir.resolve()} is in use by another "
                                 f"broker (pid {first.proc.pid}): stop it, or give this broker "
                                 f"another data directory\n")
        assert second.stdout == ""
        assert first.proc.poll() is None
        _produce(first.bootstrap, [b"c"])
        assert _read(first.bootstrap) == [b"a", b"b", b"c"]
        assert "unclean shutdown" not in first.log()
    finally:
        first.cleanup()


def test_after_kill_9_of_the_holder_a_new_broker_starts_on_the_directory(tmp_path):
    first = MinilogBroker(data_dir=tmp_path).start()
    try:
        _produce(first.bootstrap, [b"kept"])
        first.kill()  # SIGKILL: no code of ours releases the lock, the kernel does
        first.start()
        assert _read(first.bootstrap) == [b"kept"]
    finally:
        first.cleanup()
