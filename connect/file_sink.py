"""FileStreamSink's writing side: each micro-batch's lines appended to the file, exactly once.

Spark replays a micro-batch after a crash between writing it and recording it in its commit
log. The writer keeps, beside the query's checkpoint, the last batch it wrote and the file's
length after it (replaced atomically, after the lines are fsynced). A batch it already wrote is
skipped; any other starts by truncating the file to the recorded length, which removes what a
crash left of a half-written batch. So the file holds each record once, whenever the worker is
killed.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from pyspark.sql import DataFrame


class FileSinkWriter:
    """The `foreachBatch` function of one FileStreamSink connector."""

    def __init__(self, path: str, state_path: str) -> None:
        self.path = path
        self.state_path = Path(state_path)

    def prepare(self) -> None:
        """Before the query starts: the first time, remember the file's current length (lines
        already in it are the user's, and a crash in the first batch must not be kept)."""
        if not self.state_path.exists():
            size = os.path.getsize(self.path) if os.path.exists(self.path) else 0
            self._save(-1, size)

    def _load(self) -> tuple[int, int]:
        state = json.loads(self.state_path.read_text())
        return int(state["batch"]), int(state["length"])

    def _save(self, batch: int, length: int) -> None:
        self.state_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"batch": batch, "length": length}))
        os.replace(tmp, self.state_path)

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        done, length = self._load()
        if batch_id <= done:
            return
        values = df.toArrow().column("value").to_pylist()
        text = "".join(f"{'null' if v is None else v}\n" for v in values).encode()
        with open(self.path, "ab") as f:
            f.truncate(length)
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        self._save(batch_id, length + len(text))
