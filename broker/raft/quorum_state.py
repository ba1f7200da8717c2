"""The Raft election state a voter must not forget across restarts: epoch, vote, known leader.

Kept as `quorum-state` (JSON, as Kafka's KRaft names it) in the metadata log directory and
replaced atomically before any vote is granted or any epoch is entered, so a restarted voter
never votes twice in one epoch.
"""
import json
import os
from dataclasses import dataclass
from pathlib import Path

FILE = "quorum-state"


@dataclass
class QuorumState:
    epoch: int = 0
    voted_for: int = None
    leader_id: int = None

    @classmethod
    def load(cls, directory):
        path = Path(directory) / FILE
        if not path.exists():
            return cls()
        d = json.loads(path.read_text())
        nullable = (lambda v: None if v is None or v < 0 else v)
        return cls(d["leaderEpoch"], nullable(d.get("votedId")), nullable(d.get("leaderId")))

    def save(self, directory):
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
