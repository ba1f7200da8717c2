"""Admin requests in a replicated cluster go to the active controller, wherever they arrive.

Clients send CreateTopics, DeleteTopics, CreatePartitions, AlterConfigs and
IncrementalAlterConfigs, AlterUserScramCredentials, CreateAcls, DeleteAcls, ElectLeaders and the partition reassignment requests to any broker (Kafka's brokers forward them the same way). The active
controller runs the ordinary handler, whose metadata writes are appended through the quorum, and
answers once they are committed; any other broker forwards the request in an Envelope with the
client's principal and address (KIP-590, `envelope.py`) and relays the answer, so the ACLs are
checked once, on the controller, against the client (`authorized_here`), never against the
forwarding broker. With no controller reachable, or a controller that cannot commit, the
request is answered NOT_CONTROLLER (retriable). InitProducerId is not forwarded: every broker answers it
from the producer id blocks the controller committed for it (broker/metadata/producer_ids.py).
"""
import asyncio
import functools
import logging
import time

from minilog.connector.client.connection import wait_set
from minilog.connector.client.types import KafkaConnectionError
from minilog.connector.protocol import ApiKey, ErrorCode, KafkaError, request, response

from ..metadata.controller_result import NotController
from ..security.access import merge, refuse_forwarded, request_principal
from .envelope import unwrap_response, wrap

log = logging.getLogger("minilog.broker.router")

# Answered from the metadata image: a broker still replaying the metadata log waits for it
# rather than telling clients of an empty cluster.
NEEDS_METADATA = frozenset({ApiKey.METADATA, ApiKey.DESCRIBE_CLUSTER, ApiKey.FIND_COORDINATOR})
CATCH_UP_WAIT_S = 10.0
FORWARDED = frozenset({ApiKey.CREATE_TOPICS, ApiKey.DELETE_TOPICS, ApiKey.CREATE_PARTITIONS,
                       ApiKey.ALTER_CONFIGS, ApiKey.INCREMENTAL_ALTER_CONFIGS,
                       ApiKey.ALTER_USER_SCRAM_CREDENTIALS, ApiKey.CREATE_ACLS,
                       ApiKey.DELETE_ACLS, ApiKey.ELECT_LEADERS,
                       ApiKey.ALTER_PARTITION_REASSIGNMENTS,
                       ApiKey.LIST_PARTITION_REASSIGNMENTS})
_CREATE = request(ApiKey.CREATE_TOPICS)
FIND_CONTROLLER_S = 5.0


class ControllerRouter:
    def __init__(self, broker, store, peers):
        self.broker, self.store, self.peers = broker, store, peers
        self._creating = set()

    def auto_create(self, name, on_behalf_of=None):
        """auto.create.topics.enable: ask the controller to create `name` in the background;
        the client is told LEADER_NOT_AVAILABLE and asks again (as Kafka answers).
        `on_behalf_of`: the header of the client request that wants it, whose principal the
        controller then authorizes (Kafka's AutoTopicCreationManager); else the broker asks."""
        if self.store.is_controller:
            code = self.broker.topics.auto_create(name)
            return code or ErrorCode.LEADER_NOT_AVAILABLE
        if name not in self._creating:
            self._creating.add(name)
            body = _CREATE.cls(timeout_ms=5000, validate_only=False, topics=[_CREATE.make(
                "topics", name=name, num_partitions=-1, replication_factor=-1,
                assignments=[], configs=[])])
            from .handlers import HANDLERS
            task = asyncio.ensure_future(self.handle(
                ApiKey.CREATE_TOPICS, _Header(7, on_behalf_of), body,
                HANDLERS[ApiKey.CREATE_TOPICS].handler))
            task.add_done_callback(lambda _: self._creating.discard(name))
        return ErrorCode.LEADER_NOT_AVAILABLE

    async def handle(self, key, header, req, handler):
        if key in NEEDS_METADATA and not self.store.raft.caught_up.is_set():
            await wait_set(self.store.raft.caught_up, CATCH_UP_WAIT_S)
        if key not in FORWARDED:
            return await handler(self.broker, header, req)
        deadline = time.monotonic() + FIND_CONTROLLER_S
        while True:
            raft = self.store.raft
            if raft.is_leader and not raft.majority_heard():
                pass  # cut off from the quorum: it resigns, or hears from a majority again
            elif raft.is_leader:
                resp = await handler(self.broker, header, req)
                try:  # answered once what it appended is committed (the controller's purgatory)
                    await self.store.committed()
                except NotController:
                    log.warning("%s not committed before this node stopped leading: answered "
                                "NOT_CONTROLLER", ApiKey(key).name)
                    return not_controller(key, req)
                return resp
            elif getattr(header, "forwarded", False):
                return not_controller(key, req)  # forwarded to us, but we lead no more
            leader = raft.leader_id
            if not raft.is_leader and leader is not None and leader in raft.voters:
                try:
                    answer = await self._forward(raft.voters[leader], key, header, req)
                    if answer is not None:
                        return answer
                except (KafkaError, KafkaConnectionError, OSError) as e:
                    log.info("forwarding %s to controller %d failed: %s", ApiKey(key).name,
                             leader, e)
            if time.monotonic() > deadline:
                return not_controller(key, req)
            await asyncio.sleep(0.1)


    async def _forward(self, address, key, header, req):
        """The controller's answer to `req`, None when it is not the controller (any more).
        A client's request goes in an Envelope; the broker's own (`_Header`) as it is."""
        version = header.api_version
        if isinstance(header, _Header) and header.on_behalf_of is None:
            return await self.peers.send(address, key, req, version, timeout=30.0,
                                         purpose="forward")
        envelope = wrap(key, version, header.client_id, req, request_principal(header),
                        header.client_host)
        resp = await self.peers.send(address, ApiKey.ENVELOPE, envelope, 0, timeout=30.0,
                                     purpose="forward")
        if resp.error_code == ErrorCode.NOT_CONTROLLER:
            return None
        if resp.error_code or resp.response_data is None:
            return answer_all(key, req, resp.error_code or ErrorCode.UNKNOWN_SERVER_ERROR)
        return unwrap_response(key, version, resp)


