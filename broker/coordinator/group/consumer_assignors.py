"""The server-side assignors of KIP-848: `uniform` and `range` (`group.consumer.assignors`).

An assignor maps the group's members to the partitions they should own, given each member's
subscribed topics (already resolved from names and regular expressions) and each topic's
partition count. It knows nothing of epochs or of who owns what now: moving partitions safely
is reconciliation's work (`consumer_group.reconcile`). Topics are keyed by topic id, as in the
records and on the wire. Both assignors are deterministic (members sorted by id), so the same
input gives the same target on every coordinator.
"""
from collections.abc import Callable, Iterable, Mapping
from uuid import UUID

# {member id: {topic id: set of partitions}}
Assignment = dict[str, dict[UUID, set[int]]]
Subscriptions = Mapping[str, frozenset[UUID]]  # member id -> topic ids it subscribes to


def _empty(members: Iterable[str]) -> Assignment:
    return {m: {} for m in members}


def range_assign(subscriptions: Subscriptions, partitions: Mapping[UUID, int],
                 previous: Assignment) -> Assignment:
    """Kafka's RangeAssignor: per topic, contiguous ranges to the members subscribing to it,
    in member id order, the first `n % members` getting one more (co-partitioned topics land
    on the same member)."""
    out = _empty(subscriptions)
    for topic, count in partitions.items():
        members = sorted(m for m, topics in subscriptions.items() if topic in topics)
        if not members:
            continue
        quota, extra = divmod(count, len(members))
        start = 0
        for i, member in enumerate(members):
            n = quota + (1 if i < extra else 0)
            if n:
                out[member][topic] = set(range(start, start + n))
            start += n
    return out


def uniform_assign(subscriptions: Subscriptions, partitions: Mapping[UUID, int],
                   previous: Assignment) -> Assignment:
    """Kafka's UniformAssignor: as even a spread of all partitions as the subscriptions allow,
    keeping each partition where the previous target put it whenever balance permits (sticky),
    so a member joining or leaving moves only the partitions it must."""
    members = sorted(subscriptions)
    out = _empty(members)
    if not members:
        return out
    eligible = {(t, p): [m for m in members if t in subscriptions[m]]
                for t, count in sorted(partitions.items()) for p in range(count)}
    eligible = {tp: ms for tp, ms in eligible.items() if ms}
    quota = _quotas(members, subscriptions, eligible, previous)
    load = dict.fromkeys(members, 0)
    unassigned: list[tuple[UUID, int]] = []
    for tp, candidates in eligible.items():  # keep what the previous target gave, up to quota
        owner = next((m for m in candidates if tp[1] in previous.get(m, {}).get(tp[0], ())), None)
        if owner is not None and load[owner] < quota[owner]:
            out[owner].setdefault(tp[0], set()).add(tp[1])
            load[owner] += 1
        else:
            unassigned.append(tp)
    for tp in unassigned:  # the rest to the least loaded member that may take it
        member = min(eligible[tp], key=lambda m: (load[m] >= quota[m], load[m], m))
        out[member].setdefault(tp[0], set()).add(tp[1])
        load[member] += 1
    return out


def _quotas(members: list[str], subscriptions: Subscriptions,
            eligible: Mapping[tuple[UUID, int], list[str]],
            previous: Assignment) -> dict[str, int]:
    """How many partitions each member may keep. With one subscription shared by all (the
    usual case) that is floor or ceil of the even share, the ceilings going to the members
    that already hold the most; otherwise the even share of the partitions each could take."""
    total = len(eligible)
    if len({subscriptions[m] for m in members}) == 1:
        base, extra = divmod(total, len(members))
        held = sorted(members, key=lambda m: (-sum(len(ps) for ps in previous.get(m, {}).values()),
                                              m))
        return {m: base + (1 if i < extra else 0) for i, m in enumerate(held)}
    quota = dict.fromkeys(members, 0)
    for candidates in eligible.values():
        for m in candidates:
            quota[m] += 1
    share = -(-total // len(members))
    return {m: min(q, share) for m, q in quota.items()}


ASSIGNORS: dict[str, Callable[[Subscriptions, Mapping[UUID, int], Assignment], Assignment]] = {
    "uniform": uniform_assign,
    "range": range_assign,
}
