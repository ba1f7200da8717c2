"""`minilog groups ...` and `minilog consume --group` as a user runs them, checked against what
confluent-kafka reports independently (committed offsets, watermarks)."""
import time
import uuid

import confluent_kafka
import pytest
from brokers import MinilogBroker
from clitools import FAILED, USAGE, ok, one_line_error, run
from minilog.connector.client import Consumer, TopicPartition

pytestmark = pytest.mark.timeout(180)
FAST = ["-o", "group.initial.rebalance.delay.ms=0", "-o", "group.min.session.timeout.ms=1000"]
BASE_TS = 1_700_000_000_000


@pytest.fixture(scope="module")
def gbroker():
    b = MinilogBroker(extra=FAST).start()
    yield b
    b.cleanup()


def name(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def topic_with(bs, counts):
    """A topic whose partition p holds counts[p] records, record i stamped BASE_TS + 1000*i."""
    t = name("cg")
    ok("topics", "create", t, "--partitions", len(counts), "-b", bs)
    p = confluent_kafka.Producer({"bootstrap.servers": bs})
    for part, n in enumerate(counts):
        for i in range(n):
            p.produce(t, b"v%d" % i, partition=part, timestamp=BASE_TS + 1000 * i)
    assert p.flush(15) == 0
    return t


def table(text):
    """Rows of a `groups describe`-style table as dicts keyed by the header's columns."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    start = next(i for i, ln in enumerate(lines) if ln.startswith("GROUP "))
    header = lines[start].split()
    return [dict(zip(header, ln.split())) for ln in lines[start + 1:]]


def member(bs, group, topic, **extra):
    c = Consumer({"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", **extra})
    c.subscribe([topic])
    deadline = time.monotonic() + 20
    while not c.assignment():
        assert time.monotonic() < deadline, "no assignment"
        c.poll(0.2)
    return c


def confluent_view(bs, group, topic, partitions):
    """{partition: (committed offset or None, high watermark)} as confluent-kafka sees them."""
    c = confluent_kafka.Consumer({"bootstrap.servers": bs, "group.id": group})
    try:
        tps = [confluent_kafka.TopicPartition(topic, p) for p in partitions]
        committed = {tp.partition: (tp.offset if tp.offset >= 0 else None)
                     for tp in c.committed(tps, timeout=10)}
        return {p: (committed[p], c.get_watermark_offsets(
            confluent_kafka.TopicPartition(topic, p), timeout=10)[1]) for p in partitions}
    finally:
        c.close()


def test_describe_matches_lag_computed_independently(gbroker):
    bs, group = gbroker.bootstrap, name("g")
    topic = topic_with(bs, [30, 20, 10])
    c = member(bs, group, topic)
    try:
        c.commit({TopicPartition(topic, 0): 12, TopicPartition(topic, 1): 20})
        rows = table(ok("groups", "describe", group, "-b", bs))
        seen = confluent_view(bs, group, topic, [0, 1, 2])
        assert [r["PARTITION"] for r in rows] == ["0", "1", "2"]
        for r in rows:
            committed, high = seen[int(r["PARTITION"])]
            assert r["GROUP"] == group and r["TOPIC"] == topic
            assert r["LOG-END-OFFSET"] == str(high)
            assert r["CURRENT-OFFSET"] == ("-" if committed is None else str(committed))
            assert r["LAG"] == ("-" if committed is None else str(high - committed))
            assert r["CONSUMER-ID"] == c.memberid() and r["CLIENT-ID"] == "minilog"
            assert r["HOST"].endswith("127.0.0.1")
        assert [r["LAG"] for r in rows] == ["18", "0", "-"]
    finally:
        c.close()
    out = ok("groups", "describe", group, "-b", bs)
    assert f"Consumer group '{group}' has no active members." in out
    assert [(r["CURRENT-OFFSET"], r["CONSUMER-ID"]) for r in table(out)] == [("12", "-"),
                                                                          ("20", "-")]


def test_list_and_delete_groups(gbroker):
    bs, group = gbroker.bootstrap, name("g")
    topic = topic_with(bs, [3])
    c = member(bs, group, topic)
    try:
        c.commit()
        assert group in ok("groups", "list", "-b", bs).split()
        assert f"{group}\tStable" in ok("groups", "list", "--state", "-b", bs)
        assert "NON_EMPTY_GROUP" in one_line_error(run("groups", "delete", group, "-b", bs), FAILED)
    finally:
        c.close()
    assert ok("groups", "delete", group, "-b", bs) == f"Deleted consumer group {group}.\n"
    assert group not in ok("groups", "list", "-b", bs).split()
    assert "does not exist" in one_line_error(run("groups", "describe", group, "-b", bs), FAILED)


def test_reset_offsets_dry_run_then_execute(gbroker):
    bs, group = gbroker.bootstrap, name("g")
    topic = topic_with(bs, [10, 10])
    c = member(bs, group, topic)
    try:
        c.commit({TopicPartition(topic, 0): 7, TopicPartition(topic, 1): 3})
        refused = one_line_error(run("groups", "reset-offsets", group, "--topic", topic,
                                     "--to-earliest", "--execute", "-b", bs), FAILED)
        assert "inactive" in refused and "Stable" in refused
    finally:
        c.close()

    def new_offsets(*how):
        r = run("groups", "reset-offsets", group, "--topic", topic, *how, "-b", bs)
        assert r.returncode == 0, r.stderr.decode()
        return {int(row["PARTITION"]): int(row["NEW-OFFSET"]) for row in table(r.stdout.decode())}, \
            r.stderr.decode()

    got, err = new_offsets("--to-earliest")
    assert got == {0: 0, 1: 0} and "Dry run" in err
    assert {p: v[0] for p, v in confluent_view(bs, group, topic, [0, 1]).items()} == {0: 7, 1: 3}
    assert new_offsets("--shift-by", "-5")[0] == {0: 2, 1: 0}  # clamped to the log start
    assert new_offsets("--to-offset", "1000")[0] == {0: 10, 1: 10}  # clamped to the end
    assert new_offsets("--to-datetime", "2023-11-14T22:13:24Z")[0] == {0: 4, 1: 4}
    got, err = new_offsets("--to-latest", "--execute")
    assert got == {0: 10, 1: 10} and "Dry run" not in err
    assert {p: v[0] for p, v in confluent_view(bs, group, topic, [0, 1]).items()} == {0: 10, 1: 10}
    got, _ = new_offsets("--topic", f"{topic}:1", "--to-offset", "4", "--execute")
    assert got == {1: 4}
    assert {p: v[0] for p, v in confluent_view(bs, group, topic, [0, 1]).items()} == {0: 10, 1: 4}


def test_reset_offsets_usage_errors_are_one_line(gbroker):
    bs = gbroker.bootstrap
    assert "--topic" in one_line_error(run("groups", "reset-offsets", "g", "--to-earliest",
                                           "-b", bs), USAGE)
    assert "ISO 8601" in one_line_error(run("groups", "reset-offsets", "g", "--topic", "t",
                                            "--to-datetime", "yesterday", "-b", bs), USAGE)
    one_line_error(run("groups", "reset-offsets", "g", "--topic", "t", "--to-earliest",
                       "--to-latest", "-b", bs), USAGE)


def test_consume_with_a_group_resumes_where_the_last_run_stopped(gbroker):
    bs, group = gbroker.bootstrap, name("g")
    topic = topic_with(bs, [10])
    first = ok("consume", topic, "--group", group, "-c", 4, "-b", bs)
    assert first.split() == [f"v{i}" for i in range(4)]
    second = ok("consume", topic, "--group", group, "-c", 4, "-b", bs)
    assert second.split() == [f"v{i}" for i in range(4, 8)]
    rest = ok("consume", topic, "--group", group, "--exit", "-b", bs)
    assert rest.split() == ["v8", "v9"]
    rows = table(ok("groups", "describe", group, "-b", bs))
    assert [(r["CURRENT-OFFSET"], r["LAG"]) for r in rows] == [("10", "0")]
    err = one_line_error(run("consume", topic, "--group", group, "--offset", "3", "-b", bs), USAGE)
    assert "--group" in err


def test_describe_shows_a_kip848_groups_protocol_assignor_and_member_epochs(gbroker):
    bs, group = gbroker.bootstrap, name("g")
    topic = topic_with(bs, [2, 2, 2, 2])
    members = []
    try:
        for _ in range(2):  # polled below: a member revokes only inside its poll
            members.append(Consumer({"bootstrap.servers": bs, "group.id": group,
                                     "group.protocol": "consumer",
                                     "group.remote.assignor": "range"}))
            members[-1].subscribe([topic])
        def described():
            out = ok("groups", "describe", group, "-b", bs)
            return out if "state Stable" in out and out.count(f"{topic}:") == 2 else None
        deadline = time.monotonic() + 60
        while (out := described()) is None:
            assert time.monotonic() < deadline, "the group never settled"
            for c in members:
                c.poll(0.1)
        assert f"Consumer group '{group}': protocol consumer, assignor range, state Stable" in out
        lines = out.splitlines()
        header = next(i for i, ln in enumerate(lines) if ln.startswith("MEMBER-ID"))
        rows = {ln.split()[0]: ln.split()[1:] for ln in lines[header + 1:header + 3]}
        assert set(rows) == {c.memberid() for c in members}
        assert sorted(a for _, _, a in rows.values()) == [f"{topic}:0,1", f"{topic}:2,3"]  # range
        assert all(kind == "consumer" and int(epoch) > 0 for kind, epoch, _ in rows.values())
        assert {r["CONSUMER-ID"] for r in table(out)} == set(rows)
    finally:
        for c in members:
            c.close()


def test_groups_list_leaves_out_the_exactly_once_sinks_markers(gbroker):
    from sink_markers import make_sink_marker
    bs = gbroker.bootstrap
    t = topic_with(bs, [3])
    marker, plain = f"minilog-sink-{name('q')}-0", name("plain")
    make_sink_marker(bs, t, marker)
    ok("groups", "reset-offsets", plain, "--topic", t, "--to-offset", 1, "--execute", "-b", bs)
    listed = ok("groups", "list", "-b", bs).split()
    assert plain in listed and marker not in listed
    everything = ok("groups", "list", "--include-internal", "-b", bs).splitlines()
    assert f"{marker}\tinternal (exactly-once sink marker)" in everything
    assert plain in everything
