"""`format("minilog")` through Spark Connect, as shared and serverless Spark run PySpark: a
real Connect server (the one pyspark ships, started with spark-submit as
`sbin/start-connect-server.sh` does) on 127.0.0.1, Connect clients in processes of their own,
a real broker. The server's Python is this interpreter, where minilog is installed, so the
format is found by name with no registration line."""
import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from brokers import free_port, wait_for_port
from readme import blocks
from sparkprocs import BIN, REPO, environment, kill_marked
from sparktools import consume_all, create_topic, produce, unique

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


CLIENT = Path(__file__).resolve().parent / "connect_client.py"


def client(connect_server, broker, *args):
    """connect_client.py's JSON answer: a Connect client in a process of its own (this one has
    the suite's regular Spark session, beside which pyspark opens no Connect one)."""
    result = subprocess.run([sys.executable, str(CLIENT), connect_server[0], broker.bootstrap,
                             *map(str, args)], capture_output=True, text=True, timeout=900,
                            check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_batch_write_then_batch_read(broker, connect_server):
    topic = create_topic(broker.bootstrap, unique("connect-batch"), 2)
    answer = client(connect_server, broker, "batch", topic)
    assert sorted(map(tuple, answer["read"])) == sorted(map(tuple, answer["written"]))
    assert len(answer["written"]) == 50


def test_streaming_copy_available_now(broker, connect_server, tmp_path):
    source = create_topic(broker.bootstrap, unique("connect-in"), 2)
    sink = create_topic(broker.bootstrap, unique("connect-out"), 2)
    produce(broker.bootstrap, source,
            [(i % 2, f"k{i}".encode(), f"v{i}".encode(), None) for i in range(200)])
    answer = client(connect_server, broker, "copy", source, sink, tmp_path / "ck")
    assert answer == {"finished": True, "exception": ""}, answer
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
