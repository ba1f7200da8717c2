"""All partition logs of one broker under its data directory, and the clean-shutdown marker.

The marker file is written on a clean stop and removed at start: its absence at start means
the broker died, so every log is opened with recovery of its tail.
"""
import logging
import shutil
import time
import uuid
from pathlib import Path

from .log import Log, LogConfig

CLEAN_SHUTDOWN = ".kafka_cleanshutdown"
log = logging.getLogger("minilog.broker.logs")


def partition_dir_name(topic, partition):
    return f"{topic}-{partition}"


def parse_partition_dir(name):
    topic, sep, index = name.rpartition("-")
    if not sep or not index.isdigit() or not topic:
        return None
    return topic, int(index)


class LogManager:
    def __init__(self, data_dir: Path):
        self.data_dir = Path(data_dir)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        marker = self.data_dir / CLEAN_SHUTDOWN
        self.clean_start = marker.exists()
        if self.clean_start:
            marker.unlink()
        self.logs = {}  # (topic, partition) -> Log
        # what opening existing partitions after an unclean stop did: the broker logs a summary
        self.recovered = {}  # (topic, partition) -> bytes cut off a torn or corrupt tail
        self.recovery_seconds = 0.0

    def existing_partitions(self):
        """(topic, partition) pairs that have a directory on disk."""
        found = []
        for d in sorted(self.data_dir.iterdir()):
            if d.is_dir() and not d.name.endswith("-delete"):
                parsed = parse_partition_dir(d.name)
                if parsed:
                    found.append(parsed)
        return found

    def open(self, topic, partition, config: LogConfig):
        key = (topic, partition)
        if key not in self.logs:
            path = self.data_dir / partition_dir_name(topic, partition)
            existed, started = path.exists(), time.monotonic()
            self.logs[key] = Log(path, config, clean_shutdown=self.clean_start)
            if existed and not self.clean_start:  # a partition created now has nothing to recover
                took = time.monotonic() - started
                self.recovered[key] = self.logs[key].recovered_bytes
                self.recovery_seconds += took
                log.debug("recovered %s-%d in %.3fs", topic, partition, took)
        return self.logs[key]

    def delete(self, topic, partition):
        """Close the log and remove its directory (renamed first so a crash leaves no half log)."""
        lg = self.logs.pop((topic, partition), None)
        path = self.data_dir / partition_dir_name(topic, partition)
        if lg is not None:
            lg.close()
        if path.exists():
            doomed = path.with_name(f"{path.name}.{uuid.uuid4().hex}-delete")
            path.rename(doomed)
            shutil.rmtree(doomed, ignore_errors=True)

    def remove_stale_deletions(self):
        for d in self.data_dir.glob("*-delete"):
            shutil.rmtree(d, ignore_errors=True)

    def apply_retention(self):
        deleted = 0
        for lg in list(self.logs.values()):
            deleted += lg.apply_retention()
        return deleted

    def expire_producers(self, max_age_ms):
        """Forget idempotent producers idle longer than producer.id.expiration.ms."""
        now = int(time.time() * 1000)
        return sum(lg.producer_state.remove_expired(now, max_age_ms) for lg in self.logs.values())

    def flush_due(self):
        for lg in list(self.logs.values()):
            maybe = getattr(lg, "flush_if_due", None)
            if maybe:
                maybe()

    def close(self):
        for lg in self.logs.values():
            lg.close()
        self.logs.clear()
        (self.data_dir / CLEAN_SHUTDOWN).write_text("")
