"""Connections from this broker to the other nodes of its cluster, for inter-broker requests.

Raft (Vote, BeginQuorumEpoch, metadata Fetch), registration and heartbeats, AlterPartition,
forwarded admin requests and replica fetching all go through the client's `BrokerConnection`,
one per peer address and purpose, reopened on the next request after any failure. A request
to a controller quorum voter's address (controller.quorum.voters) speaks the controller
listener's security, any other the inter-broker listener's (`inter_broker.py`).

Callers retry quietly (a peer restarting is ordinary), so a peer this node cannot reach for a
reason retrying will not fix (its certificate refused, this node's login refused) is logged
here, once per peer and reason until it is reached: otherwise a cluster whose nodes refuse each
other's certificates would just never form, saying nothing.
"""
import asyncio
import logging

from minilog.connector.client.connection import BrokerConnection
from minilog.connector.client.types import KafkaConnectionError
from minilog.connector.protocol import ErrorCode, KafkaError

log = logging.getLogger("minilog.broker.peers")


class PeerChannel:
    def __init__(self, node_id, connect_timeout=2.0, security=None, controller_security=None,
                 controllers=()):
        """`security`: how other brokers are reached (`inter_broker.py`), None for PLAINTEXT;
        `controller_security`: how the voters at the addresses `controllers` are."""
        self.client_id = f"minilog-broker-{node_id}"
        self.security = security
        self.controller_security = controller_security
        self.controllers = frozenset(controllers)
        self.connect_timeout = connect_timeout
        self._conns = {}  # (host, port, purpose) -> BrokerConnection
        self._opening: dict = {}  # (host, port, purpose) -> the task opening its connection
        self._refused: dict = {}  # (host, port) -> the reason last logged

    async def send(self, address, api_key, body, version=None, timeout=5.0, purpose=""):
        """One request to `address` (host, port); raises KafkaError/KafkaConnectionError."""
        conn = await self._connection(tuple(address), purpose, timeout)
        return await conn.send(api_key, body, version, timeout=timeout)

    async def _connection(self, address: tuple, purpose: str,
                          timeout: float) -> BrokerConnection:
        """The open connection for (address, purpose); sends racing while it opens wait for
        the same one (each opening its own would leave all but the last one kept open and
        unused until the process ends)."""
        key = (*address, purpose)
        conn = self._conns.get(key)
        if conn is not None and conn.connected:
            return conn
        opening = self._opening.get(key)
        if opening is None:
            opening = asyncio.ensure_future(self._open(key, address, timeout))
            self._opening[key] = opening
            opening.add_done_callback(lambda done: self._opened(key, done))
        return await asyncio.shield(opening)  # a caller cancelled leaves it to the others

    async def _open(self, key: tuple, address: tuple, timeout: float) -> BrokerConnection:
        conn = BrokerConnection(address[0], address[1], client_id=self.client_id,
                                connect_timeout=self.connect_timeout, request_timeout=timeout,
                                security=self.controller_security
                                if address in self.controllers else self.security)
        try:
            await conn.connect()
        except BaseException as e:
            self._maybe_log(address, e)
            raise
        old = self._conns.get(key)
        if old is not None:
            old.close()
        self._conns[key] = conn
        self._refused.pop(address, None)
        return conn

    def _opened(self, key: tuple, done: asyncio.Future) -> None:
        if self._opening.get(key) is done:
            del self._opening[key]
        if not done.cancelled():
            done.exception()  # retrieved: every caller that waited has been given it

    def _maybe_log(self, address: tuple, error: BaseException) -> None:
        """Log why a peer refused this node's connection, when it is not a passing failure."""
        if isinstance(error, KafkaConnectionError) and "TLS handshake" in str(error):
            reason = str(error)
        elif isinstance(error, KafkaError) and error.code in (
                ErrorCode.SASL_AUTHENTICATION_FAILED, ErrorCode.UNSUPPORTED_SASL_MECHANISM,
                ErrorCode.ILLEGAL_SASL_STATE):
            reason = f"{address[0]}:{address[1]} refused this node's login: {error}"
        else:
            return
        if self._refused.get(address) != reason:
            self._refused[address] = reason
            log.warning("cannot reach the node at %s:%d: %s", *address, reason)

    def close(self):
        for opening in self._opening.values():
            opening.cancel()
        self._opening.clear()
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()
