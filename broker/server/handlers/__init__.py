"""Request handlers, one function per Kafka API, registered with the versions they implement.

ApiVersions advertises exactly this table, so a version is announced only once it is handled.
"""
from collections.abc import Awaitable, Callable
from typing import NamedTuple

NO_RESPONSE = object()  # returned for acks=0 produce requests


class CloseConnection(Exception):
    """Raised by a handler whose client must see its request fail by the connection closing
    (a failed acks=0 produce, which gets no response), as Kafka does."""


class Pending(NamedTuple):
    """A handler's answer that waits for something other than this connection (acks=all waits
    for the ISR): `rest` is an awaitable giving the response. The request's work is done, so
    the connection goes on to the next request; responses still leave in request order."""
    rest: Awaitable


class Entry(NamedTuple):
    handler: Callable[..., Awaitable]
    versions: tuple


HANDLERS = {}


def controller_apis():
    """What a controller-only node answers (KRaft's controller listener): the quorum, broker
    lifecycle, AlterPartition, the admin requests brokers forward to the controller, and the
    SASL login of a secured controller listener."""
    from minilog.connector.protocol import ApiKey
    return frozenset({
        ApiKey.API_VERSIONS, ApiKey.FETCH, ApiKey.VOTE, ApiKey.BEGIN_QUORUM_EPOCH,
        ApiKey.END_QUORUM_EPOCH, ApiKey.BROKER_REGISTRATION, ApiKey.BROKER_HEARTBEAT,
        ApiKey.ALTER_PARTITION, ApiKey.CREATE_TOPICS, ApiKey.DELETE_TOPICS,
        ApiKey.CREATE_PARTITIONS, ApiKey.ALTER_CONFIGS, ApiKey.INCREMENTAL_ALTER_CONFIGS,
        ApiKey.INIT_PRODUCER_ID, ApiKey.ALLOCATE_PRODUCER_IDS, ApiKey.DESCRIBE_CLUSTER,
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS, ApiKey.CREATE_ACLS, ApiKey.DELETE_ACLS,
        ApiKey.DESCRIBE_ACLS, ApiKey.ELECT_LEADERS, ApiKey.ALTER_PARTITION_REASSIGNMENTS,
        ApiKey.LIST_PARTITION_REASSIGNMENTS, ApiKey.SASL_HANDSHAKE,
        ApiKey.SASL_AUTHENTICATE, ApiKey.ENVELOPE})


def served(broker):
    """{api key: Entry} this node answers; KIP-848's APIs only while
    `group.coordinator.rebalance.protocols` includes "consumer", as Kafka advertises them."""
    if broker.is_broker:
        from minilog.connector.protocol import ApiKey
        protocols = {p.strip() for p in broker.config["group.coordinator.rebalance.protocols"]
                     .split(",")}
        if "consumer" in protocols:
            return HANDLERS
        return {k: e for k, e in HANDLERS.items()
                if k not in (ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.CONSUMER_GROUP_DESCRIBE)}
    wanted = controller_apis()
    return {k: e for k, e in HANDLERS.items() if k in wanted}


def controller_listener_only():
    """The APIs Kafka enables on controller listeners alone (their message definitions'
    `listeners` name no "broker"): the quorum's, the broker lifecycle, AlterPartition,
    producer id blocks and Envelope. Nodes send them to a controller's listener, the one
    `controller.quorum.voters` names; a client listener neither lists nor answers them."""
    from minilog.connector.protocol import ApiKey
    return frozenset({
        ApiKey.VOTE, ApiKey.BEGIN_QUORUM_EPOCH, ApiKey.END_QUORUM_EPOCH, ApiKey.ALTER_PARTITION,
        ApiKey.ENVELOPE, ApiKey.BROKER_REGISTRATION, ApiKey.BROKER_HEARTBEAT,
        ApiKey.ALLOCATE_PRODUCER_IDS})


def listener_apis(broker, listener_name: str) -> dict:
    """{api key: Entry} one listener of this node answers, and advertises in ApiVersions:
    `served(broker)`, less the controller's own APIs unless it is the controller's listener.
    Kafka enables an API per listener type (the `listeners` of its message definitions): a
    request for one its listener does not enable closes the connection."""
    apis = served(broker)
    if listener_name != broker.config.controller_listener.name:
        hidden = controller_listener_only()
        apis = {k: e for k, e in apis.items() if k not in hidden}
    return apis


def leader_partition(broker, topic, index, followers_too=False):
    """(partition, 0) for a partition this broker leads (or holds, with `followers_too`), else
    (None, UNKNOWN_TOPIC_OR_PARTITION or NOT_LEADER_OR_FOLLOWER): what produce, ListOffsets and
    DeleteRecords answer before they touch a log."""
    from minilog.connector.protocol import ErrorCode
    partition = broker.partition(topic, index)
    if partition is None:
        return None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if not (partition.is_leader or followers_too):
        return None, ErrorCode.NOT_LEADER_OR_FOLLOWER
    return partition, 0


def on_listener(broker, header, endpoint):
    """`endpoint` (a BrokerEndpoint) as the client should reach it: with the address of the
    listener the request came through (a client on the SASL_SSL port must not be sent to the
    PLAINTEXT one), as each broker registered it; the primary address when a broker has no
    listener of that name."""
    session = header.session
    if session is None or endpoint is None:
        return endpoint
    import dataclasses
    listener = session.listener
    if endpoint.node_id == broker.config.node_id and listener.advertised_port:
        address = (listener.advertised_host, listener.advertised_port)
    else:
        address = endpoint.listeners.get(listener.name)
    if address is None:
        return endpoint
    return dataclasses.replace(endpoint, host=address[0], port=address[1])


def handles(api_key, lo, hi):
    def register(fn):
        HANDLERS[api_key] = Entry(fn, (lo, hi))
        return fn
    return register


from . import (  # noqa: F401
    acls,
    api_versions,
    configs,
    consumer_groups,
    elections,
    envelope,
    fetch,
    groups,
    leader_epochs,
    list_offsets,
    log_dirs,
    metadata,
    produce,
    producer_ids,
    quorum,
    reassignments,
    security,
    topics,
    transactions,
    txn_describe,
)
