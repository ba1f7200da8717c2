"""The current Raft role and the only ways to change it (Kafka's `QuorumState`).

Each `transition_to_*` checks that the move is one Raft allows from the current role, persists
the election state it implies before entering it (so a restarted voter never votes twice in
one epoch nor forgets an epoch it entered), and raises `IllegalTransition` otherwise: a second
leader in one epoch, an epoch going backwards, an observer campaigning, a candidate elected
without a majority. Which transition to make is decided elsewhere (`raft_client.py`).
"""
from __future__ import annotations

import logging
from typing import Callable, Collection, Optional

from .epoch_state import (Ballot, CandidateState, EpochState, FollowerState, LeaderState,
                          ProspectiveState, ResignedState, UnattachedState)
from .raft_log import QuorumStateStore

log = logging.getLogger("minilog.broker.raft")


class IllegalTransition(Exception):
    """A role change Raft does not allow from the current state (a bug, never an input)."""


class Quorum:
    def __init__(self, node_id: int, voters: Collection[int], store: QuorumStateStore,
                 now: float, left_leadership: Callable[[], None] = lambda: None) -> None:
        """`left_leadership()`: called after a transition out of leading (not by resigning)."""
        self.node_id, self.voters, self.store = node_id, set(voters), store
        self._left_leadership = left_leadership
        saved = store.load()
        # A leader that restarted must be elected again: it knows of no leader.
        leader = None if saved.leader_id == node_id else saved.leader_id
        self.state: EpochState = (
            FollowerState(saved.epoch, leader, saved.voted_for, now) if leader is not None
            else UnattachedState(saved.epoch, saved.voted_for, now))

    @property
    def epoch(self) -> int:
        return self.state.epoch

    @property
    def leader_id(self) -> Optional[int]:
        return self.state.leader_id

    @property
    def is_voter(self) -> bool:
        return self.node_id in self.voters

    def _illegal(self, what: str) -> IllegalTransition:
        return IllegalTransition(f"node {self.node_id}: cannot become {what} from {self.state}")

    def _enter(self, new: EpochState) -> None:
        old = self.state
        if new.election() != old.election():
            self.store.save(new.election())
        self.state = new
        if type(old) is not type(new):
            log.info("raft node %d: %s in epoch %d (leader %s)", self.node_id, new.name,
                     new.epoch, new.leader_id)
        if isinstance(old, LeaderState) and not isinstance(new, (LeaderState, ResignedState)):
            self._left_leadership()

    def transition_to_unattached(self, epoch: int, now: float, voted_for: Optional[int] = None,
                                 last_contact: Optional[float] = None) -> None:
        """A newer epoch with no leader known; in the same epoch only to vote for a candidate
        (`voted_for`), for a leader that lost its majority, or for an observer that gave up
        on its leader."""
        s = self.state
        if epoch < s.epoch:
            raise self._illegal(f"unattached in older epoch {epoch}")
        if epoch == s.epoch:
            voting = voted_for is not None and isinstance(s, (UnattachedState, ProspectiveState)) \
                and s.voted_for in (None, voted_for) and s.leader_id is None
            resigning = isinstance(s, LeaderState) and voted_for == self.node_id
            abandoning = isinstance(s, FollowerState) and not self.is_voter
            if not (voting or resigning or abandoning):
                raise self._illegal(f"unattached in epoch {epoch}, voted for {voted_for}")
            if abandoning:
                voted_for = s.voted_for
        elif voted_for is not None:
            raise self._illegal(f"unattached in new epoch {epoch} with a vote")
        self._enter(UnattachedState(epoch, voted_for, now if last_contact is None
                                    else last_contact))

    def transition_to_follower(self, epoch: int, leader: int, now: float) -> None:
        s = self.state
        if leader == self.node_id or leader not in self.voters:
            raise self._illegal(f"follower of {leader}")
        if epoch < s.epoch:
            raise self._illegal(f"follower in older epoch {epoch}")
        if epoch == s.epoch:
            if isinstance(s, (LeaderState, ResignedState)) or (
                    s.leader_id is not None and s.leader_id != leader):
                raise self._illegal(f"follower of {leader} in epoch {epoch}")
        voted = s.voted_for if epoch == s.epoch else None
        self._enter(FollowerState(epoch, leader, voted, now))

    def transition_to_prospective(self, ballot: Ballot) -> None:
        """A pre-vote in the current epoch (KIP-996): nothing persisted changes."""
        s = self.state
        if not self.is_voter or not isinstance(s, (UnattachedState, FollowerState,
                                                   ProspectiveState, CandidateState)):
            raise self._illegal("prospective")
        leader = s.leader_id if isinstance(s, (FollowerState, ProspectiveState)) else None
        self._enter(ProspectiveState(s.epoch, s.voted_for, leader, ballot))

    def transition_to_candidate(self, ballot: Ballot) -> None:
        """The next epoch, voted for ourselves (persisted before any Vote goes out)."""
        if not self.is_voter or not isinstance(self.state, ProspectiveState):
            raise self._illegal("candidate")
        self._enter(CandidateState(self.epoch + 1, self.node_id, ballot))

    def transition_to_leader(self, epoch_start_offset: int, now: float) -> LeaderState:
        s = self.state
        if not isinstance(s, CandidateState) or not s.ballot.majority(len(self.voters)):
            raise self._illegal("leader")
        leader = LeaderState(s.epoch, self.node_id, sorted(self.voters - {self.node_id}),
                             epoch_start_offset, now)
        self._enter(leader)
        return leader

    def transition_to_resigned(self) -> None:
        if not isinstance(self.state, LeaderState):
            raise self._illegal("resigned")
        self._enter(ResignedState(self.epoch, self.node_id))
