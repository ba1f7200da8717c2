"""A real Prometheus scrapes a three-broker cluster's `/metrics`: the three standard Kafka alerts
(under-replicated > 0, offline > 0, active controllers != 1) evaluate through its API as a
kill -9 and a restart of a broker should make them, and a group's lag (kafka_exporter's names)
rises and falls with what is produced and committed."""
import pytest
from clustertools import TestCluster, active_controller, wait_for
from confluent_kafka import Producer
from prometheus import BINARY, SKIP_REASON, Prometheus

from minilog.connector.client import AdminClient

pytestmark = [pytest.mark.skipif(BINARY is None, reason=SKIP_REASON), pytest.mark.timeout(300)]

# The PromQL of the three alerts every Kafka dashboard ships, summed over the brokers.
UNDER_REPLICATED = "sum(kafka_server_replicamanager_underreplicatedpartitions) > 0"
OFFLINE = "sum(kafka_controller_kafkacontroller_offlinepartitionscount) > 0"
NOT_ONE_CONTROLLER = "sum(kafka_controller_kafkacontroller_activecontrollercount) != 1"


@pytest.fixture(scope="module")
def scraped(tmp_path_factory):
    cluster = TestCluster(3, tmp_path_factory.mktemp("cluster"), {}, metrics=True).start()
    prometheus = None
    try:
        prometheus = Prometheus([f"127.0.0.1:{b.metrics_port}" for b in cluster.brokers]).start()
        yield cluster, prometheus
    finally:
        if prometheus is not None:
            prometheus.stop()
        cluster.destroy()


def _firing(prometheus):
    """The alerts whose expression has a result now."""
    return {name for name, expr in (("under-replicated", UNDER_REPLICATED),
                                    ("offline", OFFLINE), ("controllers", NOT_ONE_CONTROLLER))
            if prometheus.query(expr)}


def _healthy(prometheus, brokers):
    return prometheus.value('sum(up{job="minilog"})') == brokers \
        and prometheus.value("sum(kafka_controller_kafkacontroller_activecontrollercount)") == 1 \
        and prometheus.value("sum(kafka_server_replicamanager_underreplicatedpartitions)") == 0 \
        and not _firing(prometheus)


def test_a_killed_broker_fires_the_under_replicated_alert_until_it_returns(scraped):
    cluster, prometheus = scraped
    cluster.create_topic("alerts", partitions=3, rf=3)
    wait_for(lambda: prometheus.value(
        'sum(kafka_server_replicamanager_partitioncount{job="minilog"})') is not None
        and _healthy(prometheus, 3), "a healthy cluster in Prometheus, no alert firing")
    controller = active_controller(cluster.bootstrap)
    victim = next(n for n in (1, 2, 3) if n != controller)
    shrinks = prometheus.value("sum(kafka_server_replicamanager_isrshrinks_total)")

    cluster.broker(victim).kill()
    wait_for(lambda: _firing(prometheus) == {"under-replicated"},
             f"the under-replicated alert, and only it, after kill -9 of broker {victim}")
    assert prometheus.value(f'up{{instance="127.0.0.1:{cluster.broker(victim).metrics_port}"}}') == 0
    assert prometheus.value("sum(kafka_server_replicamanager_isrshrinks_total)") > shrinks
    assert prometheus.value("sum(kafka_controller_kafkacontroller_activecontrollercount)") == 1

    cluster.broker(victim).start()
    wait_for(lambda: _healthy(prometheus, 3),
             f"under-replicated partitions to clear once broker {victim} is back")
    assert prometheus.value("sum(kafka_server_replicamanager_isrexpands_total)") > 0


def test_a_groups_lag_rises_with_produced_records_and_falls_with_its_commits(scraped):
    cluster, prometheus = scraped
    cluster.create_topic("lagging", partitions=1, rf=3)
    lag = 'max(kafka_consumergroup_lag{consumergroup="watchers",topic="lagging",partition="0"})'
    with AdminClient({"bootstrap.servers": cluster.bootstrap}) as admin:
        admin.alter_group_offsets("watchers", {("lagging", 0): 0}, timeout=30)
        wait_for(lambda: prometheus.value(lag) == 0, "the group's lag at 0 in Prometheus")

        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
        for i in range(40):
            producer.produce("lagging", value=b"%d" % i, partition=0)
        assert producer.flush(60) == 0
        wait_for(lambda: prometheus.value(lag) == 40, "the group's lag to rise to 40")
        assert prometheus.value('max(kafka_topic_partition_current_offset'
                                '{topic="lagging",partition="0"})') == 40

        admin.alter_group_offsets("watchers", {("lagging", 0): 30}, timeout=30)
        wait_for(lambda: prometheus.value(lag) == 10, "the group's lag to fall to 10")
        assert prometheus.value('max(kafka_consumergroup_current_offset'
                                '{consumergroup="watchers",topic="lagging"})') == 30
