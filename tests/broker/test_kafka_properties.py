"""Kafka's own server.properties (3.x's `config/kraft/server.properties` with a static
`controller.quorum.voters`, and 4.x's `config/server.properties` with KIP-853's
`controller.quorum.bootstrap.servers`; combined broker and controller) starts a minilog broker:
the settings minilog implements take effect, those with no meaning here are accepted and named
in one warning line, and unknown keys (typos) are refused all at once, each with the nearest
known name. The files' keys and values are Kafka's, written out below (comments dropped); only
the addresses and the data directory are this test's."""
import pytest
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
# Kafka 4.x's config/server.properties (the KRaft file moved there, and its quorum became
# dynamic, KIP-853: `kafka-storage.sh format --standalone` makes node 1 a one-voter quorum).
# The same keys and values but for the quorum line (as in Kafka 3.9's
# config/kraft/reconfig-server.properties, which 4.0 made the stock file).
KAFKA_4_SERVER_PROPERTIES = KAFKA_KRAFT_SERVER_PROPERTIES.replace(
    "controller.quorum.voters=1@{controller}\n", "controller.quorum.bootstrap.servers={controller}\n")
assert "bootstrap.servers" in KAFKA_4_SERVER_PROPERTIES
KAFKA_FILES = [KAFKA_KRAFT_SERVER_PROPERTIES, KAFKA_4_SERVER_PROPERTIES]
# The rest take effect: listeners and their protocol map, inter.broker.listener.name and the
# transaction state log's settings included.
NO_EFFECT = ["num.io.threads", "num.network.threads", "num.recovery.threads.per.data.dir",
             "share.coordinator.state.topic.min.isr",
             "share.coordinator.state.topic.replication.factor", "socket.receive.buffer.bytes",
             "socket.send.buffer.bytes"]


def properties(tmp_path, *more, kafka_file=KAFKA_KRAFT_SERVER_PROPERTIES):
    client, controller = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
    path = tmp_path / "server.properties"
    path.write_text(kafka_file.format(
        client=client, controller=controller, logs=tmp_path / "kraft-combined-logs")
        + "".join(f"{line}\n" for line in more))
    return path, client, controller


@pytest.mark.parametrize("kafka_file", KAFKA_FILES, ids=["kafka-3-kraft", "kafka-4"])
def test_kafkas_server_properties_starts_a_broker_with_one_warning(tmp_path, kafka_file):
    # num.partitions and log.segment.bytes set apart from their defaults, to see them apply
    path, client, controller = properties(tmp_path, "num.partitions=3", "log.segment.bytes=4096",
                                          kafka_file=kafka_file)
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


def _refused(tmp_path, *more):
    """The one error line of a start refused for the Kafka 4 file with `more` lines (a later
    line overrides the file's own, as in any properties file); besides it only the one
    warning about settings with no effect."""
    path, _, _ = properties(tmp_path, *more, kafka_file=KAFKA_4_SERVER_PROPERTIES)
    r = subprocess.run([*START, str(path)], capture_output=True, text=True, timeout=60,
                       check=False)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    *others, error = r.stderr.splitlines()
    assert [line for line in others if "Kafka settings with no effect" not in line] == [], others
    return error


def test_several_bootstrap_controllers_are_refused_in_one_line(tmp_path):
    controllers = f"127.0.0.1:{free_port()},127.0.0.1:{free_port()}"
    assert _refused(tmp_path, f"controller.quorum.bootstrap.servers={controllers}") == (
        "minilog broker: controller.quorum.bootstrap.servers names 2 controllers: minilog's "
        "dynamic quorum (KIP-853) starts only a one-voter quorum of the node itself (as "
        "kafka-storage.sh format --standalone) and does not add voters yet; set "
        "controller.quorum.voters=ID@HOST:PORT,... on every node (a static quorum) instead")


def test_bootstrap_controllers_elsewhere_are_refused_in_one_line(tmp_path):
    other = f"127.0.0.1:{free_port()}"
    assert _refused(tmp_path, f"controller.quorum.bootstrap.servers={other}") == (
        f"minilog broker: controller.quorum.bootstrap.servers={other} is not this node's "
        f"controller listener: joining another controller's quorum (AddRaftVoter) is not "
        f"supported yet; set controller.quorum.voters=ID@HOST:PORT,... on every node (a static "
        f"quorum) instead")


def test_a_broker_only_node_with_bootstrap_controllers_is_refused_in_one_line(tmp_path):
    assert _refused(tmp_path, "process.roles=broker").startswith(
        "minilog broker: process.roles=broker with controller.quorum.bootstrap.servers is not "
        "supported yet")