class _Header:
    """The header of a request this broker makes itself (auto-creating a topic): forwarded
    as it is, with the broker's principal, or in an Envelope with the identity of the client
    request it is made `on_behalf_of`."""

    def __init__(self, api_version, on_behalf_of=None):
        self.api_key, self.api_version = ApiKey.CREATE_TOPICS, api_version
        self.on_behalf_of = on_behalf_of
        self.forwarded = False
        self.client_id = getattr(on_behalf_of, "client_id", None)
        self.client_host = getattr(on_behalf_of, "client_host", None)
        self.session = getattr(on_behalf_of, "session", None)


def authorized_here(handler):
    """`handler` of a forwardable request, run where it is answered (the active controller):
    the ACLs refuse entries first, with the client's principal."""
    return functools.partial(_run_authorized, handler)


async def _run_authorized(handler, broker, header, req):
    key = header.api_key
    kept, refused = refuse_forwarded(broker, header, key, req, answer_all)
    if kept is None:  # every entry refused: nothing to do
        return refused
    return merge(key, await handler(broker, header, kept), refused)


def not_controller(key, req):
    """The request's own response shape, every entry NOT_CONTROLLER."""
    return answer_all(key, req, ErrorCode.NOT_CONTROLLER)


def answer_all(key, req, code):
    """The response to a forwarded request that answers every entry with `code`."""
    schema = response(key)
    if key == ApiKey.CREATE_TOPICS:
        return schema.cls(throttle_time_ms=0, topics=[
            schema.make("topics", name=t.name, error_code=code) for t in req.topics])
    if key == ApiKey.DELETE_TOPICS:
        names = [t.name for t in req.topics] if req.topics else list(req.topic_names or [])
        return schema.cls(throttle_time_ms=0, responses=[
            schema.make("responses", name=n, error_code=code) for n in names])
    if key == ApiKey.CREATE_PARTITIONS:
        return schema.cls(throttle_time_ms=0, results=[
            schema.make("results", name=t.name, error_code=code) for t in req.topics])
    if key in (ApiKey.ALTER_CONFIGS, ApiKey.INCREMENTAL_ALTER_CONFIGS):
        return schema.cls(throttle_time_ms=0, responses=[
            schema.make("responses", error_code=code, resource_type=r.resource_type,
                        resource_name=r.resource_name) for r in req.resources])
    if key == ApiKey.ALTER_USER_SCRAM_CREDENTIALS:
        users = dict.fromkeys(c.name for c in [*req.deletions, *req.upsertions])
        return schema.cls(throttle_time_ms=0, results=[
            schema.make("results", user=u, error_code=code) for u in users])
    if key == ApiKey.CREATE_ACLS:
        return schema.cls(throttle_time_ms=0, results=[
            schema.make("results", error_code=code, error_message=None) for _ in req.creations])
    if key == ApiKey.DELETE_ACLS:
        return schema.cls(throttle_time_ms=0, filter_results=[
            schema.make("filter_results", error_code=code, error_message=None, matching_acls=[])
            for _ in req.filters])
    if key == ApiKey.ELECT_LEADERS:  # the whole request's error too (v1+)
        return election_response(code, {t.topic: [(i, code, None) for i in t.partitions]
                                        for t in req.topic_partitions or ()})
    return schema.cls(throttle_time_ms=0, error_code=code)


def election_response(code, results):
    """An ElectLeaders response: `code` for the whole request, `results` {topic: [(partition,
    error code, message)]}."""
    schema = response(ApiKey.ELECT_LEADERS)
    return schema.cls(throttle_time_ms=0, error_code=code, replica_election_results=[
        schema.make("replica_election_results", topic=topic, partition_result=[
            schema.make("replica_election_results", "partition_result", partition_id=i,
                        error_code=c, error_message=message) for i, c, message in parts])
        for topic, parts in results.items()])
