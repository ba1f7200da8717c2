"""FileStreamSource's reading side as a Spark streaming data source: a file's complete lines,
read as it grows, with the byte position of the next line as the offset.

The offset is Connect's (`{"position": N}` under the source partition `{"filename": path}`),
and each completed micro-batch's end is written to the offset.storage.topic, so the worker's
`GET .../offsets` shows it, and a query started without a checkpoint (a new worker machine)
resumes from it. Registered by the worker as `minilog-connect-file`; a batch reads at most
`MAX_BATCH_BYTES` (whole lines), one Spark partition, values as one Arrow column.
"""
from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.types import StringType, StructField, StructType

# A micro-batch's lines. A batch that ends early waits for the query's next trigger
# (queries.FILE_SOURCE_TRIGGER), and Spark's per-batch cost (its checkpoint, the transaction, the
# tasks) is paid once a batch: 32 MiB (335,544 lines of 100 B) is about half a second's work on
# a quiet machine, and a batch's reader and writer each hold it once or twice in memory.
MAX_BATCH_BYTES = 32 << 20
_CHUNK = 1 << 20


class FileRange(InputPartition):
    def __init__(self, path: str, start: int, end: int) -> None:
        self.path, self.start, self.end = path, start, end


def last_line_end(path: str, start: int, limit: int) -> int:
    """The position just after the last newline in [start, start + limit) of the file (start
    itself when there is none): the end of its complete lines, never a half-written one."""
    try:
        size = os.path.getsize(path)
    except FileNotFoundError:
        return start
    if size <= start:  # nothing new: an idle source asks this several times a second
        return start
    end, pos = start, start
    stop = min(size, start + limit)
    with open(path, "rb") as f:
        f.seek(start)
        while pos < stop:
            chunk = f.read(min(_CHUNK, stop - pos))
            if not chunk:
                break
            nl = chunk.rfind(b"\n")
            if nl >= 0:
                end = pos + nl + 1
            pos += len(chunk)
    return end


class FileLinesStreamReader(DataSourceStreamReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.path = options["file"]
        self.connector = options["connector"]
        self.offset_topic = options["offset.storage.topic"]
        self.client = json.loads(options["client"])
        self._written: int | None = None
        self._producer: Any = None

    @property
    def source_partition(self) -> dict[str, str]:
        return {"filename": self.path}

    def initialOffset(self) -> dict[str, int]:
        from .offsets import read_offset
        stored = read_offset(self.client, self.offset_topic, self.connector,
                             self.source_partition)
        position = int(stored.get("position", 0)) if stored else 0
        self._written = position
        return {"position": position}

    def latestOffset(self, start: dict, limit: Any) -> dict[str, int]:
        """`start` is the end of the last completed batch: it is committed to the offset topic
        here (Spark calls `commit` for a batch only when planning the next)."""
        self._store(int(start["position"]))
        return {"position": last_line_end(self.path, int(start["position"]), MAX_BATCH_BYTES)}

    def commit(self, end: dict) -> None:
        self._store(int(end["position"]))

    def _store(self, position: int) -> None:
        if position == self._written:
            return
        from minilog.connector.client import Producer

        from .offsets import offset_key
        if self._producer is None:
            self._producer = Producer({**self.client, "acks": "all", "linger.ms": 0})
        self._producer.send(self.offset_topic, key=offset_key(self.connector,
                                                              self.source_partition),
                            value=json.dumps({"position": position}).encode()).result(60)
        self._written = position

    def partitions(self, start: dict, end: dict) -> list[FileRange]:
        s, e = int(start["position"]), int(end["position"])
        return [FileRange(self.path, s, e)] if e > s else []

    def read(self, partition: FileRange) -> Iterator[pa.RecordBatch]:
        with open(partition.path, "rb") as f:
            f.seek(partition.start)
            data = f.read(partition.end - partition.start)
        if b"\r" in data:  # Connect ends a line at \n, \r\n or \r
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        # cut in Arrow (a fifth of the time of a Python string per line); the range ends with a
        # newline, after which the cut leaves an empty piece
        parts = pc.split_pattern(pa.array([data], pa.binary()), b"\n").values
        try:
            lines = parts.slice(0, len(parts) - 1).cast(pa.string())  # checks the UTF-8
        except pa.ArrowInvalid:  # not UTF-8 throughout: Connect's reader replaces what is not
            lines = pa.array(data.decode("utf-8", errors="replace").split("\n")[:-1],
                             pa.string())
        yield pa.RecordBatch.from_arrays([lines], names=["value"])

    def stop(self) -> None:
        if self._producer is not None:
            self._producer.close(5)


class FileLinesDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "minilog-connect-file"

    def schema(self) -> StructType:
        return StructType([StructField("value", StringType(), True)])

    def streamReader(self, schema: StructType) -> FileLinesStreamReader:
        return FileLinesStreamReader(self.options)
