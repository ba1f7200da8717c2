"""`replication-offset-checkpoint`: each replica's high watermark, kept across restarts.

A replica that restarts must not take its log end for committed: records above the cluster's
high watermark may be cut when it follows the leader again, and served before that they would be
reads that do not last. Kafka writes every replica's high watermark to this file every
`replica.high.watermark.checkpoint.interval.ms` and on a clean stop, and a replica opened again
starts from it (or from 0 when it is missing), clamped to its log. A checkpoint a few seconds old
is safe: a high watermark that is too low only delays what consumers see.

The format is Kafka's: a version line (0), a count line, then `topic partition offset` lines;
the file is replaced atomically.
"""
import os
from pathlib import Path

FILE = "replication-offset-checkpoint"


def read(data_dir: Path) -> dict:
    """{(topic, partition): high watermark}; empty when the file is missing or unreadable."""
    path = Path(data_dir) / FILE
    try:
        lines = path.read_text().split("\n")
    except OSError:
        return {}
    marks = {}
    for line in lines[2:]:
        parts = line.split()
        if len(parts) == 3 and parts[1].isdigit() and parts[2].lstrip("-").isdigit():
            marks[(parts[0], int(parts[1]))] = int(parts[2])
    return marks


def write(data_dir: Path, marks: dict) -> None:
    """Replace the file with `marks` ({(topic, partition): high watermark})."""
    path = Path(data_dir) / FILE
    text = f"0\n{len(marks)}\n" + "".join(f"{t} {p} {hw}\n" for (t, p), hw in sorted(marks.items()))
    tmp = path.with_name(FILE + ".tmp")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
