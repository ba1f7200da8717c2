"""Files only their owner may read: credentials, client settings with a password, the state of
a local cluster.

Each is created with mode 0600 from its first byte (`os.open` with the mode, not a chmod after
writing, which leaves a moment when anyone may open it) and replaces the old one atomically, so
a reader sees the whole old file or the whole new one.
"""
import os
from pathlib import Path


def write_private(path: Path, text: str) -> None:
    """Write `text` to `path` (mode 0600), atomically, synced to disk."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)  # an older temporary file keeps its mode through O_CREAT
        with os.fdopen(fd, "w") as f:
            fd = -1
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
    finally:
        if fd >= 0:
            os.close(fd)
    os.replace(tmp, path)


def write_properties(path: Path, settings: dict, comment: str = "") -> None:
    """`settings` as a Java-style properties file only its owner may read."""
    head = f"# {comment}\n" if comment else ""
    write_private(path, head + "".join(f"{k}={v}\n" for k, v in settings.items()))
