"""The Raft election state a voter must not forget across restarts: epoch, vote, known leader.

Kept as `quorum-state` (JSON, as Kafka's KRaft names it) in the metadata log directory and
replaced atomically before any vote is granted or any epoch is entered, so a restarted voter
never votes twice in one epoch.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Union

Directory = Union[str, "os.PathLike[str]"]

FILE = "quorum-state"


@dataclass
class QuorumState:
    epoch: int = 0
    voted_for: Optional[int] = None
    leader_id: Optional[int] = None

    @classmethod
    def load(cls, directory: Directory) -> QuorumState:
        path = Path(directory) / FILE
        if not path.exists():
            return cls()
        d = json.loads(path.read_text())
        return cls(int(d["leaderEpoch"]), _node(d.get("votedId")), _node(d.get("leaderId")))

    def save(self, directory: Directory) -> None:
        path = Path(directory) / FILE
        tmp = path.with_name(FILE + ".tmp")
        with open(tmp, "w") as f:
            json.dump({"leaderEpoch": self.epoch,
                       "votedId": -1 if self.voted_for is None else self.voted_for,
                       "leaderId": -1 if self.leader_id is None else self.leader_id,
                       "data_version": 0}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)


def _node(value: Any) -> Optional[int]:
    """A node id as `quorum-state` keeps it: -1 (or absent) for none."""
    return None if value is None or value < 0 else int(value)
