"""Burrow (LinkedIn's lag checker, Debian's `burrow` 1.2.1, sarama underneath), a tool we did
not write, reads a confluent-kafka group's lag from a real minilog broker: it lists topics and
log end offsets, consumes `__consumer_offsets` itself and answers in its HTTP API. Debian's
`zookeeper` serves Burrow's own coordination, started here on 127.0.0.1. Skipped where the
packages are missing (`apt-get install burrow zookeeper`; CI installs them)."""
import json
import os
import shutil
import signal
import socket
import subprocess
import urllib.error
import urllib.request
import uuid

import pytest
from brokers import free_port, wait_for_port
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from waiting import wait_until

BURROW = shutil.which("Burrow")
ZOOKEEPER_JAR = "/usr/share/java/zookeeper.jar"
JAVA = shutil.which("java")
pytestmark = [
    pytest.mark.skipif(BURROW is None or JAVA is None or not os.path.exists(ZOOKEEPER_JAR),
                       reason="Burrow or ZooKeeper is not installed "
                              "(apt-get install burrow zookeeper)"),
    pytest.mark.timeout(300)]

# sarama's protocol versions follow `kafka-version`: 1.0.0 fetches record batches (Fetch v4 and
# later); 0.10.0 asks ListOffsets v0 and fetches message format v1 with Fetch v2.


def _process(argv, log_path):
    with open(log_path, "ab") as log:
        return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)


def _stop(proc):
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(10)


def _serving(port):
    """ZooKeeper's own status (`srvr`) names its mode once it serves sessions; its port
    listens before that."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as conn:
            conn.sendall(b"srvr")
            return b"Mode:" in conn.recv(4096)
    except OSError:
        return False


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory):
    home = tmp_path_factory.mktemp("zookeeper")
    port = free_port()
    (home / "zoo.cfg").write_text(f"tickTime=2000\ndataDir={home / 'data'}\nclientPort={port}\n"
                                  "clientPortAddress=127.0.0.1\nadmin.enableServer=false\n"
                                  "4lw.commands.whitelist=srvr\n")
    proc = _process([JAVA, "-cp", f"/etc/zookeeper/conf:{ZOOKEEPER_JAR}",
                     "org.apache.zookeeper.server.quorum.QuorumPeerMain",
                     str(home / "zoo.cfg")], home / "zookeeper.log")
    try:
        wait_for_port(port, 60)
        wait_until(lambda: _serving(port), 60, what="ZooKeeper to serve")
        yield f"127.0.0.1:{port}"
    finally:
        _stop(proc)


def _start_burrow(broker, zookeeper, home, kafka_version):
    """Burrow watching the broker as cluster `local` with sarama at `kafka_version`: (its
    process, its HTTP API's base address)."""
    http = free_port()
    (home / "burrow.toml").write_text(f"""
[general]
pidfile="{home / 'burrow.pid'}"
[logging]
level="info"
[zookeeper]
servers=["{zookeeper}"]
timeout=6
root-path="/burrow-{kafka_version}"
[client-profile.test]
client-id="burrow-test"
kafka-version="{kafka_version}"
[cluster.local]
class-name="kafka"
servers=["{broker.bootstrap}"]
client-profile="test"
topic-refresh=2
offset-refresh=1
[consumer.local]
class-name="kafka"
cluster="local"
servers=["{broker.bootstrap}"]
client-profile="test"
start-latest=false
[httpserver.default]
address="127.0.0.1:{http}"
[storage.default]
class-name="inmemory"
workers=2
intervals=10
expire-group=604800
min-distance=1
""")
    proc = _process([BURROW, "-config-dir", str(home)], home / "burrow.log")
    try:
        wait_for_port(http, 60)
    except BaseException:
        _stop(proc)
        raise
    return proc, f"http://127.0.0.1:{http}/v3/kafka/local"


@pytest.fixture(scope="module")
def burrow(broker, zookeeper, tmp_path_factory):
    """Burrow with sarama at kafka-version 1.0.0; its HTTP API's base address."""
    proc, url = _start_burrow(broker, zookeeper, tmp_path_factory.mktemp("burrow"), "1.0.0")
    yield url
    _stop(proc)


@pytest.fixture(scope="module")
def burrow_0_10_0(broker, zookeeper, tmp_path_factory):
    """The same at kafka-version 0.10.0 (ZooKeeper root apart)."""
    home = tmp_path_factory.mktemp("burrow-0.10.0")
    proc, url = _start_burrow(broker, zookeeper, home, "0.10.0")
    yield url
    _stop(proc)


def _get(url):
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError:
        return None  # 404 until Burrow has seen the group


def _topic_of(broker, burrow, records_per_partition):
    """A new topic of two partitions holding `records_per_partition` records each, once
    Burrow lists it: Burrow drops the commits of a topic its last metadata refresh did not
    list (`dropped`, reason `no topic`, in its debug log), against Kafka too, and never reads
    them again."""
    topic = f"burrow-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(10)
    _produce(broker, topic, records_per_partition)
    wanted = [records_per_partition] * 2
    wait_until(lambda: (_get(f"{burrow}/topic/{topic}") or {}).get("offsets") == wanted, 60,
               what=f"Burrow to list {topic}")
    return topic


def _produce(broker, topic, per_partition):
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for i in range(2 * per_partition):
        p.produce(topic, value=b"x", partition=i % 2)
    assert p.flush(10) == 0


def _burrow_lag(burrow, group, topic, total):
    """{partition: (committed offset, lag)} once Burrow reports `total` lag for the group."""
    def lag():
        answer = _get(f"{burrow}/consumer/{group}/lag")
        if not answer or answer["error"] or answer["status"]["totallag"] != total:
            return None
        return answer["status"]
    status = wait_until(lag, 120, what=f"Burrow to report a lag of {total} for {group}")
    return {p["partition"]: (p["end"]["offset"], p["current_lag"])
            for p in status["partitions"] if p["topic"] == topic}


def _commit_and_read_lag(broker, burrow):
    topic, group = _topic_of(broker, burrow, 50), f"burrowed-{uuid.uuid4().hex[:8]}"
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                  "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(topic, 0, 20), TopicPartition(topic, 1, 30)],
                 asynchronous=False)
    finally:
        c.close()
    assert _burrow_lag(burrow, group, topic, 50) == {0: (20, 30), 1: (30, 20)}
    assert _get(f"{burrow}/topic/{topic}")["offsets"] == [50, 50]


