"""What the pure Raft core needs from the world, as interfaces it is given (Kafka's `ReplicatedLog`,
`QuorumStateStore` and `RaftClient.Listener`): the log, the persisted election state, and who
hears of leadership changes and truncations.

The broker passes its `__cluster_metadata` partition (`partition_log.py`) and the
`quorum-state` file; the in-process tests pass an in-memory log and store. The core never
reads a clock, a socket or a file itself.
"""
from __future__ import annotations

from typing import Any, Protocol, Sequence

from .quorum_state import Directory, QuorumState


class RaftLog(Protocol):
    """The replicated log: offsets, the leader epoch each batch was written in, appends and
    truncation. Records are opaque to the core except the leader-change record it appends."""

    @property
    def start_offset(self) -> int: ...

    @property
    def end_offset(self) -> int: ...

    @property
    def latest_epoch(self) -> int:
        """The epoch of the last batch (-1 for an empty log): a Vote's and a Fetch's
        `last_offset_epoch`/`last_fetched_epoch`."""
        ...

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(the largest epoch <= `epoch`, the offset where it ended), Kafka's
        `LeaderEpochFileCache.endOffsetFor`; (-1, -1) if none is known."""
        ...

    def append_as_leader(self, records: Sequence[object], epoch: int) -> int:
        """Append one batch in `epoch`; the last offset."""
        ...

    def append_leader_change(self, leader_id: int, epoch: int) -> int:
        """Append the record a new leader starts its epoch with; its offset."""
        ...

    def append_as_follower(self, data: bytes) -> None: ...

    def read(self, offset: int, max_bytes: int) -> bytes:
        """Batches from `offset` up to the log end (a follower reads what is not committed)."""
        ...

    def truncate_to(self, offset: int) -> None: ...

    def truncate_fully_and_start_at(self, offset: int) -> None: ...


class RecordSerde(Protocol):
    """How the log's records are written (Kafka's `RecordSerde`): the metadata records' JSON
    for the broker (`metadata/records.py`)."""

    def encode(self, record: Any) -> bytes: ...

    def decode(self, value: bytes) -> Any: ...

    def leader_change_record(self, leader: int, epoch: int) -> Any: ...


class QuorumStateStore(Protocol):
    """Where the election state lives across restarts (`quorum-state`)."""

    def load(self) -> QuorumState: ...

    def save(self, state: QuorumState) -> None: ...


class RaftListener(Protocol):
    """Told, synchronously, what the core did to the log and to this node's leadership."""

    def on_leadership(self, leading: bool) -> None:
        """This node became the leader (after appending its leader-change record) or stopped
        being it."""
        ...

    def on_truncated(self) -> None:
        """A divergent tail was cut from the log."""
        ...

    def on_start_over(self, offset: int) -> None:
        """The log was emptied to start again at the leader's log start (a snapshot first)."""
        ...


class FileQuorumStateStore:
    """`quorum-state` in the metadata log directory (see `quorum_state.py`)."""

    def __init__(self, directory: Directory) -> None:
        self.directory = directory

    def load(self) -> QuorumState:
        return QuorumState.load(self.directory)

    def save(self, state: QuorumState) -> None:
        state.save(self.directory)
