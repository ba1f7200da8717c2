"""What the coordinators need of the broker they run in, as Protocols.

The broker (broker/server) constructs the coordinators and hands itself in; the coordinators sit
below it and must not import it (tests/test_import_graph.py), so they name here the parts they
use: its config, the metadata image, its partitions, the replica manager's acknowledgements and
the channel to its peers. Requests and answers that travel to peers are the codec's message
objects, whose classes are built from the schema definitions at import time: they are `Any` to
the type checker, as are config values (their type depends on the key).
"""
from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..metadata.image import MetadataImage
    from ..metadata.topic_manager import TopicManager
    from ..replication.partition import Partition
    from .coordinator_topic import CoordinatorTopic


class Listener(Protocol):
    @property
    def name(self) -> str: ...


class BrokerConfig(Protocol):
    """The broker's config: Kafka's keys by item, and a few derived attributes."""

    @property
    def node_id(self) -> int: ...

    @property
    def inter_broker_listener(self) -> Listener: ...

    def __getitem__(self, key: str) -> Any: ...


class Peers(Protocol):
    """The broker's connections to the other brokers (server's PeerChannel)."""

    async def send(self, address: tuple[str, int], api_key: int, body: Any,
                   version: int | None = None, timeout: float = 5.0,
                   purpose: str = "") -> Any: ...


class AckWaiter(Protocol):
    """The replica manager, waiting for the in-sync replicas to have an append."""

    async def wait_for_acks(self, p: Partition, last_offset: int, timeout_ms: int) -> int: ...


class MarkerListener(Protocol):
    """The group coordinator, told of transaction markers written to `__consumer_offsets`."""

    def txn_marker_written(self, index: int, producer_id: int, commit: bool) -> None: ...


class PartitionHost(Protocol):
    """A broker as the coordinators see it: its config, metadata, partitions and peers."""

    @property
    def config(self) -> BrokerConfig: ...

    @property
    def metadata(self) -> MetadataImage: ...

    @property
    def stopping(self) -> bool: ...

    @property
    def peers(self) -> Peers: ...

    def partition(self, topic: str, index: int) -> Partition | None: ...


class MarkerBroker(PartitionHost, Protocol):
    """What writing transaction markers needs beyond a PartitionHost: the replica manager
    (None on a controller-only node) and the group coordinator (None until it started)."""

    @property
    def replicas(self) -> AckWaiter | None: ...

    @property
    def groups(self) -> MarkerListener | None: ...


class MetricsRegistry(Protocol):
    """The broker's metrics: a coordinator registers its collector (a prometheus_client one,
    untyped there)."""

    def register(self, collector: Any) -> None: ...


class GroupBroker(PartitionHost, Protocol):
    """What the group coordinator needs beyond a PartitionHost: where its metrics go, and
    whether ACLs are on (a reloaded member's regex resolves to nothing until it heartbeats)."""

    @property
    def metrics(self) -> MetricsRegistry: ...

    @property
    def authorizer(self) -> object | None: ...


class ProducerIds(Protocol):
    async def next_id(self) -> int: ...


class Voters(Protocol):
    @property
    def voters(self) -> Collection[int]: ...


class QuorumView(Protocol):
    """This broker's place in the metadata quorum."""

    @property
    def is_controller(self) -> bool: ...

    @property
    def raft(self) -> Voters: ...


class TopicRouter(Protocol):
    """Asks the active controller to create a topic (set before requests are served)."""

    def auto_create(self, name: str) -> object: ...


class OffsetsGroups(MarkerListener, Protocol):
    """The group coordinator, as the transaction coordinator sees it: AddOffsetsToTxn adds
    the `__consumer_offsets` partition of the group."""

    @property
    def store(self) -> CoordinatorTopic: ...


class TxnBroker(MarkerBroker, Protocol):
    """What the transaction coordinator needs beyond writing markers: producer ids, and
    creating `__transaction_state` (itself as the controller, or through the controller)."""

    @property
    def groups(self) -> OffsetsGroups | None: ...

    @property
    def producer_ids(self) -> ProducerIds: ...

    @property
    def quorum(self) -> QuorumView: ...

    @property
    def is_broker(self) -> bool: ...

    @property
    def router(self) -> TopicRouter: ...

    @property
    def topics(self) -> TopicManager: ...
