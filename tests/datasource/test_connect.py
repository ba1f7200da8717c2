"""`format("minilog")` through Spark Connect, as shared and serverless Spark run PySpark: a
real Connect server (the one pyspark ships, started with spark-submit as
`sbin/start-connect-server.sh` does) on 127.0.0.1, a Connect client session in this process,
a real broker. The server's Python is this interpreter, where minilog is installed, so the
format is found by name with no registration line."""
import subprocess
import sys
import uuid

import pytest
from brokers import free_port, wait_for_port
from readme import blocks
from sparkprocs import BIN, REPO, environment, kill_marked
from sparktools import consume_all, create_topic, minilog_copy, produce, unique

pytest.importorskip("grpc", reason="Spark Connect's client needs pyspark[connect]")

SERVER = "org.apache.spark.sql.connect.service.SparkConnectServer"


@pytest.fixture(scope="module")
def connect_server(tmp_path_factory):
    """The Connect server's address, its log; every process it started killed after."""
    port, mark = free_port(), uuid.uuid4().hex
    log = tmp_path_factory.mktemp("connect") / "server.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [str(BIN / "spark-submit"), "--class", SERVER, "--name", "minilog-test-connect",
             "--master", "local[2,4]", "--conf", "spark.sql.shuffle.partitions=2",
             # a short-lived server: C1's quick compiles, not C2's CPU-hungry ones
             "--driver-java-options", "-XX:TieredStopAtLevel=1",
             "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
             "--conf", f"spark.connect.grpc.binding.port={port}",
             "--conf", "spark.ui.enabled=false"],
            cwd=REPO, env=environment(mark, SPARK_CONNECT_MODE="0"), stdout=out,
            stderr=subprocess.STDOUT)
    try:
        wait_for_port(port, 240, proc)
        yield f"sc://127.0.0.1:{port}", log
    finally:
        kill_marked(mark)
        proc.wait()


@pytest.fixture(scope="module")
def remote(connect_server):
    """A Connect client session, the module's one (each new session costs the server seconds)."""
    from pyspark.sql import SparkSession
    session = SparkSession.builder.remote(connect_server[0]).getOrCreate()
    assert type(session).__module__ == "pyspark.sql.connect.session", type(session)
    yield session
    session.stop()


def test_batch_write_then_batch_read(broker, remote):
    topic = create_topic(broker.bootstrap, unique("connect-batch"), 2)
    rows = [(f"k{i}", f"v{i}") for i in range(50)]
    (remote.createDataFrame(rows, "key string, value string").write.format("minilog")
     .option("kafka.bootstrap.servers", broker.bootstrap).option("topic", topic)
     .mode("append").save())
    read = (remote.read.format("minilog").option("kafka.bootstrap.servers", broker.bootstrap)
            .option("subscribe", topic).load()
            .selectExpr("CAST(key AS STRING) k", "CAST(value AS STRING) v").collect())
    assert sorted((r.k, r.v) for r in read) == sorted(rows)


def test_streaming_copy_available_now(broker, remote, tmp_path):
    source = create_topic(broker.bootstrap, unique("connect-in"), 2)
    sink = create_topic(broker.bootstrap, unique("connect-out"), 2)
    produce(broker.bootstrap, source,
            [(i % 2, f"k{i}".encode(), f"v{i}".encode(), None) for i in range(200)])
    query = minilog_copy(remote, broker.bootstrap, source, sink, tmp_path / "ck", 80).start()
    try:
        assert query.awaitTermination(600), "the availableNow query did not finish in 600 s"
        assert query.exception() is None, query.exception()
    finally:
        query.stop()
    copied = consume_all(broker.bootstrap, sink, 2, expect=200)
    assert sorted(v for *_, v, _h in copied) == sorted(f"v{i}".encode() for i in range(200))


def test_the_readme_connect_example_runs(broker, connect_server, tmp_path):
    """The README's Spark Connect lines, as written, against this server and broker."""
    code, = [b for b in blocks("py") if ".remote(" in b]
    create_topic(broker.bootstrap, "payments", 1)
    script = tmp_path / "connect_example.py"
    script.write_text(code.replace("sc://127.0.0.1:15002", connect_server[0])
                      .replace("127.0.0.1:9092", broker.bootstrap))
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                            timeout=300, check=False)
    assert result.returncode == 0, result.stderr
    assert consume_all(broker.bootstrap, "payments", 1, expect=1)
