"""Habits Kafka users bring to `minilog`: kafka-console-consumer's `--group --from-beginning`,
no abbreviated flags, and errors that name their subject once. Real processes, a real broker."""
import uuid

import pytest
from brokers import MinilogBroker
from clitools import FAILED, USAGE, ok, one_line_error, run

pytestmark = pytest.mark.timeout(180)
FAST = ["-o", "group.initial.rebalance.delay.ms=0"]


@pytest.fixture(scope="module")
def fast_groups():
    b = MinilogBroker(extra=FAST).start()
    yield b
    b.cleanup()


def unique(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_from_beginning_with_a_group_applies_where_it_has_no_committed_offset(fast_groups):
    bs, topic, group = fast_groups.bootstrap, unique("habits"), unique("g")
    ok("topics", "create", topic, "-p", 2, "-b", bs)
    ok("produce", topic, "-b", bs, input=b"a\nb\nc\nd\n")
    first = ok("consume", topic, "--group", group, "--from-beginning", "--exit", "-b", bs)
    assert sorted(first.split()) == ["a", "b", "c", "d"]
    ok("produce", topic, "-b", bs, input=b"e\nf\n")
    # the group has committed offsets now: they win over --from-beginning
    again = ok("consume", topic, "--group", group, "--from-beginning", "--exit", "-b", bs)
    assert sorted(again.split()) == ["e", "f"]


def test_from_beginning_contradicting_auto_offset_reset_is_one_line(fast_groups):
    err = one_line_error(run("consume", "t", "--group", "g", "--from-beginning",
                             "-X", "auto.offset.reset=latest", "-b", fast_groups.bootstrap), USAGE)
    assert "auto.offset.reset=latest" in err


@pytest.mark.parametrize("args, flag", [
    (["topics", "create", "{topic}", "--partition", "3"], "--partition"),
    (["consume", "{topic}", "--from-beg", "--exit"], "--from-beg"),
    (["groups", "reset-offsets", "g", "--topic", "{topic}", "--to-earl"], "--to-"),
    (["demo", "--transact", "10", "--accounts", "2"], "--transact"),
    (["broker", "start", "--list", "127.0.0.1:0", "--data-dir", "{tmp}"], "--list"),
])
def test_abbreviated_flags_are_refused_in_one_line(fast_groups, tmp_path, args, flag):
    # each would do something real if the abbreviation were taken (create a topic, consume,
    # run the demo against this broker, start a broker): exit 2 proves it was refused
    bs, topic = fast_groups.bootstrap, unique("abbrev")
    ok("topics", "create", topic, "-b", bs)
    args = [a.format(topic=topic, tmp=tmp_path) for a in args]
    bootstrap = [] if args[0] == "broker" else \
        ["--bootstrap-server", bs] if args[0] == "demo" else ["-b", bs]
    err = one_line_error(run(*args, *bootstrap, timeout=60), USAGE)
    assert flag in err


def test_an_abbreviated_global_flag_is_refused(fast_groups):
    one_line_error(run("--bootstrap", fast_groups.bootstrap, "topics", "list"), USAGE)


def test_errors_name_their_subject_once(fast_groups):
    bs, topic = fast_groups.bootstrap, unique("subject")
    ok("topics", "create", topic, "-b", bs)
    err = one_line_error(run("topics", "create", topic, "-b", bs), FAILED)
    assert err == f"minilog: TOPIC_ALREADY_EXISTS (36): topic '{topic}' already exists\n"
    err = one_line_error(run("topics", "delete", unique("missing"), "-b", bs), FAILED)
    assert err.count("'subject-") == 0 and err.count("'missing-") == 1, err
    err = one_line_error(run("topics", "alter", topic, "--partitions", 1, "-b", bs), FAILED)
    assert err.count(f"'{topic}'") == 1, err
