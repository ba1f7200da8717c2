"""Kafka's own `config/kraft/server.properties` (Kafka 4.x, combined broker and controller)
starts a minilog broker: the settings minilog implements take effect, those with no meaning
here are accepted and named in one warning line, and unknown keys (typos) are refused all at
once, each with the nearest known name. The file's keys and values are Kafka's, written out
below (comments dropped); only the addresses and the data directory are this test's."""
import signal
import subprocess
import sys
import time

from brokers import free_port, wait_for_port
from waiting import wait_until

from minilog.connector.client import AdminClient, Consumer, NewTopic, Producer, TopicPartition

START = [sys.executable, "-m", "minilog.broker", "start"]

# Kafka's config/kraft/server.properties, its settings in its order. {client}, {controller}
# and {logs} stand for localhost:9092, localhost:9093 and /tmp/kraft-combined-logs.
KAFKA_KRAFT_SERVER_PROPERTIES = """\
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@{controller}
listeners=PLAINTEXT://{client},CONTROLLER://{controller}
inter.broker.listener.name=PLAINTEXT
advertised.listeners=PLAINTEXT://{client},CONTROLLER://{controller}
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600
log.dirs={logs}
num.partitions=1
num.recovery.threads.per.data.dir=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
log.retention.hours=168
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
"""
# The rest take effect: listeners and their protocol map, inter.broker.listener.name and the
# transaction state log's settings included.
NO_EFFECT = ["num.io.threads", "num.network.threads", "num.recovery.threads.per.data.dir",
             "share.coordinator.state.topic.min.isr",
             "share.coordinator.state.topic.replication.factor", "socket.receive.buffer.bytes",
             "socket.send.buffer.bytes"]


def properties(tmp_path, *more):
    client, controller = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
    path = tmp_path / "server.properties"
    path.write_text(KAFKA_KRAFT_SERVER_PROPERTIES.format(
        client=client, controller=controller, logs=tmp_path / "kraft-combined-logs")
        + "".join(f"{line}\n" for line in more))
    return path, client, controller


def test_kafkas_server_properties_starts_a_broker_with_one_warning(tmp_path):
    # num.partitions and log.segment.bytes set apart from their defaults, to see them apply
    path, client, controller = properties(tmp_path, "num.partitions=3", "log.segment.bytes=4096")
    log = tmp_path / "broker.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([*START, str(path)], stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_for_port(int(client.rsplit(":", 1)[1]), 60, proc)
        wait_for_port(int(controller.rsplit(":", 1)[1]), 60, proc)
        with AdminClient({"bootstrap.servers": client}) as admin:
            # The broker registers with its controller through the controller listener, and
            # takes partitions once unfenced.
            wait_until(lambda: "broker 1 unfenced" in log.read_text(), 60, "broker unfenced")
            admin.create_topics([NewTopic("kraft", -1, -1)])
            assert len(admin.describe_topics(["kraft"])["kraft"].partitions) == 3
        producer = Producer({"bootstrap.servers": client, "linger.ms": 0})
        for i in range(20):
            producer.send("kraft", value=bytes(500), partition=0).result(60)
        producer.close()
        consumer = Consumer({"bootstrap.servers": client})
        tp = TopicPartition("kraft", 0)
        assert consumer.end_offsets([tp])[tp] == 20
        consumer.close()
        segments = list((tmp_path / "kraft-combined-logs" / "kraft-0").glob("*.log"))
        assert len(segments) > 1, "log.segment.bytes=4096 rolls segments"
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    warnings = [line for line in log.read_text().splitlines() if "WARNING" in line]
    assert len(warnings) == 1, warnings
    assert warnings[0].endswith("Kafka settings with no effect in minilog, ignored: "
                                + ", ".join(NO_EFFECT))


def test_unknown_keys_are_refused_together_with_the_nearest_names(tmp_path):
    path, _, _ = properties(tmp_path, "num.partition=3", "log.retention.hour=1",
                            "no.such.thing=1")
    started = time.monotonic()
    r = subprocess.run([*START, str(path)], capture_output=True, text=True, timeout=60,
                       check=False)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.strip().splitlines() == [
        "minilog broker: unknown broker settings: 'num.partition' (did you mean "
        "'num.partitions'?), 'log.retention.hour' (did you mean 'log.retention.hours'?), "
        "'no.such.thing'"], r.stderr
    assert time.monotonic() - started < 60
