"""The Raft RPCs as the pure core (`raft_client.py`) takes and returns them: small immutable
events with Kafka's field names (KIP-595's Vote, BeginQuorumEpoch, EndQuorumEpoch and Fetch).

They are what travels between two nodes, stripped of the wire's framing: the asyncio driver
(`raft_node.py`) turns a request into the Kafka message and the Kafka answer back into a
response; tests hand them from one core to another. Every response names the request it
answers (`request`), so a core recognises answers to what it no longer asks (a ballot it gave
up, a fetch from a leader it left) by identity and drops them, as KafkaRaftClient drops
responses whose epoch is stale. `RequestFailed` stands for an answer that never came.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Union


@dataclass(frozen=True, eq=False)
class VoteRequest:
    source: int
    destination: int
    candidate_epoch: int
    candidate_id: int
    last_offset_epoch: int
    last_offset: int
    pre_vote: bool


@dataclass(frozen=True, eq=False)
class VoteResponse:
    request: VoteRequest
    error_code: int
    leader_id: int  # -1: none known
    leader_epoch: int
    vote_granted: bool

    @property
    def source(self) -> int:
        return self.request.destination


@dataclass(frozen=True, eq=False)
class BeginQuorumEpochRequest:
    source: int
    destination: int
    leader_id: int
    leader_epoch: int


@dataclass(frozen=True, eq=False)
class BeginQuorumEpochResponse:
    request: BeginQuorumEpochRequest
    error_code: int
    leader_id: int
    leader_epoch: int

    @property
    def source(self) -> int:
        return self.request.destination


@dataclass(frozen=True, eq=False)
class EndQuorumEpochRequest:
    source: int
    destination: int
    leader_id: int
    leader_epoch: int


@dataclass(frozen=True, eq=False)
class EndQuorumEpochResponse:
    request: EndQuorumEpochRequest
    error_code: int

    @property
    def source(self) -> int:
        return self.request.destination


@dataclass(frozen=True, eq=False)
class FetchRequest:
    source: int  # the replica id
    destination: int
    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int


@dataclass(frozen=True)
class LeaderIdAndEpoch:
    leader_id: int
    leader_epoch: int


@dataclass(frozen=True)
class DivergingEpoch:
    epoch: int
    end_offset: int


@dataclass(frozen=True, eq=False)
class FetchResponse:
    request: FetchRequest
    error_code: int
    high_watermark: int
    log_start_offset: int
    current_leader: Optional[LeaderIdAndEpoch] = None
    diverging_epoch: Optional[DivergingEpoch] = None
    records: bytes = b""

    @property
    def source(self) -> int:
        return self.request.destination


Request = Union[VoteRequest, BeginQuorumEpochRequest, EndQuorumEpochRequest, FetchRequest]
Response = Union[VoteResponse, BeginQuorumEpochResponse, EndQuorumEpochResponse, FetchResponse]


@dataclass(frozen=True, eq=False)
class RequestFailed:
    """No answer to `request`: the connection failed (`refused`: nothing listens at the
    destination's address, its process is gone) or timed out."""
    request: Request
    refused: bool = False

    @property
    def source(self) -> int:
        return self.request.destination


Message = Union[Request, Response, RequestFailed]