def test_burrow_reports_the_lag_of_a_confluent_kafka_group(broker, burrow):
    _commit_and_read_lag(broker, burrow)


def test_burrow_at_kafka_version_0_10_0_reports_the_lag_too(broker, burrow_0_10_0):
    """sarama at 0.10.0: ListOffsets v0 and Fetch v2 (message format v1). Its partition
    consumers of `__consumer_offsets` start one per 250 ms fetch long poll (each start's
    ListOffsets waits behind the fetch on the one connection), so a commit may be read
    seconds after it is written."""
    _commit_and_read_lag(broker, burrow_0_10_0)


def test_burrow_reports_the_lag_of_a_spark_querys_group(spark, broker, burrow, tmp_path):
    """A `format("minilog")` query commits its progress to its group (commitOffsetsToGroup):
    Burrow sees the group at the end of what the query read, and behind by what came after."""
    from sparktools import run_available_now
    topic, group = _topic_of(broker, burrow, 10), f"spark-burrowed-{uuid.uuid4().hex[:8]}"
    df = (spark.readStream.format("minilog").option("kafka.bootstrap.servers", broker.bootstrap)
          .option("subscribe", topic).option("startingOffsets", "earliest")
          .option("kafka.group.id", group).load())
    run_available_now(df, tmp_path / "cp", sink="noop")
    _produce(broker, topic, 3)
    assert _burrow_lag(burrow, group, topic, 6) == {0: (10, 3), 1: (10, 3)}
