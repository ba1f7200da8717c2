"""The broker process: owns the configuration, metadata, logs, partitions and the server.

Handlers receive this object and reach everything through it; it holds no protocol logic.
Its metadata comes from the Raft quorum (`quorum`), it may be the active `controller`, its
`replicas` lead or follow partitions, and admin requests go through the `router` to the
controller. With `controller.quorum.voters` set it is one node of a replicated cluster; without
it, the only voter of a quorum of its own, on its primary listener (KRaft's combined mode with
one node): the same code, electing itself at once. A node that is its quorum's only voter is
made ready (leader, registered, unfenced, its partitions led) before its port opens, so a
client's first request finds it as it left it. `process.roles` splits a cluster node as KRaft
does: a controller-only node is a voter that serves only the controller's requests (no
partitions, no groups, never registered as a broker); a broker-only node is an observer of the
quorum that registers with the active controller.
"""
import asyncio
import logging
import os
import signal

from minilog.connector.client.connection import wait_set

from ..coordinator.group.group_coordinator import GroupCoordinator
from ..coordinator.transaction.txn_coordinator import TransactionCoordinator
from ..metadata.broker_configs import DynamicBrokerConfig
from ..metadata.broker_lifecycle import BrokerLifecycle
from ..metadata.controller import Controller
from ..metadata.image import BrokerEndpoint, MetadataImage
from ..metadata.loader import MetadataCache
from ..metadata.producer_ids import ProducerIdAllocator, quorum_blocks
from ..metadata.quorum_store import QuorumMetadataStore
from ..metadata.topic_manager import TopicManager
from ..replication.replica_manager import ReplicaManager
from ..replication.replica_metrics import ReplicaMetrics
from ..security.acl_metadata import open_acls
from ..security.authorizer import authorizer_from_config
from ..security.scram_store import open_scram_credentials, scram_seed_records
from ..storage.cleaner import LogCleaner
from ..storage.dir_lock import DirectoryLocks
from ..storage.log_manager import LogManager
from .config import BrokerConfig
from .controller_router import ControllerRouter
from .inter_broker import controller_security, inter_broker_security
from .metrics import NO_METRICS, BrokerMetrics
from .metadata_log import open_metadata_partition
from .metadata_publishers import broker_publishers, coordinator_elections
from .metrics_http import MetricsServer
from .peer_channel import PeerChannel
from .peer_connections import PeerConnections
from .quorum_bootstrap import single_broker_voters
from .secure_connection import listener_server
from .startup import bind_listener, data_summary, is_new

log = logging.getLogger("minilog.broker")

READY_ALONE_S = 30.0  # how long a one-voter node waits to be ready before serving anyway
# A single broker's own quorum at work: its election, registration and leaderships are no news
# to the operator of one broker, who reads a few lines at start (`--log-level DEBUG` shows them).
_OWN_QUORUM_LOGGERS = ("minilog.broker.raft", "minilog.broker.lifecycle",
                       "minilog.broker.replicas", "minilog.broker.controller")


def _quiet_own_quorum() -> None:
    for name in _OWN_QUORUM_LOGGERS:
        logger = logging.getLogger(name)
        if logger.getEffectiveLevel() == logging.INFO:
            logger.setLevel(logging.WARNING)


class _OwnRequest:
    """The header of a request this node answers for itself (its lifecycle's registration and
    heartbeats, when it is the active controller): no connection, no principal to check."""
    closed = None
    forwarded = False


