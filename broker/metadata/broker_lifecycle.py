"""A broker's membership of its cluster: register with the active controller, then heartbeat.

Registration gives the broker an epoch (the offset of its registration record); heartbeats every
`broker.heartbeat.interval.ms` carry it and the offset of the metadata this broker has applied,
so the controller unfences the broker once it has caught up and fences it when the heartbeats
stop. Only once unfenced does the broker lead or follow partitions (Kafka's brokers, too, serve
nothing before): until then its image may be an old one replayed from its own log. A stale epoch (the controller lost the registration) means registering again. On a clean
stop the broker asks to be fenced first, so its partitions move before it goes.

A broker that was paused (or cut off) may have been fenced and replaced without knowing it: its
image still names it leader and coordinator until it catches up. So it counts itself `serving`
only while its last heartbeat the controller answered was sent less than
`broker.session.timeout.ms` ago: the controller fences no sooner than that after receiving it,
so a deposed broker stops answering as coordinator before anyone else can start.
"""
from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from minilog.connector.client.types import KafkaConnectionError
from minilog.connector.protocol import ApiKey, ErrorCode, KafkaError, request

log = logging.getLogger("minilog.broker.lifecycle")

_REG, _BEAT = request(ApiKey.BROKER_REGISTRATION), request(ApiKey.BROKER_HEARTBEAT)


class BrokerLifecycle:
    def __init__(self, broker: Any, store: Any, peers: Any,
                 own_controller: Callable[[int, Any], Awaitable[Any]] | None = None) -> None:
        """`own_controller(api key, body)`: the answer of this node's own controller, asked
        without a connection when it is the active one (a single broker always is)."""
        self.broker, self.store, self.peers = broker, store, peers
        self.own_controller = own_controller
        self.node_id = broker.config.node_id
        self.interval = broker.config["broker.heartbeat.interval.ms"] / 1000
        self.incarnation = uuid.uuid4()
        self.epoch = -1
        self.fenced = True
        self.unfenced = asyncio.Event()  # set the first time the controller unfences us
        self.session_timeout = broker.config["broker.session.timeout.ms"] / 1000
        self._lease_until = 0.0  # time.monotonic() up to which the controller cannot fence us
        self.beat_timeout = min(5.0, self.session_timeout / 3)
        self._task: asyncio.Task[None] | None = None

    @property
    def serving(self) -> bool:
        """Unfenced, and no fencing can have happened since the last answered heartbeat."""
        return not self.fenced and time.monotonic() < self._lease_until

    def start(self) -> BrokerLifecycle:
        self._task = asyncio.ensure_future(self._run())
        return self

    def _controller_address(self) -> tuple[str, int] | None:
        leader = self.store.raft.leader_id
        if leader is None:
            return None
        return self.store.raft.voters.get(leader) or (
            (e.host, e.port) if (e := self.store.image.registered.get(leader)) else None)

    async def _send(self, api_key: int, body: Any, timeout: float = 5.0) -> Any:
        if self.own_controller is not None and self.store.raft.leader_id == self.node_id:
            return await self.own_controller(api_key, body)
        address = self._controller_address()
        if address is None:
            return None
        try:
            return await self.peers.send(address, api_key, body, timeout=timeout,
                                         purpose="lifecycle")
        except (KafkaError, KafkaConnectionError, OSError):
            return None

    async def _run(self) -> None:
        while True:
            if self.epoch < 0:
                await self._register()
                if self.epoch >= 0:
                    continue  # the first heartbeat at once, as Kafka's brokers send it
            else:
                await self._heartbeat(want_fence=False)
            # Unregistered: again soon; sooner while no controller is known (nothing was sent).
            await asyncio.sleep(self.interval if self.epoch >= 0 else
                                0.2 if self.store.raft.leader_id is not None else 0.02)

    async def _register(self) -> None:
        ep = self.store.own_endpoint
        body = _REG.cls(broker_id=self.node_id, cluster_id=self.store.cluster_id,
                        incarnation_id=self.incarnation, features=[], rack=None,
                        listeners=_listeners(ep, self.broker.config))
        resp = await self._send(ApiKey.BROKER_REGISTRATION, body)
        if resp is not None and resp.error_code == 0:
            self.epoch = resp.broker_epoch
            log.info("broker %d registered (epoch %d)", self.node_id, self.epoch)

    async def _heartbeat(self, want_fence: bool) -> None:
        body = _BEAT.cls(broker_id=self.node_id, broker_epoch=self.epoch,
                         current_metadata_offset=self.store.metadata_offset,
                         want_fence=want_fence, want_shut_down=want_fence)
        sent = time.monotonic()
        # Answered at once by a live controller; waiting longer on a paused or dead one only
        # delays finding its successor, and the lease (`serving`) with it.
        resp = await self._send(ApiKey.BROKER_HEARTBEAT, body, timeout=self.beat_timeout)
        if resp is None:
            return
        if resp.error_code == ErrorCode.STALE_BROKER_EPOCH:
            self.epoch = -1
        elif resp.error_code == 0:
            self._lease_until = sent + self.session_timeout
            if self.fenced != resp.is_fenced:
                log.info("broker %d %s", self.node_id, "fenced" if resp.is_fenced else "unfenced")
            self.fenced = resp.is_fenced
            if not self.fenced:
                self.unfenced.set()
            if not resp.is_fenced and self.broker.replicas is not None:
                self.broker.replicas.broker_ready()
                if self.broker.elections is not None:  # after the replicas' pass, queued first
                    self.broker.elections.broker_ready()

    async def stop(self) -> None:
        """Controlled shutdown: ask to be fenced (leadership moves away), then stop."""
        if self._task:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self.epoch >= 0 and not self.fenced:
            await asyncio.wait([asyncio.ensure_future(self._heartbeat(want_fence=True))],
                               timeout=2.0)


_PROTOCOL_CODES = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}


def _listeners(ep: Any, config: Any) -> list[Any]:
    """BrokerRegistration's listeners, the primary first: every one a client may come through."""
    protocols = {lst.name: lst.protocol for lst in config.listeners}
    found = ep.listeners or {"PLAINTEXT": (ep.host, ep.port)}
    return [_REG.make("listeners", name=name, host=host, port=port,
                      security_protocol=_PROTOCOL_CODES.get(protocols.get(name, ""), 0))
            for name, (host, port) in found.items()]
