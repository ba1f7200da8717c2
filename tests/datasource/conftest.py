"""A replicated three-broker cluster for the connector's tests: every topic created on it
has three replicas and acknowledges a write once two hold it (acks=all by default in
confluent-kafka and in the sink)."""
import pytest
from clustertools import TestCluster

REPLICATED = {"default.replication.factor": 3, "min.insync.replicas": 2}


@pytest.fixture(scope="module")
def three_brokers(tmp_path_factory):
    c = TestCluster(3, tmp_path_factory.mktemp("three-brokers"), REPLICATED).start()
    yield c
    c.destroy()


@pytest.fixture
def own_three_brokers(tmp_path):
    """A cluster of the test's own, for tests that kill a broker."""
    c = TestCluster(3, tmp_path / "cluster", REPLICATED).start()
    yield c
    c.destroy()
