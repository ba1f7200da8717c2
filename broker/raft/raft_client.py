"""Raft over one log as a pure state machine (Kafka's `KafkaRaftClient`, KIP-595 with KIP-996's
pre-vote): no clock, no socket, no asyncio.

Two entry points, both given the time: `poll(now)` returns the requests the timers call for
(a fetch to the leader, a ballot when the leader went silent, BeginQuorumEpoch to voters that
have not heard of us), and `handle(message, now)` takes a request (answered in the returned
list) or a response to something `poll` sent. The role lives in `quorum.py`, one class per
role in `epoch_state.py`; the log, the election state's store and whoever hears of leadership
changes are passed in (`raft_log.py`). The asyncio driver (`raft_node.py`) sends what comes
out; the tests hand messages from one core to another through a simulated network.

The rules, as the broker has them:
- A voter that hears nothing from its leader for the fetch timeout (or, knowing none, for the
  election timeout) waits a random part of half an election timeout and then asks a pre-vote,
  without entering a new epoch. The others refuse while they lead or heard from their leader
  within the fetch timeout, and name that leader, which the asker then follows: a voter that
  was paused or cut off does not depose a working leader. The only voter of a one-voter
  quorum (a single broker) needs no one's vote and campaigns at once, as Kafka's does.
- The stranded-voter rule: a pre-vote also counts as won when a voter answered from an older
  epoch than ours. A voter that entered a newer epoch (then lost touch) can never follow that
  epoch's leader again, so the others grant its pre-vote, and only its election moves the
  quorum past it; otherwise it would stay a candidate for good and the quorum a voter short.
- Votes: one per epoch, persisted before it is granted, only to a log at least as up to date
  (last epoch, then end offset). A ballot lost waits out its randomized deadline, so that
  split votes do not repeat in lockstep.
- The leader appends a leader-change record; its high watermark is the offset a majority of
  voters has, once that passes the start of its epoch. A leader no majority fetched from
  within the fetch timeout resigns (and campaigns at once).
- Followers fetch with their last fetched epoch; a divergent one is told `diverging_epoch`
  and truncates to where both logs last agree; one behind the leader's log start gets
  OFFSET_OUT_OF_RANGE and starts over there, snapshot first.
- An observer (not a voter) never votes; without a leader it fetches from a random voter,
  which answers with records (it leads) or with the leader it knows.
"""
from __future__ import annotations

import logging
import random
from typing import Collection, Optional, Sequence

from minilog.connector.protocol import ErrorCode

from .epoch_state import (NEVER, Ballot, CandidateState, EpochState, FollowerState, LeaderState,
                          ProspectiveState, UnattachedState, WaitingState)
from .messages import (BeginQuorumEpochRequest, BeginQuorumEpochResponse, DivergingEpoch,
                       EndQuorumEpochRequest, EndQuorumEpochResponse, FetchRequest,
                       FetchResponse, LeaderIdAndEpoch, Message, Request, RequestFailed,
                       VoteRequest, VoteResponse)
from .quorum import Quorum
from .raft_log import QuorumStateStore, RaftListener, RaftLog

log = logging.getLogger("minilog.broker.raft")

MAX_FETCH_BYTES = 1 << 20
BEGIN_RETRY_S = 0.2     # BeginQuorumEpoch again to a voter that neither answered nor fetched
RETRY_BACKOFF_S = 0.1   # a fetch again after a failure or a leader change
ERROR_BACKOFF_S = 0.2   # a fetch again after any other error


class NotLeader(Exception):
    """Only the quorum leader (the active controller) can append to the metadata log."""


