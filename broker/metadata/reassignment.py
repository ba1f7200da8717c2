"""Partition reassignments (KIP-455), the steps the active controller takes, as KRaft's
ReplicationControlManager takes them: `kafka-reassign-partitions.sh` and the admin clients
move a partition's replicas to other brokers, raise or lower its replication factor.

A reassignment that adds replicas runs in three partition changes, so the partition never has
fewer in-sync copies than before: it grows (the replica set becomes the target followed by the
replicas it leaves out, `adding` and `removing` say which; the ISR and leader are unchanged, the
new replicas start following), the new replicas catch up and the leader adds them to the ISR
(AlterPartition), and the change that adds the last of them completes it (the target alone,
the removed replicas out of the ISR, a new leader if the old one was removed, the leader epoch
bumped so the removed replicas are fenced). One that only removes completes at once, if an ISR
member is left. Cancelling (null replicas) reverts to the replicas before the adding ones.
Every function here is pure: states in, the next state out; the controller turns them into
records.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Collection, Sequence

from .image import PartitionState


def invalid_target(target: Sequence[int], registered: Collection[int]) -> str | None:
    """Why `target` cannot be a partition's replica set (Kafka's words), or None."""
    if not target:
        return "The manual partition assignment includes an empty replica list."
    seen: set[int] = set()
    for r in target:
        if r in seen:
            return f"The manual partition assignment includes the broker {r} more than once."
        seen.add(r)
        if r not in registered:
            return (f"The manual partition assignment includes broker {r}, but no such broker "
                    "is registered.")
    return None


def started(p: PartitionState, target: Sequence[int], live: Collection[int]
            ) -> PartitionState | None:
    """The state once a reassignment of `p` to `target` starts (and, when it adds nothing,
    completes); None when it would leave no ISR member. A reassignment already under way is
    replaced: its replicas are the current ones."""
    adding = tuple(r for r in target if r not in p.replicas)
    removing = tuple(r for r in p.replicas if r not in target)
    if not adding and not removing:  # the target is today's set (in some order)
        return dataclasses.replace(p, replicas=tuple(target), adding=(), removing=())
    grown = dataclasses.replace(p, replicas=tuple(target) + removing, adding=adding,
                                removing=removing)
    return completed(grown, live) if not adding else grown


def completed(p: PartitionState, live: Collection[int]) -> PartitionState | None:
    """`p` with its reassignment completed, when every replica it adds is in the ISR and an
    ISR member is left once the removed ones go; else None."""
    if not p.reassigning or any(r not in p.isr for r in p.adding):
        return None
    replicas = tuple(r for r in p.replicas if r not in p.removing)
    isr = tuple(r for r in p.isr if r not in p.removing)
    if not replicas or not isr:
        return None
    return _led(dataclasses.replace(p, replicas=replicas, isr=isr, adding=(), removing=()),
                live)


def reverted(p: PartitionState, live: Collection[int]) -> PartitionState | None:
    """`p` back on the replicas it had before the reassignment added any; None when no ISR
    member would be left (the added replicas are all that is in sync)."""
    replicas = tuple(r for r in p.replicas if r not in p.adding)
    isr = tuple(r for r in p.isr if r not in p.adding)
    if not isr:
        return None
    return _led(dataclasses.replace(p, replicas=replicas, isr=isr, adding=(), removing=()),
                live)


def _led(p: PartitionState, live: Collection[int]) -> PartitionState:
    """The leader kept if still in the ISR, else the first live ISR member in replica order
    (-1: none live); the leader epoch bumped either way, which fences a removed replica that
    still fetches or leads."""
    leader = p.leader if p.leader in p.isr else next(
        (r for r in p.replicas if r in p.isr and r in live), -1)
    return dataclasses.replace(p, leader=leader, leader_epoch=p.leader_epoch + 1)
