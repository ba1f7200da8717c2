"""Which other nodes hold connections to this one, and since when a node holds none.

A broker's heartbeats and its followers' fetches name the node they come from. When that
node's process dies, the kernel closes all its sockets at once, and this node sees every one of
them end: the controller takes that as the sign to fence the broker after a short grace, instead
of the whole `broker.session.timeout.ms` a silent but connected broker gets (a paused or
partitioned one keeps its connections open, and only its silence counts). A node this one tried
to reach and found nothing listening at (connection refused: a paused process's socket still
accepts) is lost too, when it holds no connection here: a controller's successor may never have
had a connection from it, only to it. A refusal is evidence for a while only (`refusal_ttl`, the
session timeout): a node restarted since may never connect here to clear it. A node seen again on
any connection is no longer lost.
"""
import time
from collections.abc import Callable


class PeerConnections:
    def __init__(self, refusal_ttl: float = 9.0):
        self._open = {}     # node id -> the `closed` futures of its connections still open
        self._lost = {}     # node id -> when its last open connection closed
        self._refused = {}  # node id -> when a connection to it was last refused
        self.refusal_ttl = refusal_ttl
        # Called with a node's id when it is lost (or refused): the controller, which sleeps
        # until its next deadline, has a new one to schedule.
        self.lost_listeners: list[Callable[[int], None]] = []

    def seen(self, node_id, closed):
        """A request from `node_id` arrived on the connection whose end `closed` reports."""
        if closed is None or closed.done() or node_id is None or node_id < 0:
            return
        conns = self._open.setdefault(node_id, set())
        self._lost.pop(node_id, None)
        self._refused.pop(node_id, None)
        if closed not in conns:
            conns.add(closed)
            closed.add_done_callback(lambda f: self._closed(node_id, f))

    def _closed(self, node_id, closed):
        conns = self._open.get(node_id)
        if conns is None:
            return
        conns.discard(closed)
        if not conns:
            del self._open[node_id]
            self._lost[node_id] = time.monotonic()
            self._tell(node_id)

    def refused(self, node_id: int) -> None:
        """Connecting to `node_id` was refused: its process is gone, unless a connection from it
        is still open here (then its closing will tell)."""
        if node_id is not None and node_id >= 0:
            self._refused[node_id] = time.monotonic()
            self._tell(node_id)

    def _tell(self, node_id: int) -> None:
        for listener in self.lost_listeners:
            listener(node_id)

    def lost_since(self, node_id):
        """When `node_id`'s last connection here closed, or a connection to it was refused
        lately; None while it has one open (or was never lost)."""
        if node_id in self._lost:
            return self._lost[node_id]
        refused = self._refused.get(node_id)
        if refused is None or self._open.get(node_id) or \
                time.monotonic() - refused > self.refusal_ttl:
            return None
        return refused
