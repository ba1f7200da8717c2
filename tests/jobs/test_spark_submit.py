"""bank_balance as spark-submit runs it, from the repository root with spark-conf/'s
properties: on the local master, and on a standalone cluster of two workers, where the reads
and writes run in executor processes (minilog pip-installed in their Python, as a cluster
must have it). The output topic ends with the independent fold's balances either way."""
import pytest
from sparkprocs import StandaloneCluster, marked, spark_submit
from sparktools import consume_all, create_topic, latest_by_key, unique

JOB = ["--properties-file", "spark-conf/spark-defaults.conf", "jobs/bank_balance.py"]


@pytest.fixture
def cluster():
    c = StandaloneCluster(workers=2, cores=1, memory="1g")
    try:
        yield c.start()
    finally:
        c.stop()
        assert not marked(c.mark), "a master, worker or executor outlived the test"


def submit(submit_args, broker, transactions, tmp_path):
    """spark-submit bank_balance on the transactions; the balances topic's last values."""
    topic, expected = transactions
    out = create_topic(broker.bootstrap, unique("bank.balances"), 1,
                       {"cleanup.policy": "compact"})
    log = tmp_path / "spark-submit.log"
    code = spark_submit([*submit_args, *JOB, "--bootstrap-servers", broker.bootstrap,
                         "--checkpoint", tmp_path / "checkpoint", "--trigger", "available-now",
                         "--transactions-topic", topic, "--balances-topic", out], log)
    assert code == 0, log.read_text()[-5000:]
    return latest_by_key(consume_all(broker.bootstrap, out, 1, len(expected)))


def test_bank_balance_under_spark_submit(broker, transactions, tmp_path):
    assert submit([], broker, transactions, tmp_path) == transactions[1]


def test_bank_balance_on_a_standalone_cluster(broker, transactions, tmp_path, cluster):
    assert submit(["--master", cluster.url], broker, transactions, tmp_path) == transactions[1]
    assert {worker for worker, _ in cluster.executors()} == {0, 1}, "executors on both workers"
