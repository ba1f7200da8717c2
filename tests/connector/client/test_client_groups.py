"""Consumer groups on real minilog brokers: our membership alone, with each other, and with
confluent-kafka and kafka-python members in the same group.

This part drives `GroupMembership` directly with a stand-in owner (the seam the consumer
implements), so the protocol is tested apart from fetching; the consumer-level tests are in
`test_client_group_consumers.py`, the helpers of both in `grouptools.py`.
"""
import asyncio

import kafka
import pytest
from clienttools import make_topic, unique
from grouptools import LONG_SESSION_MS, SESSION_MS, Member, members, run, until
from grouptools import _confluent, _Polling, _split
from minilog.connector.client import KafkaError
from minilog.connector.client.group_api import OffsetAndMetadata
from minilog.connector.client.types import TopicPartition as TP

pytestmark = pytest.mark.timeout(180)


# ---- the membership on its own ------------------------------------------------------------------
def test_two_members_split_a_topic_and_the_survivor_takes_all_when_one_closes(gbroker):
    topic, group = make_topic(gbroker.bootstrap, 4), unique("g")

    async def scenario():
        # Sessions longer than any wait here: only b's LeaveGroup can hand its partitions on.
        a, b = (Member(gbroker.bootstrap, group, [topic], session_timeout_ms=LONG_SESSION_MS)
                for _ in range(2))
        async with members(a, b):
            await until(lambda: _split([a, b], 2), what="2 + 2", poll=[a, b])
            assert a.group.generation == b.group.generation >= 1
            await b.close()
            await until(lambda: len(a.owner.assigned) == 4, what="survivor owns 4", poll=[a],
                        timeout=LONG_SESSION_MS / 2000)
            assert b.owner.assigned == set()
            # revoked if on_assign told it of them; close may come before b polled for that
            assert [k for k, _ in b.owner.events] in ([], ["assign", "revoke"])
    run(scenario())


def test_commit_and_committed_round_trip_metadata_and_leader_epoch(gbroker):
    topic, group = make_topic(gbroker.bootstrap, 2), unique("g")

    async def scenario():
        m = Member(gbroker.bootstrap, group, [topic])
        async with members(m):
            await until(lambda: len(m.owner.assigned) == 2, poll=[m])
            m.owner.positions = {TP(topic, 0): 5, TP(topic, 1): 9}
            assert await m.group.commit() == {TP(topic, 0): OffsetAndMetadata(5),
                                              TP(topic, 1): OffsetAndMetadata(9)}
            await m.group.commit({TP(topic, 1): OffsetAndMetadata(11, "note", 3)})
            got = await m.group.committed([TP(topic, 0), TP(topic, 1), TP(topic, 7)])
            assert got == {TP(topic, 0): OffsetAndMetadata(5, "", -1),
                           TP(topic, 1): OffsetAndMetadata(11, "note", 3), TP(topic, 7): None}
    run(scenario())


def test_manual_commits_without_membership_need_an_empty_group(gbroker):
    topic, group = make_topic(gbroker.bootstrap, 1), unique("g")

    async def scenario():
        m = Member(gbroker.bootstrap, group)  # not subscribed: commits as generation -1
        async with members(m):
            await m.group.commit({(topic, 0): 42})
            assert (await m.group.committed([(topic, 0)]))[TP(topic, 0)].offset == 42
    run(scenario())


def test_cooperative_member_joining_revokes_only_what_moves(gbroker):
    topic, group = make_topic(gbroker.bootstrap, 4), unique("g")
    coop = {"partition_assignment_strategy": "cooperative-sticky"}

    async def scenario():
        a = Member(gbroker.bootstrap, group, [topic], **coop)
        async with members(a):
            await until(lambda: len(a.owner.assigned) == 4, poll=[a])
            before = set(a.owner.assigned)
            b = Member(gbroker.bootstrap, group, [topic], **coop)
            async with members(b):
                await until(lambda: _split([a, b], 2), what="2 + 2", poll=[a, b])
                revoked = [set(tps) for kind, tps in a.owner.events if kind == "revoke"]
                assert revoked == [before - a.owner.assigned]  # exactly what moved, once
                assert ("lost", ) not in [e[:1] for e in a.owner.events]
    run(scenario())


def test_eager_member_joining_revokes_everything_first(gbroker):
    topic, group = make_topic(gbroker.bootstrap, 4), unique("g")

    async def scenario():
        a = Member(gbroker.bootstrap, group, [topic], partition_assignment_strategy="roundrobin")
        async with members(a):
            await until(lambda: len(a.owner.assigned) == 4, poll=[a])
            b = Member(gbroker.bootstrap, group, [topic],
                       partition_assignment_strategy="roundrobin")
            async with members(b):
                await until(lambda: _split([a, b], 2) and len(a.owner.events) == 3, poll=[a, b])
                kinds = [(k, len(tps)) for k, tps in a.owner.events]
                assert kinds == [("assign", 4), ("revoke", 4), ("assign", 2)]
    run(scenario())


