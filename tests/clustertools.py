"""Helpers for replicated-cluster tests: start, wait for conditions, describe, kill, pause."""
import os
import signal
import time

from confluent_kafka.admin import AdminClient, NewTopic
from minilog.connector.local_cluster import LocalCluster
from minilog.connector.protocol import ApiKey, request
from wire import RawConnection

FAST = {  # short enough for quick failovers, long enough for a loaded two-core machine
    "broker.session.timeout.ms": 3000,
    "broker.heartbeat.interval.ms": 300,
    "controller.quorum.election.timeout.ms": 1000,
    "controller.quorum.fetch.timeout.ms": 3000,
    "offsets.topic.num.partitions": 3,
    "group.initial.rebalance.delay.ms": 0,
}
DEADLINE = 120.0


def wait_for(condition, what, timeout=DEADLINE, interval=0.1):
    """Poll `condition()` until it returns something true; return that, or fail saying `what`."""
    deadline = time.monotonic() + timeout
    last_error = None
    while time.monotonic() < deadline:
        try:
            result = condition()
            if result:
                return result
        except Exception as e:  # noqa: BLE001 - a cluster in failover answers with errors
            last_error = e
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}"
                         + (f" (last error: {last_error})" if last_error else ""))


def active_controller(bootstrap):
    """The active controller, as DescribeCluster names it (Metadata names any live broker)."""
    from minilog.connector.client import AdminClient as MinilogAdmin
    with MinilogAdmin({"bootstrap.servers": bootstrap}) as admin:
        return admin.describe_cluster(timeout=10).controller_id


def coordinator_of(cluster, key, key_type=1):
    """The node FindCoordinator names for `key` (a transactional id, or with key type 0 a
    group), once a live broker names one."""
    req = request(ApiKey.FIND_COORDINATOR)

    def ask():
        conn = RawConnection(cluster.bootstrap_of(*cluster.alive()).split(",")[0])
        try:
            answer = conn.call(ApiKey.FIND_COORDINATOR, 3, req.cls(key=key, key_type=key_type))
        finally:
            conn.close()
        return answer.node_id if answer.error_code == 0 else None
    return wait_for(ask, f"the coordinator of {key}")


def _all_led(placement):
    """`placement` ({partition: (leader, replicas, isr)}) if every partition has a leader."""
    return None if any(leader < 0 for leader, _, _ in placement.values()) else placement


class TestCluster(LocalCluster):
    __test__ = False

    def __init__(self, size, data_dir, overrides, controllers=0, metrics=False):
        settings = {**FAST, **overrides}
        extra = [x for k, v in settings.items() for x in ("-o", f"{k}={v}")]
        super().__init__(size, data_dir=data_dir, extra=extra, replicated=True,
                         controllers=controllers, metrics=metrics)

    def start(self):
        super().start()
        self.wait_for_brokers(len(self.brokers))
        return self

    def destroy(self):
        for b in self.nodes:
            if b.proc and b.proc.poll() is None:
                os.killpg(b.proc.pid, signal.SIGCONT)
            b.kill()

    def bootstrap_of(self, *node_ids):
        return ",".join(self.broker(n).bootstrap for n in node_ids)

    def alive(self):
        return [b.node_id for b in self.brokers if b.proc and b.proc.poll() is None]

    def admin(self, *via):
        return AdminClient({"bootstrap.servers": self.bootstrap_of(*(via or self.alive()))})

    def metadata(self, *via):
        return self.admin(*via).list_topics(timeout=5)

    def wait_for_brokers(self, count, via=()):
        """Until the controller has `count` brokers registered and unfenced: DescribeCluster as
        minilog's client sends it (librdkafka's describe_cluster reads Metadata, which names a
        broker of a forming cluster before it is either)."""
        from minilog.connector.client import AdminClient as MinilogAdmin

        def live():
            with MinilogAdmin({"bootstrap.servers": self.bootstrap_of(*(via or self.alive()))}) \
                    as admin:
                return len(admin.describe_cluster(timeout=10).brokers)
        try:
            return wait_for(lambda: live() == count, f"{count} live brokers")
        except AssertionError as e:
            raise AssertionError(f"{e}\n{self.diagnosis()}") from None

    def diagnosis(self, lines=12):
        """Each node's state and the end of its log: what a failed wait leaves to go on."""
        def state(node):
            if node.proc is None:
                return "not started"
            code = node.proc.poll()
            return f"pid {node.proc.pid} running" if code is None else f"exited {code}"
        return "\n".join(
            f"-- node {n.node_id} ({state(n)}, port {n.port}):\n"
            + "\n".join(n.log().splitlines()[-lines:]) for n in self.nodes)

    def create_topic(self, name, partitions=1, rf=3, config=None, assignment=None):
        """`assignment`: [[replica ids] per partition], preferred leader first, instead of
        `partitions` and `rf`."""
        admin = self.admin()  # kept alive until the answer arrives
        new = NewTopic(name, len(assignment), replica_assignment=assignment, config=config or {}) \
            if assignment else NewTopic(name, partitions, rf, config=config or {})
        admin.create_topics([new])[name].result(30)
        # Every live broker has applied the topic (as Kafka, metadata reaches brokers a moment
        # after the controller answers): raw requests to its leader find it.
        return self.wait_agreed(name)

    def wait_agreed(self, name):
        """{partition: (leader, replicas, isr)} once every live broker answers the same."""
        return wait_for(lambda: self._agreed(name), f"every broker to know the leaders of {name}")

    def _agreed(self, name):
        views = [self.partitions_at(name, node) for node in self.alive()]
        return views[0] if views[0] and all(v == views[0] for v in views) else None

    def partitions_at(self, topic, node_id):
        """partitions() as broker `node_id` itself answers (a client may ask any broker it
        knows, so only a connection to that one broker shows what it has applied)."""
        req = request(ApiKey.METADATA)
        conn = RawConnection(self.broker(node_id).bootstrap)
        try:
            answer = conn.call(ApiKey.METADATA, 9, req.cls(
                topics=[req.make("topics", name=topic)], allow_auto_topic_creation=False))
        finally:
            conn.close()
        t, = answer.topics
        if t.error_code or not t.partitions:
            return None
        return _all_led({p.partition_index: (p.leader_id, list(p.replica_nodes),
                                             sorted(p.isr_nodes)) for p in t.partitions})

    def partitions(self, topic, *via):
        """{partition: (leader, replicas, isr)} once every partition has a leader, else None."""
        md = self.metadata(*via).topics.get(topic)
        if md is None or md.error is not None or not md.partitions:
            return None
        return _all_led({p.id: (p.leader, list(p.replicas), sorted(p.isrs))
                         for p in md.partitions.values()})

    def partition_of(self, topic, partition=0, *via):
        """(leader, replicas, isr) of one partition once a broker names its leader: a client
        may ask a broker that has not yet learnt what another answered a moment ago."""
        return wait_for(lambda: (self.partitions(topic, *via) or {}).get(partition),
                        f"a leader for {topic}-{partition}")

    def wait_isr(self, topic, partition, isr, what=None):
        return wait_for(lambda: (self.partitions(topic) or {}).get(partition, (0, 0, None))[2]
                        == sorted(isr), what or f"ISR of {topic}-{partition} to be {sorted(isr)}")

    def pause(self, node_id):
        os.killpg(self.broker(node_id).proc.pid, signal.SIGSTOP)

    def resume(self, node_id):
        os.killpg(self.broker(node_id).proc.pid, signal.SIGCONT)
