"""What handlers ask before they act: may this request's principal do this? (`allowed`), and,
for the admin requests forwarded to the controller, the entries refused before forwarding.

With no `authorizer.class.name` the broker has no authorizer and every answer is yes at the
cost of one attribute test. The principal is the connection's (`secure_connection.Session`):
a PLAINTEXT connection is `User:ANONYMOUS`, as in Kafka.

Forwarded requests (CreateTopics, DeleteTopics, CreatePartitions, AlterConfigs,
IncrementalAlterConfigs, AlterUserScramCredentials, CreateAcls, DeleteAcls) are authorized where
they are answered (the active controller, a single broker's included), with the client's principal,
which a forwarding broker sends along in an Envelope (KIP-590): refused entries are taken out of
the request and answered, the rest is handled. The forwarding broker itself needs only
CLUSTER_ACTION on the cluster for the Envelope, as for every inter-broker request.
"""
from collections.abc import Callable

from minilog.connector.protocol import ApiKey, ErrorCode

from .acls import CLUSTER_NAME, AclOperation, ResourceType

ANONYMOUS = "User:ANONYMOUS"

TOPIC, GROUP, CLUSTER, TXN = (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER,
                              ResourceType.TRANSACTIONAL_ID)
READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = (
    AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DELETE,
    AclOperation.ALTER, AclOperation.DESCRIBE)
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = (
    AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS,
    AclOperation.IDEMPOTENT_WRITE)

_CONFIG_TOPIC, _CONFIG_BROKER = 2, 4  # DescribeConfigs / AlterConfigs resource types


def request_principal(header) -> str:
    session = getattr(header, "session", None)
    return ANONYMOUS if session is None else session.principal


def allowed(broker, header, operation: AclOperation, resource_type: ResourceType,
            name: str = CLUSTER_NAME) -> bool:
    authorizer = broker.authorizer
    if authorizer is None:
        return True
    return authorizer.authorize(request_principal(header), getattr(header, "client_host", None),
                                operation, resource_type, name)


def topic_describer(broker, header) -> Callable[[str], bool]:
    """Whether this request's principal, from its host, may DESCRIBE a topic, asked later
    (a KIP-848 regex subscription is resolved again as topics come and go): the principal and
    host are kept, not the request."""
    principal, host = request_principal(header), getattr(header, "client_host", None)

    def describes(topic: str) -> bool:
        authorizer = broker.authorizer
        return authorizer is None or authorizer.authorize(principal, host, DESCRIBE, TOPIC,
                                                          topic)
    return describes


def allowed_on_any(broker, header, operation: AclOperation,
                   resource_type: ResourceType) -> bool:
    authorizer = broker.authorizer
    if authorizer is None:
        return True
    return authorizer.authorize_any(request_principal(header), getattr(header, "client_host", None),
                                    operation, resource_type)


def config_resource_refusal(broker, header, operation: AclOperation, resource_type: int,
                            name: str) -> int:
    """The error code refusing DESCRIBE_CONFIGS/ALTER_CONFIGS on a config resource, or 0."""
    if resource_type == _CONFIG_TOPIC:
        return 0 if allowed(broker, header, operation, TOPIC, name) else \
            ErrorCode.TOPIC_AUTHORIZATION_FAILED
    return 0 if allowed(broker, header, operation, CLUSTER) else \
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED


# Requests Kafka authorizes as a whole on the cluster: between brokers (CLUSTER_ACTION) and
# reads of cluster-wide state.
_ON_CLUSTER = {
    **dict.fromkeys((ApiKey.VOTE, ApiKey.BEGIN_QUORUM_EPOCH, ApiKey.END_QUORUM_EPOCH,
                     ApiKey.BROKER_REGISTRATION, ApiKey.BROKER_HEARTBEAT, ApiKey.ALTER_PARTITION,
                     ApiKey.ALLOCATE_PRODUCER_IDS, ApiKey.WRITE_TXN_MARKERS, ApiKey.ENVELOPE),
                    CLUSTER_ACTION),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: DESCRIBE,
}


def cluster_refusal(broker, header, key) -> int:
    """CLUSTER_AUTHORIZATION_FAILED for a request its principal may not make at all, else 0."""
    operation = _ON_CLUSTER.get(key)
    if operation is None or allowed(broker, header, operation, CLUSTER):
        return 0
    return ErrorCode.CLUSTER_AUTHORIZATION_FAILED


# --- forwarded admin requests ----------------------------------------------------------------

# key -> (request list attribute, response list attribute)
_PER_ENTRY = {
    ApiKey.CREATE_TOPICS: ("topics", "topics"),
    ApiKey.DELETE_TOPICS: ("topics", "responses"),
    ApiKey.CREATE_PARTITIONS: ("topics", "results"),
    ApiKey.ALTER_CONFIGS: ("resources", "responses"),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: ("resources", "responses"),
}
# key -> the CLUSTER operation the whole request needs
_WHOLE = {ApiKey.ALTER_USER_SCRAM_CREDENTIALS: ALTER, ApiKey.CREATE_ACLS: ALTER,
          ApiKey.DELETE_ACLS: ALTER, ApiKey.ELECT_LEADERS: ALTER,
          ApiKey.ALTER_PARTITION_REASSIGNMENTS: ALTER,
          ApiKey.LIST_PARTITION_REASSIGNMENTS: DESCRIBE}


