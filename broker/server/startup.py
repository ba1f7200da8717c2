"""What a starting broker says: where it listens, where its data is, and what it found there.

A few lines an operator reads, whatever the data directory holds: one summary of recovery,
not a line per partition (those are at DEBUG).
"""
import socket

from ..coordinator.group.group_store import OFFSETS_TOPIC
from ..storage.dir_lock import LOCK_FILE


def bind_listener(host, port):
    """The listener's socket, bound but not yet accepting.

    `minilog broker start` binds it before anything opens the data directory, so a port in use
    is one clear error and leaves the data (and its clean-shutdown marker) as it was.
    """
    family, kind, proto, _, address = socket.getaddrinfo(
        host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError:
        sock.close()
        raise
    return sock


def is_new(data_dir):
    """True for a data directory that does not exist yet or is empty: nothing to recover."""
    return not data_dir.exists() or all(p.name == LOCK_FILE for p in data_dir.iterdir())


def _plural(n, word):
    return f"{n} {word}" + ("" if n == 1 else "s")


def data_summary(broker, new):
    """One line: the data directory, what it holds, and how the broker found it."""
    where = f"data in {broker.config.data_dir}"
    if new:
        return f"{where}: a new, empty directory"
    if broker.groups is None:  # a controller-only node keeps the metadata log alone
        return f"{where}: the cluster metadata log"
    topics = [ts for name, ts in broker.metadata.topics.items() if name != OFFSETS_TOPIC]
    partitions = sum(len(ts.partitions) for ts in topics)
    held = (f"{_plural(len(topics), 'topic')} ({_plural(partitions, 'partition')}), "
            f"{_plural(len(broker.groups.groups), 'consumer group')}")
    logs = broker.logs
    if logs.clean_start:
        return f"{where}: {held}; last shutdown was clean"
    cut = {key: size for key, size in logs.recovered.items() if size}
    damage = (f"{_plural(sum(cut.values()), 'byte')} of torn or corrupt tail cut in "
              f"{_plural(len(cut), 'partition')}" if cut else "no data lost")
    return (f"{where}: {held}; recovered {_plural(len(logs.recovered), 'partition log')} after an "
            f"unclean shutdown in {logs.recovery_seconds:.2f}s, {damage}")
