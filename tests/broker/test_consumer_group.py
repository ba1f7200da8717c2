"""The KIP-848 group's rules without processes: the assignors and reconciliation, step by step
(`broker/coordinator/group/consumer_group.py`, `broker/coordinator/group/consumer_assignors.py`),
and the online migration of a group between the classic and consumer protocols
(`broker/coordinator/group/group_migration.py`)."""
import uuid

import pytest
from minilog.broker.coordinator.group.consumer_assignors import range_assign, uniform_assign
from minilog.broker.coordinator.group.consumer_group import (
    M_STABLE,
    M_UNRELEASED,
    M_UNREVOKED,
    ConsumerGroup,
    ConsumerMember,
    FencedError,
)
from minilog.connector.protocol import ErrorCode

A, B = uuid.UUID(int=1), uuid.UUID(int=2)


def _flat(assignment):
    return {m: {(t, p) for t, ps in parts.items() for p in ps} for m, parts in assignment.items()}


def test_uniform_spreads_evenly_and_keeps_what_it_can_when_a_member_joins():
    subs = {m: frozenset({A}) for m in ("m1", "m2", "m3")}
    first = uniform_assign(subs, {A: 12}, {})
    assert sorted(len(v) for v in _flat(first).values()) == [4, 4, 4]
    second = uniform_assign({**subs, "m4": frozenset({A})}, {A: 12}, first)
    moved = sum(len(_flat(first)[m] - _flat(second)[m]) for m in first)
    assert moved == 3 and sorted(len(v) for v in _flat(second).values()) == [3, 3, 3, 3]


def test_uniform_gives_each_partition_to_a_member_that_subscribes_to_its_topic():
    subs = {"m1": frozenset({A}), "m2": frozenset({A, B}), "m3": frozenset({B})}
    out = _flat(uniform_assign(subs, {A: 4, B: 4}, {}))
    assert all(t in subs[m] for m, tps in out.items() for t, _ in tps)
    assert len(set().union(*out.values())) == 8
    assert max(map(len, out.values())) - min(map(len, out.values())) <= 1


def test_range_gives_contiguous_ranges_in_member_order():
    out = range_assign({"b": frozenset({A}), "a": frozenset({A})}, {A: 5}, {})
    assert out == {"a": {A: {0, 1, 2}}, "b": {A: {3, 4}}}


def _group(*members, partitions=4):
    group = ConsumerGroup("g", 0)
    for m in members:
        group.add_member(ConsumerMember(m, subscribed_topic_names=["t"]))
    group.topics = {"t": (A, partitions)}
    group.group_epoch = 1
    group.compute_target("uniform")
    return group


def test_a_partition_moves_only_after_its_owner_revoked_it():
    group = _group("m1")
    m1 = group.members["m1"]
    group.reconcile(m1, {})
    assert m1.assigned == {A: {0, 1, 2, 3}} and m1.member_epoch == 1
    m2 = ConsumerMember("m2", subscribed_topic_names=["t"])
    group.add_member(m2)
    group.group_epoch = 2
    group.compute_target("uniform")
    group.reconcile(m2, {})  # m1 still holds everything: m2 waits at the new epoch
    assert m2.state == M_UNRELEASED and m2.assigned == {} and m2.member_epoch == 2
    group.reconcile(m1, {A: {0, 1, 2, 3}})  # m1 is asked to give up half, keeps its epoch
    assert m1.state == M_UNREVOKED and m1.member_epoch == 1
    given = m1.pending_revocation[A]
    assert len(given) == 2 and m1.assigned[A] == {0, 1, 2, 3} - given
    group.reconcile(m2, {})
    assert m2.assigned == {}  # still not released
    group.reconcile(m1, {A: {0, 1, 2, 3}})  # still reporting them: nothing moves
    assert m1.state == M_UNREVOKED
    group.reconcile(m1, {A: m1.assigned[A]})  # revoked
    assert m1.state == M_STABLE and m1.member_epoch == 2
    group.reconcile(m2, {})
    assert m2.state == M_STABLE and m2.assigned == {A: given}


def test_an_epoch_ahead_of_the_member_is_fenced_and_the_previous_one_is_tolerated():
    group = _group("m1")
    m1 = group.members["m1"]
    group.reconcile(m1, {})
    with pytest.raises(FencedError) as fenced:
        group.check_epoch(m1, 5, {})
    assert fenced.value.code == ErrorCode.FENCED_MEMBER_EPOCH
    group.check_epoch(m1, 0, {})  # its previous epoch, owning nothing extra: a lost answer
    with pytest.raises(FencedError):
        group.check_epoch(m1, 0, {A: {9}})  # ...but not owning more


def test_a_removed_member_frees_its_partitions_and_raises_the_group_epoch():
    group = _group("m1", "m2")
    for m in list(group.members.values()):
        group.reconcile(m, {})
    epoch = group.group_epoch
    group.remove_member("m2")
    assert group.group_epoch == epoch + 1
    assert set(group.owners.values()) == {"m1"}


