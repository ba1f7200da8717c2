"""The Raft core's requests as Kafka messages and back (KIP-595's RPCs as the broker speaks
them: Vote v2 with pre_vote, BeginQuorumEpoch and EndQuorumEpoch v0, Fetch v12 with
`last_fetched_epoch` and `diverging_epoch`), naming the one partition `__cluster_metadata-0`.

`send` performs one request over the node's peer connections and returns the core's view of
the answer: the response, or `RequestFailed` when none came."""
from __future__ import annotations

from typing import Any, Callable

from minilog.connector.client.types import KafkaConnectionError
from minilog.connector.protocol import ApiKey, ErrorCode, KafkaError, request
from minilog.connector.protocol.primitives import ZERO_UUID

from .messages import (BeginQuorumEpochRequest, BeginQuorumEpochResponse, DivergingEpoch,
                       EndQuorumEpochRequest, EndQuorumEpochResponse, FetchRequest,
                       FetchResponse, LeaderIdAndEpoch, Message, Request, RequestFailed,
                       VoteRequest, VoteResponse)

METADATA_TOPIC = "__cluster_metadata"
FETCH_VERSION = 12  # topic names, last_fetched_epoch and diverging_epoch
QUORUM_RPC_TIMEOUT_S = 1.0  # BeginQuorumEpoch, EndQuorumEpoch
_FETCH, _VOTE = request(ApiKey.FETCH), request(ApiKey.VOTE)
_BEGIN, _END = request(ApiKey.BEGIN_QUORUM_EPOCH), request(ApiKey.END_QUORUM_EPOCH)


def _vote(req: VoteRequest, cluster_id: Any) -> Any:
    return _VOTE.cls(cluster_id=cluster_id, voter_id=req.destination, topics=[_VOTE.make(
        "topics", topic_name=METADATA_TOPIC, partitions=[_VOTE.make(
            "topics", "partitions", partition_index=0, candidate_epoch=req.candidate_epoch,
            candidate_id=req.candidate_id, candidate_directory_id=ZERO_UUID,
            voter_directory_id=ZERO_UUID, last_offset_epoch=req.last_offset_epoch,
            last_offset=req.last_offset, pre_vote=req.pre_vote)])])


def _begin(req: BeginQuorumEpochRequest, cluster_id: Any) -> Any:
    return _BEGIN.cls(cluster_id=cluster_id, topics=[_BEGIN.make(
        "topics", topic_name=METADATA_TOPIC, partitions=[_BEGIN.make(
            "topics", "partitions", partition_index=0, leader_id=req.leader_id,
            leader_epoch=req.leader_epoch)])])


def _end(req: EndQuorumEpochRequest, cluster_id: Any) -> Any:
    return _END.cls(cluster_id=cluster_id, topics=[_END.make(
        "topics", topic_name=METADATA_TOPIC, partitions=[_END.make(
            "topics", "partitions", partition_index=0, leader_id=req.leader_id,
            leader_epoch=req.leader_epoch, preferred_successors=[])])])


def _fetch(req: FetchRequest) -> Any:
    return _FETCH.cls(replica_id=req.source, max_wait_ms=500, min_bytes=1,
                      max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=-1,
                      topics=[_FETCH.make("topics", topic=METADATA_TOPIC, partitions=[
                          _FETCH.make("topics", "partitions", partition=0,
                                      current_leader_epoch=req.current_leader_epoch,
                                      fetch_offset=req.fetch_offset,
                                      last_fetched_epoch=req.last_fetched_epoch,
                                      log_start_offset=-1, partition_max_bytes=1 << 20)])],
                      forgotten_topics_data=[], rack_id="")


def _vote_answer(req: VoteRequest, resp: Any) -> Message:
    if resp.error_code or not resp.topics:
        return VoteResponse(req, resp.error_code or ErrorCode.INVALID_REQUEST, -1, -1, False)
    p = resp.topics[0].partitions[0]
    return VoteResponse(req, 0, p.leader_id, p.leader_epoch, bool(p.vote_granted))


def _fetch_answer(req: FetchRequest, resp: Any) -> Message:
    if not resp.responses:
        return RequestFailed(req)
    p = resp.responses[0].partitions[0]
    current, diverging = p.current_leader, p.diverging_epoch
    return FetchResponse(
        req, p.error_code, p.high_watermark, p.log_start_offset,
        None if current is None else LeaderIdAndEpoch(current.leader_id, current.leader_epoch),
        None if diverging is None else DivergingEpoch(diverging.epoch, diverging.end_offset),
        p.records or b"")


async def send(peers: Any, address: Any, req: Request, cluster_id: Any, *,
               election_timeout: float, fetch_timeout: float,
               on_refused: Callable[[int], None]) -> Message:
    """Send `req` to `address`; the answer as the core takes it."""
    try:
        if isinstance(req, VoteRequest):
            resp = await peers.send(address, ApiKey.VOTE, _vote(req, cluster_id),
                                    timeout=election_timeout, purpose="vote")
            return _vote_answer(req, resp)
        if isinstance(req, BeginQuorumEpochRequest):
            resp = await peers.send(address, ApiKey.BEGIN_QUORUM_EPOCH, _begin(req, cluster_id),
                                    timeout=QUORUM_RPC_TIMEOUT_S, purpose="vote")
            return BeginQuorumEpochResponse(req, resp.error_code, -1, -1)
        if isinstance(req, EndQuorumEpochRequest):
            resp = await peers.send(address, ApiKey.END_QUORUM_EPOCH, _end(req, cluster_id),
                                    timeout=QUORUM_RPC_TIMEOUT_S, purpose="vote")
            return EndQuorumEpochResponse(req, resp.error_code)
        resp = await peers.send(address, ApiKey.FETCH, _fetch(req), FETCH_VERSION,
                                timeout=fetch_timeout, purpose="raft")
        return _fetch_answer(req, resp)
    except (KafkaError, KafkaConnectionError, OSError) as e:
        refused = bool(getattr(e, "refused", False))
        if refused and isinstance(req, FetchRequest):
            on_refused(req.destination)
        return RequestFailed(req, refused)