# The internal topics a broker asks the controller for (`__transaction_state` on a first
# transactional FindCoordinator): a cluster member (CLUSTER_ACTION) may create them.
_INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


def _entry_refusal(broker, header, key, entry, create_on_cluster: bool) -> int:
    if key == ApiKey.CREATE_TOPICS:
        ok = create_on_cluster or allowed(broker, header, CREATE, TOPIC, entry.name) or \
            (entry.name in _INTERNAL_TOPICS and allowed(broker, header, CLUSTER_ACTION, CLUSTER))
    elif key == ApiKey.DELETE_TOPICS:
        name = entry if isinstance(entry, str) else entry.name
        if name is None:  # by topic id
            ts = broker.metadata.by_id.get(entry.topic_id)
            if ts is None:
                return 0  # the handler answers UNKNOWN_TOPIC_ID
            name = ts.name
        ok = allowed(broker, header, DELETE, TOPIC, name)
    elif key == ApiKey.CREATE_PARTITIONS:
        ok = allowed(broker, header, ALTER, TOPIC, entry.name)
    else:
        return config_resource_refusal(broker, header, ALTER_CONFIGS, entry.resource_type,
                                       entry.resource_name)
    return 0 if ok else ErrorCode.TOPIC_AUTHORIZATION_FAILED


def refuse_forwarded(broker, header, key, req, answer_all):
    """(the request with only its authorized entries or None when nothing is left to do,
    the refusals: a response with the refused entries or None). `answer_all(key, req, code)`
    builds a response answering every entry of `req` with `code`."""
    if broker.authorizer is None:
        return req, None
    if key in _WHOLE:
        if allowed(broker, header, _WHOLE[key], CLUSTER):
            return req, None
        return None, answer_all(key, req, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    if key not in _PER_ENTRY:
        return req, None
    attr, _ = _PER_ENTRY[key]
    if key == ApiKey.DELETE_TOPICS and header.api_version < 6:
        attr = "topic_names"
    entries = getattr(req, attr)
    on_cluster = key == ApiKey.CREATE_TOPICS and allowed(broker, header, CREATE, CLUSTER)
    by_code: dict = {}
    kept = []
    for entry in entries:
        code = _entry_refusal(broker, header, key, entry, on_cluster)
        if code:
            by_code.setdefault(code, []).append(entry)
        else:
            kept.append(entry)
    if not by_code:
        return req, None
    refused = None
    for code, group in by_code.items():
        setattr(req, attr, group)
        part = answer_all(key, req, code)
        refused = part if refused is None else merge(key, refused, part)
    setattr(req, attr, kept)
    return (req if kept else None), refused


def merge(key, response, refused):
    """`response` with the refused entries added to its list."""
    if refused is None:
        return response
    attr = _PER_ENTRY[key][1]
    setattr(response, attr, [*getattr(response, attr), *getattr(refused, attr)])
    return response


# The operations Kafka reports in an authorized-operations field, per resource type
# (`AclEntry.supportedOperations`), and the field's value when the client did not ask.
SUPPORTED_OPERATIONS = {
    TOPIC: (READ, WRITE, CREATE, DESCRIBE, DELETE, ALTER, DESCRIBE_CONFIGS, ALTER_CONFIGS),
    GROUP: (READ, DESCRIBE, DELETE),
    CLUSTER: (CREATE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE, ALTER,
              DESCRIBE),
    TXN: (DESCRIBE, WRITE),
}
NOT_REQUESTED = -2147483648


def authorized_operations(broker, header, resource_type: ResourceType,
                          name: str = CLUSTER_NAME) -> int:
    """Kafka's bit field of what the principal may do to the resource: bit `1 << code` for
    each supported operation its ACLs allow (all of them without an authorizer)."""
    bits = 0
    for operation in SUPPORTED_OPERATIONS[resource_type]:
        if allowed(broker, header, operation, resource_type, name):
            bits |= 1 << operation
    return bits


def group_refusal(broker, header, operation: AclOperation, group_id: str) -> int:
    """GROUP_AUTHORIZATION_FAILED unless the principal may do `operation` on the group."""
    return 0 if allowed(broker, header, operation, GROUP, group_id) else \
        ErrorCode.GROUP_AUTHORIZATION_FAILED


def topic_refusal(broker, header, operation: AclOperation, topic: str) -> int:
    """TOPIC_AUTHORIZATION_FAILED unless the principal may do `operation` on the topic."""
    return 0 if allowed(broker, header, operation, TOPIC, topic) else \
        ErrorCode.TOPIC_AUTHORIZATION_FAILED


def txn_refusal(broker, header, operation: AclOperation, transactional_id: str) -> int:
    """TRANSACTIONAL_ID_AUTHORIZATION_FAILED unless the principal may do `operation` on it."""
    return 0 if allowed(broker, header, operation, TXN, transactional_id) else \
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