class Broker:
    def __init__(self, config: BrokerConfig, listener=None):
        """`listener`: a socket already bound to the listen address (else bound at start)."""
        # First, before anything reads the data: a second process on these directories is
        # refused here (DirectoryLocked) and leaves them to the broker that holds them.
        self._locks = DirectoryLocks(config.log_dirs, what="broker")
        self.config = config
        self.is_broker = "broker" in config.process_roles
        self.is_controller = "controller" in config.process_roles
        self.stopping = False
        self.exit_code = 0  # non-zero once the broker stopped itself for a fault
        data_dir = config.data_dir
        self._new_data_dir = is_new(data_dir)
        self._listener = listener
        self.controller = self.replicas = self.router = self.lifecycle = None
        self.elections = None  # tells the coordinators what they lead (a broker's publisher)
        self.peer_connections = PeerConnections(config["broker.session.timeout.ms"] / 1000)
        voters = config.quorum_voters
        if voters:
            self.peers = PeerChannel(config.node_id, security=inter_broker_security(config),
                                     controller_security=controller_security(config),
                                     controllers=voters.values())
        else:  # a single broker: a quorum of its own, and no peer to reach
            voters = single_broker_voters(config.node_id, config.advertised_address,
                                          listener.getsockname()[1] if listener else None)
            self.peers = PeerChannel(config.node_id)
            _quiet_own_quorum()
        self.store = self.quorum = QuorumMetadataStore(
            config, self.peers, voters, open_metadata_partition,
            on_refused=self.peer_connections.refused)
        self.producer_ids = quorum_blocks(self)
        # What handlers read: the first metadata publisher (the others, in start()).
        self.metadata_cache = MetadataCache(self.store.image)
        self.store.loader.install([self.metadata_cache])
        self.producer_id_allocator = ProducerIdAllocator(self.quorum) if self.is_controller \
            else None
        host, port = config.advertised_address
        self.store.register_broker(BrokerEndpoint(config.node_id, host, port))
        self.scram = open_scram_credentials(config, self.store, seeds_file=not self.alone)
        self.acls = open_acls(self.store)
        self.authorizer = authorizer_from_config(config, self.acls.current)
        self.logs = LogManager(data_dir)
        self.partitions = {}  # (topic, index) -> Partition
        self.metrics = BrokerMetrics() if config.metrics_address else NO_METRICS
        self.replica_metrics = ReplicaMetrics(self.partitions)
        self.metrics.register(self.replica_metrics)
        self.topics = TopicManager(self)
        self.dynamic_configs = DynamicBrokerConfig(self)
        self.dynamic_configs.reapply()
        self.server = None  # the primary (first) listener's; `servers` has every listener's
        self.servers = []
        self.groups = self.cleaner = self.txn = None
        self.metrics_server = None
        self._tasks = []
        self._stopped = None

    @property
    def alone(self) -> bool:
        """The only voter of its quorum (a single broker): nobody else elects or registers it."""
        return set(self.quorum.raft.voters) == {self.config.node_id}

    @property
    def metadata(self) -> MetadataImage:
        """The newest committed metadata image."""
        return self.metadata_cache.image

    def partition(self, topic, index):
        return self.partitions.get((topic, index))

    def auto_create_topic(self, name, on_behalf_of=None):
        """`on_behalf_of`: the header of the client request that asks (the controller
        authorizes its principal)."""
        return self.router.auto_create(name, on_behalf_of)

    def _warn_unknown_partitions(self):
        """Partition directories the complete metadata names no topic of: kept, and said."""
        metadata_log = (self.store.partition.topic, self.store.partition.index)  # Raft's own
        for key in self.logs.existing_partitions():
            if key not in self.partitions and key != metadata_log:
                log.warning("partition directory %s-%d has no topic in the metadata; left alone", *key)

    async def start(self):
        self._stopped = asyncio.Event()
        self.logs.remove_stale_deletions()
        if self.is_broker:
            self.groups = GroupCoordinator(self).start()
            self.txn = TransactionCoordinator(self).start()
            self.cleaner = LogCleaner(self).start()
        host, port = self.config.listen_address
        # Every listener bound first (not yet accepting), so this node's addresses are known
        # before it registers; it accepts connections once it is ready to answer them.
        socks = [self._listener if i == 0 and self._listener else
                 bind_listener(listener.host, listener.port)
                 for i, listener in enumerate(self.config.listeners)]
        self.store.register_broker(self._endpoint([s.getsockname()[1] for s in socks]))
        if self.metrics.enabled:
            self.metrics_server = await MetricsServer(self.metrics,
                                                      *self.config.metrics_address).start()
        self._tasks.append(asyncio.create_task(self._housekeeping()))
        self._join_cluster()
        if self.alone:
            await self._ready_alone()
        for i, (listener, sock) in enumerate(zip(self.config.listeners, socks)):
            self.servers.append(await listener_server(self, listener, sock, primary=i == 0).start())
        self.server = self.servers[0]
        log.info("minilog %s %d (cluster %s) listening on %s:%d", self.role_name,
                 self.config.node_id, self.metadata.cluster_id, host, self.server.port)
        log.info("%s", data_summary(self, self._new_data_dir))
        return self

    def _endpoint(self, ports) -> BrokerEndpoint:
        """This broker's advertised addresses, every broker listener's (`ports`: each
        listener's as bound, for ephemeral ones); controller listeners are not advertised, as
        in Kafka."""
        registered = set(self.config.broker_listeners)
        addresses = {lst.name: (lst.advertised_host, lst.advertised_port or port)
                     for lst, port in zip(self.config.listeners, ports) if lst in registered}
        host, port = next(iter(addresses.values()))
        return BrokerEndpoint(self.config.node_id, host, port, listeners=addresses)

    async def _ready_alone(self):
        """A one-voter node before it accepts connections: it leads at once; then its
        `sasl.scram` seeds are committed where no credential was ever set, it registers and is
        unfenced, and `__consumer_offsets` is made and led here, as a client finds a single
        broker. Bounded: a node that cannot get there serves anyway, and says why."""
        raft = self.quorum.raft
        if not await wait_set(raft.caught_up, READY_ALONE_S):
            log.warning("the one-voter quorum did not elect this node in %.0fs", READY_ALONE_S)
            return
        seeds = scram_seed_records(self.config, self.store.working)
        if seeds:
            self.store.append(seeds)
        if self.lifecycle is None:  # a controller-only node: no broker to make ready
            await self.quorum.committed()
            return
        if not await wait_set(self.lifecycle.unfenced, READY_ALONE_S):
            log.warning("this broker was not unfenced by its own controller in %.0fs",
                        READY_ALONE_S)
            return
        self.controller.ensure_offsets_topic()
        await self.quorum.committed()
        await asyncio.sleep(0)  # the replica manager acts on what was just published
        self._warn_unknown_partitions()

    async def _ask_own_controller(self, api_key, body):
        """A request of this node's lifecycle to the controller it is itself, answered here."""
        from .handlers import HANDLERS  # the handlers import the server package
        return await HANDLERS[api_key].handler(self, _OwnRequest(), body)

    @property
    def role_name(self):
        return "broker" if not self.is_controller else \
            "controller" if not self.is_broker else "broker and controller"

    def _join_cluster(self):
        if self.is_controller:
            self.controller = Controller(self, self.quorum)
        if self.is_broker:
            self.replicas = ReplicaManager(self, self.quorum, self.peers).start()
            self.elections = coordinator_elections(self)
        self.router = ControllerRouter(self, self.quorum, self.peers)
        self.quorum.loader.install(broker_publishers(self))
        self.quorum.raft.start()
        if self.is_broker:
            self.lifecycle = BrokerLifecycle(self, self.quorum, self.peers,
                                             own_controller=self._ask_own_controller).start()

    async def _housekeeping(self):
        """Retention and time-based flushes, on Kafka's schedule; and, every second, a check
        that the data directory is still the one the broker opened."""
        interval = self.config["log.retention.check.interval.ms"] / 1000
        next_retention = asyncio.get_running_loop().time() + interval
        opened = _identity(self.config.data_dir)
        while not self.stopping:
            await asyncio.sleep(min(1.0, interval))
            if _identity(self.config.data_dir) != opened:
                self._data_dir_lost()
                return
            self.logs.flush_due()
            if asyncio.get_running_loop().time() >= next_retention:
                next_retention += interval
                expired = self.logs.expire_producers(self.config["producer.id.expiration.ms"])
                if expired:
                    log.info("expired %d idle producer id(s)", expired)
                deleted = self.logs.apply_retention()
                if deleted:
                    log.info("retention deleted %d segment(s)", deleted)

    def _data_dir_lost(self):
        """The data directory was deleted or replaced under the running broker: what it writes
        now reaches no file a restart would read. Kafka stops a broker whose last log directory
        failed; so does this one, with one line and a non-zero exit."""
        log.error("data directory %s was removed or replaced while the broker ran: stopping "
                  "(records acknowledged from now on would not survive a restart)",
                  self.config.data_dir)
        self.exit_code = 1
        asyncio.ensure_future(self.stop())

    async def stop(self):
        if self.stopping:
            return
        self.stopping = True
        for p in self.partitions.values():
            p.notify()
        if self.lifecycle:
            await self.lifecycle.stop()
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self.replicas is not None:
            try:
                await self.replicas.stop()
            except OSError as e:  # e.g. the data directory is gone: no checkpoint to write
                log.error("stopping the replicas: %s", e)
                self.exit_code = 1
        if self.controller is not None:
            await self.controller.stop()
        await self.quorum.raft.stop()
        if self.txn:
            await self.txn.stop()
        if self.groups:
            await self.groups.stop()
        if self.cleaner:
            await self.cleaner.stop()
        for server in self.servers:
            await server.close()
        if self.metrics_server is not None:
            await self.metrics_server.close()
        try:
            self.logs.close()
        except OSError as e:  # e.g. the data directory is gone: its checkpoints cannot be written
            log.error("closing the logs: %s", e)
            self.exit_code = 1
        try:
            self.quorum.close()
        except OSError as e:
            log.error("closing the metadata log: %s", e)
            self.exit_code = 1
        self.peers.close()
        log.info("minilog %s %d stopped%s", self.role_name, self.config.node_id,
                 " after the error above" if self.exit_code else " cleanly")
        self._locks.release()
        self._stopped.set()

    async def run_until_signalled(self, early=()):
        """Serve until SIGTERM or SIGINT, then stop cleanly. `early`: signals that arrived
        before the event loop ran (the port already answered): the broker stops once started,
        as it would for a signal during start()."""
        loop = asyncio.get_running_loop()
        signalled = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, signalled.set)
        if early:
            signalled.set()
        await self.start()
        waits = [asyncio.ensure_future(e.wait()) for e in (signalled, self._stopped)]
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        for w in waits:
            w.cancel()
        await self.stop()


def _identity(path):
    """(device, inode) of a directory, None once it is gone."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino
