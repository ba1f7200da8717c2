"""One process per directory: an exclusive lock on `.lock`, as Kafka's `FileLock` on each log dir.

Two brokers on one data directory each recover the other's live segments as torn and append
at the same offsets: acknowledged records then differ between them, or vanish. Kafka refuses
the second process with `Failed to acquire lock on file .lock`; so does minilog, for every
directory a broker writes, and `minilog cluster up` for its cluster directory.

The lock is `flock(LOCK_EX | LOCK_NB)` on `DIR/.lock`, held by an open file until the process
closes it or exits: the kernel releases it on any exit, kill -9 included, so a crash never
leaves a stale lock behind (a pid file would). The holder writes its pid into the file only so
that the refused process can say who holds the directory; the pid is never what decides.
"""
from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import IO, Iterable

LOCK_FILE = ".lock"


class DirectoryLocked(Exception):
    """Another process holds the directory's lock; the message names the directory and pid."""

    def __init__(self, directory: Path, holder: int | None, what: str = "process"):
        self.directory, self.holder = directory, holder
        by = f"pid {holder}" if holder else "its pid not written yet"
        super().__init__(f"{directory} is in use by another {what} ({by})")


def holder_pid(directory: Path) -> int | None:
    """The pid written in `directory`'s lock file, None when absent or unreadable."""
    try:
        return int((Path(directory) / LOCK_FILE).read_text().strip() or 0) or None
    except (OSError, ValueError):
        return None


class DirectoryLock:
    """An exclusive lock on one directory (created if missing), held until `release()`."""

    def __init__(self, directory: Path | str, what: str = "process"):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        # Opened without truncating: the holder's pid stays readable for a refused process.
        # Mode 0600 from its first byte: a cluster's files are its owner's alone.
        self._file: IO[str] | None = os.fdopen(
            os.open(self.directory / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600), "a+")
        try:
            fcntl.flock(self._file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._file.close()
            self._file = None
            raise DirectoryLocked(self.directory, holder_pid(self.directory), what) from None
        self._file.seek(0)
        self._file.truncate()
        self._file.write(f"{os.getpid()}\n")
        self._file.flush()

    def release(self) -> None:
        """Unlock (closing the file releases the flock); the file stays, as Kafka's does."""
        if self._file is not None:
            self._file.close()
            self._file = None


def is_locked(directory: Path | str) -> int | None:
    """The holder's pid (or -1 when it wrote none yet) if another process holds `directory`'s
    lock, else None: probed by taking and at once releasing it, never by trusting the pid."""
    path = Path(directory) / LOCK_FILE
    try:
        probe = open(path, "r")
    except FileNotFoundError:
        return None
    with probe:
        try:
            fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return holder_pid(Path(directory)) or -1
        fcntl.flock(probe, fcntl.LOCK_UN)
    return None


class DirectoryLocks:
    """The locks of several directories, taken in order and all released together: a refusal
    on any of them releases those already taken."""

    def __init__(self, directories: Iterable[Path | str], what: str = "process"):
        self._locks: list[DirectoryLock] = []
        try:
            for d in dict.fromkeys(Path(d).resolve() for d in directories):
                self._locks.append(DirectoryLock(d, what))
        except BaseException:
            self.release()
            raise

    def release(self) -> None:
        for lock in reversed(self._locks):
            lock.release()
        self._locks.clear()
