"""The transactional ids of one `__transaction_state` partition: the transaction
coordinator's shard kind (`runtime.py`).

Their state changes only by replaying the partition's records (`txn_state.py` has the format),
on load and on write alike. Kafka keeps the producer epoch before the last bump in memory only
(it lets a retried InitProducerId of KIP-360 find its bump already done); replay derives it
from the record it replaces: a record one epoch above the current one was a bump. A loaded
partition's transactions left prepared are finished by the coordinator (`loaded`).
"""
from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from ..runtime import Producer
from .txn_state import TxnMetadata, parse_txn_key, parse_txn_value

if TYPE_CHECKING:
    from .txn_coordinator import TransactionCoordinator


class TransactionShard:
    def __init__(self, coordinator: TransactionCoordinator, index: int) -> None:
        self.coordinator = coordinator
        self.index = index
        self.txns: dict[str, TxnMetadata] = {}

    def replay(self, key: bytes, value: bytes | None, producer: Producer | None) -> None:
        txn_id = parse_txn_key(key)
        if txn_id is None:
            return
        if value is None:
            self.txns.pop(txn_id, None)
            return
        md = parse_txn_value(txn_id, value)
        current = self.txns.get(txn_id)
        if current is not None and current.producer_id == md.producer_id:
            if md.producer_epoch == current.producer_epoch + 1:
                md = replace(md, last_producer_epoch=current.producer_epoch)
            elif md.producer_epoch == current.producer_epoch:
                md = replace(md, last_producer_epoch=current.last_producer_epoch)
        self.txns[txn_id] = md

    def replay_marker(self, producer_id: int, commit: bool) -> None:
        """Markers are not written to `__transaction_state`."""

    def loaded(self) -> None:
        self.coordinator.resume(list(self.txns.values()))

    def unloaded(self) -> None:
        self.txns.clear()
        self.coordinator.waiters.changed_all()