def test_a_regex_subscription_matches_whole_topic_names():
    group = ConsumerGroup("g", 0)
    group.add_member(ConsumerMember("m", subscribed_topic_names=[],
                                    subscribed_topic_regex="orders-.*"))
    cluster = {"orders-eu": (A, 2), "orders-us": (B, 1), "old-orders-eu": (uuid.uuid4(), 1)}
    assert group.refresh_topics(cluster)
    assert set(group.topics) == {"orders-eu", "orders-us"}
    assert not group.refresh_topics(cluster)
    assert group.refresh_topics({**cluster, "orders-eu": (A, 3)})  # new partitions


# -- online migration (broker/coordinator/group/group_migration.py): classic members in a consumer group ---

def _classic_group(generation=3):
    """A stable classic group of two members of topic t, each owning two of its partitions."""
    from minilog.broker.coordinator.group.group import STABLE, Group, Member
    from minilog.connector.protocol.consumer_protocol import (
        Assignment,
        Subscription,
        TopicPartition,
        encode_assignment,
        encode_subscription,
    )
    group = Group("g", 0, STABLE)
    group.generation_id, group.protocol_type, group.protocol_name = generation, "consumer", "range"
    for mid, parts in (("c1", (0, 1)), ("c2", (2, 3))):
        metadata = encode_subscription(Subscription(("t",)), 1)
        member = Member(mid, None, "client", "/127.0.0.1", 30000, 10000, "consumer",
                        [("range", metadata), ("roundrobin", metadata)])
        member.assignment = encode_assignment(Assignment(tuple(TopicPartition("t", p)
                                                               for p in parts)))
        group.members[mid] = member
    group.offsets = {("t", 0): "committed"}
    return group


def test_a_classic_group_becomes_a_consumer_group_with_its_members_owning_what_they_had():
    from minilog.broker.coordinator.group.group_migration import consumer_from_classic
    converted = consumer_from_classic(_classic_group(), {"t": A}, 0)
    assert converted.group_epoch == converted.assignment_epoch == 3
    assert {m: c.assigned for m, c in converted.members.items()} == \
        {"c1": {A: {0, 1}}, "c2": {A: {2, 3}}}
    assert converted.target == {"c1": {A: {0, 1}}, "c2": {A: {2, 3}}}
    assert all(c.member_epoch == 3 and c.classic.session_timeout_ms == 10000
               and c.subscribed_topic_names == ["t"] for c in converted.members.values())
    assert converted.owners[(A, 0)] == "c1" and converted.offsets == {("t", 0): "committed"}


def test_a_classic_member_keeps_its_partitions_until_it_rejoins_without_them():
    from minilog.broker.coordinator.group.group_migration import consumer_from_classic
    group = consumer_from_classic(_classic_group(), {"t": A}, 0)
    group.topics = {"t": (A, 4)}
    group.add_member(ConsumerMember("new", subscribed_topic_names=["t"]))
    group.group_epoch += 1
    group.compute_target("uniform")
    new = group.members["new"]
    group.reconcile(new, {})
    assert new.state == M_UNRELEASED and new.assigned == {}  # the classic owners hold them all
    for c in (group.members["c1"], group.members["c2"]):
        assert group.must_rejoin(c)  # its Heartbeat says REBALANCE_IN_PROGRESS
        group.reconcile(c, {})       # an eager member rejoins owning nothing
        assert c.member_epoch == group.group_epoch and not c.owns_any(group.target["new"])
    assert not group.must_rejoin(group.members["c1"])
    group.reconcile(new, {})
    assert new.assigned and all(group.owners[(A, p)] == "new" for p in new.assigned[A])


def test_an_all_classic_consumer_group_becomes_classic_with_its_target_assignments():
    from minilog.broker.coordinator.group.group_migration import (
        classic_from_consumer,
        consumer_from_classic,
    )
    from minilog.connector.protocol.consumer_protocol import decode_assignment
    classic = classic_from_consumer(consumer_from_classic(_classic_group(), {"t": A}, 0),
                                    {A: "t"}, 0)
    assert classic.generation_id == 3 and classic.protocol_name == "range"
    assert classic.leader_id == "c1" and classic.subscribed == {"t"}
    assert {mid: {p for _, p in decode_assignment(m.assignment).partitions}
            for mid, m in classic.members.items()} == {"c1": {0, 1}, "c2": {2, 3}}
    assert classic.offsets == {("t", 0): "committed"}


def test_a_consumer_group_becomes_classic_only_when_its_members_are_classic_and_share_a_protocol():
    from minilog.broker.coordinator.group.consumer_group import ClassicMetadata
    group = _group("modern")
    assert not group.can_become_classic()
    group.add_member(ConsumerMember("c1", classic=ClassicMetadata(10000, [("range", b"")])))
    assert not group.can_become_classic()  # a consumer-protocol member is still there
    group.remove_member("modern")
    assert group.can_become_classic()
    group.add_member(ConsumerMember("c2", classic=ClassicMetadata(10000, [("roundrobin", b"")])))
    assert not group.can_become_classic()  # no protocol a classic group could elect