def test_poll_timeout_leaves_the_group_and_next_poll_rejoins_with_partitions_lost(gbroker):
    topic, group = make_topic(gbroker.bootstrap, 2), unique("g")

    async def scenario():
        a = Member(gbroker.bootstrap, group, [topic], max_poll_interval_ms=1500)
        b = Member(gbroker.bootstrap, group, [topic], max_poll_interval_ms=60000)
        async with members(a, b):
            await until(lambda: _split([a, b], 1) and a.owner.events[-1:] and
                        a.owner.events[-1][0] == "assign", poll=[a, b])
            had = sorted(a.owner.assigned)
            await until(lambda: len(b.owner.assigned) == 2, what="b takes over", poll=[b])
            assert a.group._poll_expired and a.owner.events[-1][0] == "assign"  # until a polls
            await until(lambda: _split([a, b], 1), what="a back", poll=[a, b])
            assert ("lost", had) in a.owner.events
    run(scenario())


def test_regex_subscription_picks_up_new_topics(gbroker):
    prefix = unique("rx")
    first = make_topic(gbroker.bootstrap, 1, name=f"{prefix}-a")

    async def scenario():
        m = Member(gbroker.bootstrap, unique("g"), [f"^{prefix}-.*"], metadata_max_age_ms=300)
        async with members(m):
            await until(lambda: m.owner.assigned == {TP(first, 0)}, poll=[m])
            second = make_topic(gbroker.bootstrap, 2, name=f"{prefix}-b")
            await until(lambda: m.owner.assigned == {TP(first, 0), TP(second, 0), TP(second, 1)},
                        what="new topic assigned", poll=[m])
    run(scenario())


def test_partitions_added_trigger_a_rebalance(gbroker):
    topic, group = make_topic(gbroker.bootstrap, 2), unique("g")

    async def scenario():
        m = Member(gbroker.bootstrap, group, [topic], metadata_max_age_ms=300)
        async with members(m):
            await until(lambda: len(m.owner.assigned) == 2, poll=[m])
            from minilog.connector.client import AdminClient
            with AdminClient({"bootstrap.servers": gbroker.bootstrap}) as admin:
                await asyncio.to_thread(admin.create_partitions, topic, 3)
            await until(lambda: len(m.owner.assigned) == 3, what="3 partitions", poll=[m])
    run(scenario())


def test_fenced_static_member_fails_loudly(gbroker):
    topic, group = make_topic(gbroker.bootstrap, 2), unique("g")

    async def scenario():
        a = Member(gbroker.bootstrap, group, [topic], group_instance_id="same")
        async with members(a):
            await until(lambda: len(a.owner.assigned) == 2, poll=[a])
            b = Member(gbroker.bootstrap, group, [topic], group_instance_id="same")
            async with members(b):
                await until(lambda: a.group._fatal is not None, what="a fenced", poll=[b])
                with pytest.raises(KafkaError, match="FENCED_INSTANCE_ID"):
                    await until(lambda: False, timeout=5, poll=[a])
                assert a.owner.events[-1] == ("lost", sorted(a.owner.events[0][1]))
                assert a.owner.assigned == set()
    run(scenario())


# ---- with other clients in the same group ---------------------------------------------------------
@pytest.mark.parametrize("we_lead", [True, False])
def test_confluent_members_accept_our_range_assignment_and_we_accept_theirs(gbroker, we_lead):
    topic, group = make_topic(gbroker.bootstrap, 4), unique("g")

    async def scenario():
        ours = Member(gbroker.bootstrap, group, [topic])
        with _Polling() as poller:
            if not we_lead:  # the first member to join leads the group
                poller.add(_confluent(gbroker.bootstrap, group, topic))
                await until(lambda: len(poller.assigned.get(0, ())) == 4, what="confluent alone")
            async with members(ours):
                if we_lead:
                    await until(lambda: len(ours.owner.assigned) == 4, poll=[ours])
                    poller.add(_confluent(gbroker.bootstrap, group, topic))
                await until(lambda: len(ours.owner.assigned) == 2 and
                            len(poller.assigned.get(0, ())) == 2,
                            what="2 + 2", timeout=30, poll=[ours])
                assert ours.owner.assigned.isdisjoint(poller.assigned[0])
                assert (ours.group.leader_id == ours.group.member_id) == we_lead
    run(scenario())


def test_kafka_python_member_shares_a_roundrobin_group_with_ours(gbroker):
    topic, group = make_topic(gbroker.bootstrap, 4), unique("g")

    async def scenario():
        ours = Member(gbroker.bootstrap, group, [topic],
                      partition_assignment_strategy="roundrobin")
        async with members(ours):
            await until(lambda: len(ours.owner.assigned) == 4, poll=[ours])
            kp = kafka.KafkaConsumer(
                topic, bootstrap_servers=gbroker.bootstrap, group_id=group,
                partition_assignment_strategy=[kafka.coordinator.assignors.roundrobin
                                               .RoundRobinPartitionAssignor],
                session_timeout_ms=SESSION_MS, heartbeat_interval_ms=500,
                enable_auto_commit=False)
            with _Polling(kp) as poller:
                await until(lambda: len(ours.owner.assigned) == 2 and
                            len(poller.assigned.get(0, ())) == 2, what="2 + 2", timeout=30,
                            poll=[ours])
                assert ours.owner.assigned.isdisjoint(poller.assigned[0])
    run(scenario())