class RaftClient:
    def __init__(self, node_id: int, voters: Collection[int], log: RaftLog,
                 store: QuorumStateStore, listener: RaftListener, *, now: float,
                 election_timeout: float = 1.0, fetch_timeout: float = 2.0,
                 rng: Optional[random.Random] = None) -> None:
        """Timeouts in seconds, on the clock of `now`."""
        self.node_id, self.log, self.listener = node_id, log, listener
        self.election_timeout, self.fetch_timeout = election_timeout, fetch_timeout
        self.rng = rng or random.Random()
        self.quorum = Quorum(node_id, voters, store, now,
                             left_leadership=lambda: listener.on_leadership(False))
        self.high_watermark = log.start_offset  # learnt from the leader
        self.leader_high_watermark = -1         # as the leader's last fetch response had it
        self._abandoned: Optional[tuple[int, Optional[int]]] = None  # an observer's lost leader

    # -- what the node is ------------------------------------------------------------------
    @property
    def state(self) -> EpochState:
        return self.quorum.state

    @property
    def epoch(self) -> int:
        return self.quorum.epoch

    @property
    def leader_id(self) -> Optional[int]:
        return self.quorum.leader_id

    @property
    def voters(self) -> set[int]:
        return self.quorum.voters

    @property
    def is_leader(self) -> bool:
        return isinstance(self.state, LeaderState)

    def majority_heard(self, now: float) -> bool:
        """Leading, and a majority of voters fetched lately: a leader that was paused or cut off
        must not act on its old view (it resigns at its next poll)."""
        s = self.state
        return isinstance(s, LeaderState) and s.majority_heard(now, self.fetch_timeout)

    def _lost(self, s: WaitingState, now: float) -> bool:
        timeout = self.fetch_timeout if s.leader_id is not None else self.election_timeout
        return now - s.last_contact > timeout

    def _waiting(self) -> WaitingState:
        s = self.state
        assert isinstance(s, WaitingState), s
        return s

    # -- timers ---------------------------------------------------------------------------------
    def poll(self, now: float) -> list[Request]:
        """The requests due at `now` (and the role changes their timers call for)."""
        s = self.state
        if isinstance(s, LeaderState):
            return self._poll_leader(s, now)
        if isinstance(s, (ProspectiveState, CandidateState)):
            return self._poll_ballot(s, now)
        if isinstance(s, WaitingState):
            return self._poll_waiting(s, now)
        return []

    def _poll_leader(self, s: LeaderState, now: float) -> list[Request]:
        if not s.majority_heard(now, self.fetch_timeout):
            log.warning("raft node %d: no majority fetched in epoch %d; resigning",
                        self.node_id, s.epoch)
            self.quorum.transition_to_unattached(s.epoch, now, voted_for=self.node_id,
                                                 last_contact=NEVER)
            return []
        out: list[Request] = []
        for v, progress in s.voters.items():
            if v not in s.began and progress.end_offset < 0 and \
                    now - s.begin_sent_at.get(v, NEVER) >= BEGIN_RETRY_S:
                s.begin_sent_at[v] = now
                out.append(BeginQuorumEpochRequest(self.node_id, v, self.node_id, s.epoch))
        return out

    def _poll_waiting(self, s: WaitingState, now: float) -> list[Request]:
        if s.fetch_in_flight is not None and now - s.fetch_sent_at > self.fetch_timeout:
            s.fetch_in_flight, s.next_fetch_at = None, now + RETRY_BACKOFF_S  # no answer came
        # The only voter needs nobody's vote: it campaigns at once (Kafka's `isOnlyVoter`), so
        # a single broker leads its one-voter quorum as soon as it starts.
        lost = self._lost(s, now) or self.voters == {self.node_id}
        if self.quorum.is_voter:
            if lost:  # a voter does not fetch from a leader it lost: it campaigns
                if s.campaign_at is None:
                    s.campaign_at = now if len(self.voters) == 1 else \
                        now + self.rng.uniform(0, self.election_timeout / 2)
                return self._start_ballot(now) if now >= s.campaign_at else []
            s.campaign_at = None
            if s.leader_id is None:
                return []
        elif lost and s.leader_id is not None:
            # An observer not hearing from its leader forgets it and asks around.
            self._abandoned = (s.epoch, s.leader_id)
            self.quorum.transition_to_unattached(s.epoch, now)
            s = self._waiting()
        if s.fetch_in_flight is not None or now < s.next_fetch_at:
            return []
        target = s.leader_id if s.leader_id is not None else \
            self.rng.choice(sorted(self.voters))
        request = FetchRequest(self.node_id, target, s.epoch, self.log.end_offset,
                               self.log.latest_epoch)
        s.fetch_in_flight, s.fetch_sent_at = request, now
        return [request]

    # -- elections ---------------------------------------------------------------------------
    def _start_ballot(self, now: float) -> list[Request]:
        """A pre-vote: whether the others would elect us in the next epoch."""
        self.quorum.transition_to_prospective(self._ballot(now))
        return self._votes(pre_vote=True) + self._count(now)

    def _ballot(self, now: float) -> Ballot:
        return Ballot(self.node_id, now + self.election_timeout * self.rng.uniform(1, 2))

    def _votes(self, pre_vote: bool) -> list[Request]:
        s = self.state
        assert isinstance(s, (ProspectiveState, CandidateState))
        out: list[Request] = []
        for v in sorted(self.voters - {self.node_id}):
            request = VoteRequest(self.node_id, v, s.epoch, self.node_id, self.log.latest_epoch,
                                  self.log.end_offset, pre_vote)
            s.ballot.sent[v] = request
            out.append(request)
        return out

    def _poll_ballot(self, s: ProspectiveState | CandidateState, now: float) -> list[Request]:
        b = s.ballot
        if b.retry_at is not None:
            return self._start_ballot(now) if now >= b.retry_at else []
        if now >= b.deadline:
            if isinstance(s, ProspectiveState) and b.behind:
                return self._start_candidate(now)
            b.retry_at = now + self.rng.uniform(0, self.election_timeout / 2)
        return []

    def _count(self, now: float) -> list[Request]:
        """Act on a ballot's answers so far: elected, on to the real vote, or waiting."""
        s = self.state
        if not isinstance(s, (ProspectiveState, CandidateState)) or s.ballot.retry_at is not None:
            return []
        b = s.ballot
        everyone = len(b.answered) == len(self.voters) - 1
        if isinstance(s, ProspectiveState) and (b.majority(len(self.voters)) or
                                                (everyone and b.behind)):
            return self._start_candidate(now)
        if isinstance(s, CandidateState) and b.majority(len(self.voters)):
            self._become_leader(now)
        return []

    def _start_candidate(self, now: float) -> list[Request]:
        self.quorum.transition_to_candidate(self._ballot(now))
        return self._votes(pre_vote=False) + self._count(now)

    def _become_leader(self, now: float) -> None:
        leader = self.quorum.transition_to_leader(self.log.end_offset, now)
        # Our whole log commits with the first record of our epoch; until then it is ours only.
        self.log.append_leader_change(self.node_id, leader.epoch)
        self._advance_high_watermark(leader)
        self.listener.on_leadership(True)

    def _follow(self, epoch: int, leader: Optional[int], now: float) -> None:
        """Enter `epoch` (a newer one, or the current one with its leader now known)."""
        s = self.state
        if leader is None:
            self.quorum.transition_to_unattached(epoch, now)
        elif isinstance(s, FollowerState) and (s.epoch, s.leader_id) == (epoch, leader):
            s.heard_from_leader(now)
        else:
            self.quorum.transition_to_follower(epoch, leader, now)

    def _on_vote_response(self, msg: VoteResponse | RequestFailed, now: float) -> list[Message]:
        s = self.state
        if not isinstance(s, (ProspectiveState, CandidateState)) or \
                s.ballot.sent.get(msg.source) is not msg.request:
            return []  # an answer to a ballot given up
        b = s.ballot
        b.answered.add(msg.source)
        if isinstance(msg, VoteResponse) and not msg.error_code:
            request = msg.request
            if request.pre_vote and msg.vote_granted:
                b.granted.add(msg.source)
            elif msg.leader_epoch > s.epoch or (msg.leader_epoch == s.epoch and
                                                msg.leader_id not in (-1, self.node_id)):
                # A newer epoch, or ours already has a leader (a node back from a restart
                # campaigns without knowing it): follow it rather than depose it.
                self._follow(msg.leader_epoch, msg.leader_id if msg.leader_id >= 0 else None,
                             now)
                return []
            elif msg.vote_granted:
                b.granted.add(msg.source)
            b.behind |= 0 <= msg.leader_epoch < s.epoch
        return list(self._count(now))

    def _on_vote_request(self, req: VoteRequest, now: float) -> list[Message]:
        granted = self._grant(req, now)
        return [VoteResponse(req, 0, self._leader_or_none(), self.epoch, granted)]

    def _grant(self, req: VoteRequest, now: float) -> bool:
        """A pre-vote changes nothing here: it is granted to a log at least as up to date as
        ours unless, in the same epoch, we lead or follow a leader we heard from within the
        fetch timeout. A candidate already in a newer epoch gets it (the stranded-voter rule)."""
        if req.candidate_id not in self.voters or req.candidate_epoch < self.epoch:
            return False
        up_to_date = (req.last_offset_epoch, req.last_offset) >= \
            (self.log.latest_epoch, self.log.end_offset)
        s = self.state
        if req.pre_vote:
            if req.candidate_epoch == s.epoch and (isinstance(s, LeaderState) or (
                    isinstance(s, FollowerState) and not self._lost(s, now))):
                return False
            return up_to_date
        if req.candidate_epoch > s.epoch:
            self.quorum.transition_to_unattached(req.candidate_epoch, now)
            s = self.state
        if not isinstance(s, (UnattachedState, ProspectiveState)) or s.leader_id is not None \
                or s.voted_for not in (None, req.candidate_id) or not up_to_date:
            return False
        self.quorum.transition_to_unattached(s.epoch, now, voted_for=req.candidate_id)
        return True

    # -- BeginQuorumEpoch / EndQuorumEpoch ---------------------------------------------------------
    def _on_begin_request(self, req: BeginQuorumEpochRequest, now: float) -> list[Message]:
        code = 0
        if req.leader_epoch < self.epoch:
            code = ErrorCode.FENCED_LEADER_EPOCH
        elif req.leader_id != self.node_id:
            s = self.state
            if req.leader_epoch > s.epoch or s.leader_id != req.leader_id or \
                    not isinstance(s, FollowerState):
                self._follow(req.leader_epoch, req.leader_id, now)
        return [BeginQuorumEpochResponse(req, code, self._leader_or_none(), self.epoch)]

    def _on_end_request(self, req: EndQuorumEpochRequest, now: float) -> list[Message]:
        """The leader of the epoch resigned: elect a successor now instead of timing out."""
        s = self.state
        if req.leader_epoch == s.epoch and s.leader_id == req.leader_id != self.node_id and \
                isinstance(s, WaitingState):
            s.last_contact = NEVER
        return [EndQuorumEpochResponse(req, 0)]

    def resign(self) -> list[Request]:
        """A leader stopping tells the other voters (EndQuorumEpoch) so they elect at once."""
        s = self.state
        if not isinstance(s, LeaderState) or len(self.voters) == 1:
            return []
        self.quorum.transition_to_resigned()
        return [EndQuorumEpochRequest(self.node_id, v, self.node_id, s.epoch)
                for v in sorted(self.voters - {self.node_id})]

    def _leader_or_none(self) -> int:
        return -1 if self.leader_id is None else self.leader_id

    # -- dispatch ------------------------------------------------------------------------------
    def handle(self, message: Message, now: float) -> list[Message]:
        """A request (the answer is in the list) or the response to one this node sent."""
        if isinstance(message, RequestFailed):
            request = message.request
            if isinstance(request, VoteRequest):
                return self._on_vote_response(message, now)
            if isinstance(request, FetchRequest):
                return self._on_fetch_response(message, now)
            return []
        if isinstance(message, VoteRequest):
            return self._on_vote_request(message, now)
        if isinstance(message, VoteResponse):
            return self._on_vote_response(message, now)
        if isinstance(message, BeginQuorumEpochRequest):
            return self._on_begin_request(message, now)
        if isinstance(message, BeginQuorumEpochResponse):
            s = self.state
            if isinstance(s, LeaderState) and message.request.leader_epoch == s.epoch and \
                    not message.error_code:
                s.began.add(message.source)
            return []
        if isinstance(message, EndQuorumEpochRequest):
            return self._on_end_request(message, now)
        if isinstance(message, FetchRequest):
            return [self._on_fetch_request(message, now)]
        if isinstance(message, FetchResponse):
            return self._on_fetch_response(message, now)
        return []

    # -- leading -------------------------------------------------------------------------------
    def append(self, records: Sequence[object]) -> int:
        """Append records as one batch of our epoch; the last offset."""
        s = self.state
        if not isinstance(s, LeaderState):
            raise NotLeader(f"node {self.node_id} is not the metadata quorum leader")
        last = self.log.append_as_leader(records, s.epoch)
        self._advance_high_watermark(s)
        return last

    def _advance_high_watermark(self, s: LeaderState) -> None:
        candidate = s.majority_offset(self.log.end_offset)
        if candidate > s.epoch_start_offset:
            self.high_watermark = max(self.high_watermark, min(candidate, self.log.end_offset))

    def leader_fetched(self, replica_id: int, fetch_offset: int, last_fetched_epoch: int,
                       now: float) -> Optional[DivergingEpoch]:
        """A follower's fetch reached the leader: where its log diverges from ours, or None
        (and then how far it got counts toward the high watermark).

        A follower whose last fetched epoch ended earlier here has a tail we do not: it is told
        where to truncate instead of getting records. An epoch newer than any here is answered
        with our latest epoch and log end, so it cuts at most down to our end."""
        s = self.state
        if not isinstance(s, LeaderState):
            return None
        if last_fetched_epoch >= 0:
            epoch, end = self.log.end_offset_for_epoch(last_fetched_epoch)
            if end < 0:
                epoch, end = self.log.latest_epoch, self.log.end_offset
            if epoch < last_fetched_epoch or end < fetch_offset:
                return DivergingEpoch(epoch, end)
        if fetch_offset > self.log.end_offset:
            return DivergingEpoch(self.log.latest_epoch, self.log.end_offset)
        s.fetched(replica_id, fetch_offset, now)
        self._advance_high_watermark(s)
        return None

    def _on_fetch_request(self, req: FetchRequest, now: float) -> FetchResponse:
        """What the broker's Fetch handler answers a voter or observer (`handlers/fetch.py`)."""
        s = self.state
        code = 0
        if req.current_leader_epoch >= 0 and req.current_leader_epoch != s.epoch:
            code = ErrorCode.FENCED_LEADER_EPOCH if req.current_leader_epoch < s.epoch \
                else ErrorCode.UNKNOWN_LEADER_EPOCH
        elif not isinstance(s, LeaderState):
            code = ErrorCode.NOT_LEADER_OR_FOLLOWER
        if not code:
            diverging = self.leader_fetched(req.source, req.fetch_offset,
                                            req.last_fetched_epoch, now)
            if diverging is not None:
                return self._fetch_answer(req, 0, diverging=diverging)
            if not self.log.start_offset <= req.fetch_offset <= self.log.end_offset:
                code = ErrorCode.OFFSET_OUT_OF_RANGE
        if code:
            return self._fetch_answer(req, code, current=None if s.leader_id is None
                                      else LeaderIdAndEpoch(s.leader_id, s.epoch))
        return self._fetch_answer(req, 0, records=self.log.read(req.fetch_offset,
                                                                MAX_FETCH_BYTES))

    def _fetch_answer(self, req: FetchRequest, code: int,
                      current: Optional[LeaderIdAndEpoch] = None,
                      diverging: Optional[DivergingEpoch] = None,
                      records: bytes = b"") -> FetchResponse:
        return FetchResponse(req, code, self.high_watermark, self.log.start_offset, current,
                             diverging, records)

    # -- following -------------------------------------------------------------------------------
    def _on_fetch_response(self, msg: FetchResponse | RequestFailed,
                           now: float) -> list[Message]:
        s = self.state
        if not isinstance(s, WaitingState) or s.fetch_in_flight is not msg.request:
            return []  # answers a fetch from before a change of leader
        s.fetch_in_flight = None
        asked = msg.source if s.leader_id is None else None  # an observer looking for a leader
        if isinstance(msg, RequestFailed):
            if msg.refused and asked is None and self.quorum.is_voter:
                # Nothing listens where the leader was: its process is gone, and waiting out
                # the fetch timeout would only delay the election (Raft's safety does not
                # rest on timing; a needless election costs one epoch).
                s.last_contact = min(s.last_contact, now - self.fetch_timeout - 1e-6)
            s.next_fetch_at = now + RETRY_BACKOFF_S
            return []
        current = msg.current_leader
        if current is not None and (current.leader_epoch > s.epoch or (
                asked is not None and current.leader_epoch == s.epoch and current.leader_id >= 0
                and (current.leader_epoch, current.leader_id) != self._abandoned)):
            self._follow(current.leader_epoch,
                         current.leader_id if current.leader_id >= 0 else None, now)
            return []
        if asked is not None and not msg.error_code:
            self._follow(s.epoch, asked, now)  # the voter asked leads this epoch
            s = self._waiting()
        if msg.error_code == ErrorCode.OFFSET_OUT_OF_RANGE and \
                self.log.end_offset < msg.log_start_offset:
            self._start_over_at(msg.log_start_offset)
            return []
        if msg.error_code:
            s.next_fetch_at = now + (RETRY_BACKOFF_S if msg.error_code in (
                ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH)
                else ERROR_BACKOFF_S)
            return []
        s.heard_from_leader(now)
        if msg.diverging_epoch is not None:
            self._truncate_for_divergence(msg.diverging_epoch)
            return []
        if msg.records:
            self.log.append_as_follower(msg.records)
        self.leader_high_watermark = msg.high_watermark
        self.high_watermark = max(self.high_watermark,
                                  min(msg.high_watermark, self.log.end_offset))
        return []

    def _truncate_for_divergence(self, diverging: DivergingEpoch) -> None:
        """The leader says our last epoch ended at `end_offset` there: cut our tail where both
        logs last agree (the next fetch checks again, so a deeper divergence converges)."""
        target = min(diverging.end_offset, self.log.end_offset)
        if diverging.epoch >= 0:
            _, end = self.log.end_offset_for_epoch(diverging.epoch)
            if end >= 0:
                target = min(target, end)
        self.log.truncate_to(target)
        self.high_watermark = min(self.high_watermark, self.log.end_offset)
        self.listener.on_truncated()

    def _start_over_at(self, offset: int) -> None:
        """Our log ends before the leader's starts: take the leader's, snapshot first."""
        log.info("raft node %d: restarting the metadata log at %d", self.node_id, offset)
        self.log.truncate_fully_and_start_at(offset)
        self.high_watermark = offset
        self.listener.on_start_over(offset)
