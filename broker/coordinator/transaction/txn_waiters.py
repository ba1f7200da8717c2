"""Requests that wait, briefly, for a transactional id's previous transaction to complete.

Once EndTxn is answered the transaction is in PrepareCommit / PrepareAbort until its markers
are in every partition, and Kafka answers the producer's next AddPartitionsToTxn (or
AddOffsetsToTxn) CONCURRENT_TRANSACTIONS meanwhile, which clients retry after a backoff.
librdkafka sends an abort's EndTxn while such a request is in flight, and it then meets the
previous transaction still completing: INVALID_TXN_STATE, which librdkafka treats as fatal.
So the coordinator holds such a request until the previous transaction is complete (at most
`SETTLE_WAIT_S`), then answers it as Kafka would in the state it finds; the connection's
next request, that EndTxn, comes after it. Only when the answer comes changes, not what it is.
InitProducerId waits the same way: a producer whose prepared transaction another process
ended (KIP-939, the Spark sink's driver) inits again for its next transaction at once, and
would otherwise pay its retry backoff (100 ms) whenever the markers were still going out.
"""
from __future__ import annotations

import asyncio
from collections.abc import Callable

SETTLE_WAIT_S = 2.0


class StateWaiters:
    """Futures per transactional id, completed whenever its state is written or unloaded."""

    def __init__(self) -> None:
        self._changed: dict[str, asyncio.Future[None]] = {}

    def changed(self, txn_id: str) -> None:
        future = self._changed.pop(txn_id, None)
        if future is not None and not future.done():
            future.set_result(None)

    def changed_all(self) -> None:
        for txn_id in list(self._changed):
            self.changed(txn_id)

    async def until(self, txn_id: str, settled: Callable[[], bool],
                    timeout_s: float = SETTLE_WAIT_S) -> None:
        """Return once `settled()` holds after a change of `txn_id`, or `timeout_s` passed."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while not settled():
            left = deadline - loop.time()
            if left <= 0:
                return
            future = self._changed.get(txn_id)
            if future is None:
                future = self._changed[txn_id] = loop.create_future()
            try:
                await asyncio.wait_for(asyncio.shield(future), left)
            except asyncio.TimeoutError:
                return
