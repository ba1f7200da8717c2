"""What a partition leader knows of its followers: how far each has fetched, and since when it
has been caught up. From this the high watermark advances and the ISR shrinks and expands.

Kafka's rule (Replica.updateFetchState): a follower is caught up at the time of a fetch that
reached the leader's log end, or at the time of its previous fetch if this one reached the log
end the leader had then. A follower not caught up for `replica.lag.time.max.ms` leaves the ISR;
one whose log reaches the high watermark (and the leader's epoch start) rejoins it, provided
the fetch that got it there came from the replica's current incarnation (KIP-903): each fetch
carries the broker epoch of the process that sent it (Fetch v15's ReplicaState), and a fetch
from before a restart (the broker epoch the controller has since replaced) proves nothing about
what the restarted broker holds.
"""
import time
from collections.abc import Collection, Iterable, Mapping


def now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class FollowerTracker:
    def __init__(self, followers: Iterable[int], leader_end_offset: int) -> None:
        t = now_ms()
        # replica id -> [log end offset, last caught up ms, leader log end at last fetch, last fetch ms]
        # A new leader does not know where its followers are: -1 until they fetch. They count
        # as caught up now, so the ISR is not shrunk before they had a chance to fetch.
        self.state: dict[int, list[int]] = {r: [-1, t, leader_end_offset, t] for r in followers}
        # replica id -> broker epoch its last fetch carried (-1: none)
        self.broker_epochs: dict[int, int] = {}

    def fetched(self, replica_id: int, fetch_offset: int, leader_end_offset: int,
                at_ms: int | None = None, broker_epoch: int = -1) -> None:
        t = now_ms() if at_ms is None else at_ms
        self.broker_epochs[replica_id] = broker_epoch
        s = self.state.setdefault(replica_id, [-1, 0, 0, 0])
        if fetch_offset >= leader_end_offset:
            s[1] = max(s[1], t)
        elif fetch_offset >= s[2]:
            s[1] = max(s[1], s[3])
        s[0], s[2], s[3] = fetch_offset, leader_end_offset, t

    def end_offset(self, replica_id: int) -> int:
        s = self.state.get(replica_id)
        return -1 if s is None else s[0]

    def out_of_sync(self, isr: Iterable[int], leader_id: int | None, leader_end_offset: int,
                    max_lag_ms: int, at_ms: int | None = None) -> list[int]:
        """ISR members that should leave it now."""
        t = now_ms() if at_ms is None else at_ms
        out = []
        for r in isr:
            if r == leader_id:
                continue
            s = self.state.get(r)
            if s is None or (s[0] != leader_end_offset and t - s[1] > max_lag_ms):
                out.append(r)
        return out

    def ready_to_join(self, isr: Collection[int], replicas: Iterable[int], high_watermark: int,
                      epoch_start_offset: int,
                      registered: Mapping[int, int] | None = None) -> list[int]:
        """Replicas outside the ISR whose log has caught up with the committed data, by a fetch
        of their current registration (`registered`: node id -> broker epoch; Kafka's rule: a
        fetch that carried no epoch, from an older version, is taken at its word)."""
        return [r for r in replicas if r not in isr and r in self.state
                and self.state[r][0] >= max(high_watermark, epoch_start_offset)
                and self.epoch_eligible(r, registered)]

    def epoch_eligible(self, replica_id: int, registered: Mapping[int, int] | None) -> bool:

        epoch = self.broker_epochs.get(replica_id, -1)
        return registered is None or epoch == -1 or registered.get(replica_id) == epoch
