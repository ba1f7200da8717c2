"""One class per Raft role, as Kafka's `EpochState` implementations: what a node knows and
waits for while in that role, and nothing about how it got there (`quorum.py` checks that).

- `UnattachedState`: an epoch without a known leader (maybe with a vote cast in it).
- `FollowerState`: a known leader, fetched from; its silence past the fetch timeout starts an
  election (a voter) or a search for the leader (an observer).
- `ProspectiveState`: a pre-vote (KIP-996) in the current epoch, nothing persisted: would the
  others elect us? It keeps the leader it last knew, as Kafka's does.
- `CandidateState`: a new epoch, voted for itself, asking for votes.
- `LeaderState`: elected; tracks each voter's fetched offset and time for the high watermark
  and for noticing it lost the majority.
- `ResignedState`: a leader stopping, that told the others to elect a successor.

Every state records the election state it stands for (`election()`), the one persisted in
`quorum-state`. Times are seconds on whatever clock the caller passes as `now`.
"""
from __future__ import annotations

from typing import Optional

from .messages import FetchRequest, VoteRequest
from .quorum_state import QuorumState

NEVER = float("-inf")


class EpochState:
    name = "?"

    def __init__(self, epoch: int, leader_id: Optional[int] = None,
                 voted_for: Optional[int] = None) -> None:
        self.epoch, self.leader_id, self.voted_for = epoch, leader_id, voted_for

    def election(self) -> QuorumState:
        return QuorumState(self.epoch, self.voted_for, self.leader_id)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(epoch={self.epoch}, leader={self.leader_id}, " \
               f"voted_for={self.voted_for})"


class WaitingState(EpochState):
    """Unattached and follower: a node that is not running an election, on a timer."""

    def __init__(self, epoch: int, voted_for: Optional[int], last_contact: float,
                 leader: Optional[int] = None) -> None:
        super().__init__(epoch, leader, voted_for)
        self.last_contact = last_contact  # when we last heard from a leader (or entered)
        self.campaign_at: Optional[float] = None  # a lost leader's randomized election start
        self.fetch_in_flight: Optional[FetchRequest] = None
        self.fetch_sent_at = NEVER
        self.next_fetch_at = NEVER

    def heard_from_leader(self, now: float) -> None:
        self.last_contact = now
        self.campaign_at = None


class UnattachedState(WaitingState):
    name = "unattached"


class FollowerState(WaitingState):
    name = "follower"

    def __init__(self, epoch: int, leader: int, voted_for: Optional[int],
                 last_contact: float) -> None:
        super().__init__(epoch, voted_for, last_contact, leader)


class Ballot:
    """The answers to one round of Vote requests."""

    def __init__(self, node_id: int, deadline: float) -> None:
        self.granted = {node_id}
        self.answered: set[int] = set()
        self.sent: dict[int, VoteRequest] = {}
        self.deadline = deadline
        self.behind = False  # a voter answered from an older epoch than ours
        self.retry_at: Optional[float] = None  # lost: when to try again

    def majority(self, voters: int) -> bool:
        return len(self.granted) * 2 > voters


class ProspectiveState(EpochState):
    name = "prospective"

    def __init__(self, epoch: int, voted_for: Optional[int], leader: Optional[int],
                 ballot: Ballot) -> None:
        super().__init__(epoch, leader, voted_for)
        self.ballot = ballot


class CandidateState(EpochState):
    name = "candidate"

    def __init__(self, epoch: int, node_id: int, ballot: Ballot) -> None:
        super().__init__(epoch, None, node_id)
        self.ballot = ballot


class VoterProgress:
    """A voter as its leader sees it: how far it fetched (-1: not yet), and when."""

    def __init__(self, last_fetch: float) -> None:
        self.end_offset = -1
        self.last_fetch = last_fetch


class LeaderState(EpochState):
    name = "leader"

    def __init__(self, epoch: int, node_id: int, others: list[int], epoch_start_offset: int,
                 now: float) -> None:
        super().__init__(epoch, node_id, node_id)
        self.epoch_start_offset = epoch_start_offset
        # A new leader does not know where the others are, and counts them as heard from
        # now, so it does not resign before they had a chance to fetch.
        self.voters = {v: VoterProgress(now) for v in others}
        self.began = {node_id}  # voters that acknowledged our BeginQuorumEpoch
        self.begin_sent_at: dict[int, float] = {}

    def fetched(self, replica_id: int, fetch_offset: int, now: float) -> None:
        progress = self.voters.get(replica_id)
        if progress is not None:
            progress.end_offset, progress.last_fetch = fetch_offset, now

    def majority_heard(self, now: float, timeout: float) -> bool:
        heard = 1 + sum(1 for p in self.voters.values() if now - p.last_fetch < timeout)
        return heard * 2 > len(self.voters) + 1

    def majority_offset(self, log_end_offset: int) -> int:
        """The offset a majority of voters has (Raft's commit rule, before the epoch check)."""
        offsets = sorted([log_end_offset] + [p.end_offset for p in self.voters.values()],
                         reverse=True)
        return offsets[len(offsets) // 2]


class ResignedState(EpochState):
    name = "resigned"

    def __init__(self, epoch: int, node_id: int) -> None:
        super().__init__(epoch, node_id, node_id)
