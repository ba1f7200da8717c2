"""What the kernel says about loopback TCP connections, from /proc/net/tcp (Linux).

A test that must stage a race waits on these instead of sleeping: until a paused broker has a
request waiting unread, until an answer waits unread in a client's socket, until a connection
is gone. Each connection appears once per end: `local` is the end's own port.
"""
from collections import namedtuple

Connection = namedtuple("Connection", "local remote state unsent unread")
ESTABLISHED, CLOSE_WAIT = "01", "08"


def connections(port):
    """Both ends of every IPv4 connection to or from `port` on this machine."""
    out = []
    with open("/proc/net/tcp") as f:
        next(f)
        for line in f:
            fields = line.split()
            local, remote = (int(a.split(":")[1], 16) for a in fields[1:3])
            if port in (local, remote) and fields[3] != "0A":  # not the listening socket
                unsent, unread = (int(q, 16) for q in fields[4].split(":"))
                out.append(Connection(local, remote, fields[3], unsent, unread))
    return out


def ends(port, state=ESTABLISHED):
    """(the client's end, the server's end) of each connection in `state` to server `port`."""
    conns = [c for c in connections(port) if c.state == state]
    server = {c.remote: c for c in conns if c.local == port}
    return [(c, server.get(c.local)) for c in conns if c.remote == port]


def unread_by_server(port, sock):
    """Bytes that `sock`, a client connected to server `port`, sent and the server has not
    read yet (None once the connection is gone)."""
    mine = sock.getsockname()[1]
    for c in connections(port):
        if c.local == port and c.remote == mine:
            return c.unread
    return None
