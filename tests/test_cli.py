"""The `minilog` command line as a user runs it: real processes against real brokers."""
import subprocess
import time
import uuid

import pytest
from clitools import CLI, FAILED, USAGE, ok, one_line_error, run

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module", params=["minilog", "tansu"])
def server(request):
    b = request.getfixturevalue("broker" if request.param == "minilog" else "tansu")
    b.kind = request.param
    return b


def topic_name():
    return f"cli-{uuid.uuid4().hex[:8]}"


def test_topics_lifecycle(server):
    bs, name = server.bootstrap, topic_name()
    assert ok("topics", "create", name, "--partitions", 3, "-b", bs) == f"Created topic {name}.\n"
    assert name in ok("topics", "list", "-b", bs).split()
    desc = ok("topics", "describe", name, "-b", bs)
    assert f"Topic: {name}" in desc and "PartitionCount: 3" in desc
    assert desc.count("Partition: ") == 3 and "Leader: " in desc
    err = one_line_error(run("topics", "create", name, "-b", bs), FAILED)
    assert "TOPIC_ALREADY_EXISTS" in err
    ok("topics", "create", name, "--if-not-exists", "-b", bs)
    ok("topics", "delete", name, "-b", bs)
    assert name not in ok("topics", "list", "-b", bs).split()
    assert "UNKNOWN_TOPIC_OR_PARTITION" in one_line_error(run("topics", "delete", name, "-b", bs),
                                                          FAILED)
    ok("topics", "delete", name, "--if-exists", "-b", bs)


def test_topics_alter_partitions_and_configs(broker):
    bs, name = broker.bootstrap, topic_name()
    ok("topics", "create", name, "-p", 1, "-c", "retention.ms=60000", "-b", bs)
    assert "retention.ms=60000" in ok("topics", "describe", name, "-b", bs)
    ok("topics", "alter", name, "--partitions", 2, "--config", "retention.bytes=1000",
       "--delete-config", "retention.ms", "-b", bs)
    desc = ok("topics", "describe", name, "-b", bs)
    assert "PartitionCount: 2" in desc and "retention.bytes=1000" in desc
    assert "retention.ms" not in desc
    one_line_error(run("topics", "alter", name, "-b", bs), USAGE)


def test_produce_lines_then_consume_them_formatted(server):
    bs, name = server.bootstrap, topic_name()
    ok("topics", "create", name, "-p", 2, "-b", bs)
    lines = b"".join(b"user%d:hello %d\n" % (i % 3, i) for i in range(30))
    ok("produce", name, "--key-separator", ":", "-H", "source=cli", "-H", "v=1", "-b", bs,
       input=lines)
    out = ok("consume", name, "--from-beginning", "--exit", "-f", "%k=%s|%h|%p\\n", "-b", bs)
    got = out.splitlines()
    assert len(got) == 30
    assert sorted(line.split("|")[0] for line in got) == sorted(
        f"user{i % 3}=hello {i}" for i in range(30))
    assert all(line.split("|")[1] == "source=cli,v=1" for line in got)
    # keys stay on one partition each
    by_key = {}
    for line in got:
        by_key.setdefault(line.split("=")[0], set()).add(line.split("|")[2])
    assert all(len(parts) == 1 for parts in by_key.values())
    limited = ok("consume", name, "--from-beginning", "--max-messages", 5, "-b", bs)
    assert len(limited.splitlines()) == 5


def test_produce_a_file_to_one_partition_and_read_by_offset(tmp_path, broker):
    bs, name = broker.bootstrap, topic_name()
    ok("topics", "create", name, "-p", 2, "-b", bs)
    f = tmp_path / "records.txt"
    f.write_bytes(b"".join(b"line %d\n" % i for i in range(100)))
    ok("produce", name, "--file", f, "--partition", 1, "-b", bs)
    out = ok("consume", name, "-p", 1, "--offset", 95, "--exit", "-f", "%o %s\\n", "-b", bs)
    assert out.splitlines() == [f"{i} line {i}" for i in range(95, 100)]
    tail = ok("consume", name, "-p", 1, "--offset", -2, "--exit", "-b", bs)
    assert tail.splitlines() == ["line 98", "line 99"]
    assert ok("consume", name, "-p", 0, "--from-beginning", "--exit", "-b", bs) == ""
    table = ok("offsets", name, "-b", bs).splitlines()
    assert table[0].split() == ["TOPIC", "PARTITION", "EARLIEST", "LATEST"]
    assert table[1].split()[1:] == ["0", "0", "0"] and table[2].split()[1:] == ["1", "0", "100"]
    assert ok("offsets", name, "--latest", "-p", 1, "-b", bs) == f"{name}:1:100\n"


def test_consume_and_offsets_by_timestamp(broker):
    bs, name = broker.bootstrap, topic_name()
    ok("topics", "create", name, "-b", bs)
    ok("produce", name, "-b", bs, input=b"before\n")
    time.sleep(0.05)
    middle = int(time.time() * 1000)
    time.sleep(0.05)
    ok("produce", name, "-b", bs, input=b"after\n")
    assert ok("consume", name, "--timestamp", middle, "--exit", "-b", bs) == "after\n"
    assert ok("offsets", name, "--timestamp", middle, "-b", bs) == f"{name}:0:1\n"


def test_unreachable_broker_is_one_line_and_quick():
    # Quick: done before the client's own deadlines (max.block.ms, request.timeout.ms) could
    # have run out, so it did not wait for them; the process is killed (failing) if it does.
    slow = ["-X", "max.block.ms=600000", "-X", "request.timeout.ms=600000"]
    err = one_line_error(run("topics", "list", "--bootstrap-server", "127.0.0.1:1", *slow,
                             timeout=120), FAILED)
    assert "cannot reach the cluster" in err and "127.0.0.1:1" in err
    one_line_error(run("consume", "x", "-b", "127.0.0.1:1"), FAILED)
    one_line_error(run("produce", "x", "-b", "127.0.0.1:1", input=b"a\n"), FAILED)


def test_unknown_topic_is_one_line(server):
    missing = topic_name()
    err = one_line_error(run("consume", missing, "--exit", "-b", server.bootstrap), FAILED)
    assert missing in err and "does not exist" in err
    one_line_error(run("topics", "describe", missing, "-b", server.bootstrap), FAILED)
    one_line_error(run("offsets", missing, "-b", server.bootstrap), FAILED)


def test_bad_flags_and_settings_are_one_line():
    one_line_error(run("consume"), USAGE)
    one_line_error(run("consume", "t", "--bogus"), USAGE)
    one_line_error(run("topics", "frobnicate"), USAGE)
    one_line_error(run("consume", "t", "--offset", "ten"), USAGE)
    err = one_line_error(run("-X", "linger.m=5", "topics", "list"), USAGE)
    assert "did you mean 'linger.ms'" in err
    one_line_error(run("topics", "list", "-X", "request.timeout.ms=soon"), USAGE)
    one_line_error(run("consume", "t", "-f", "%q"), USAGE)


@pytest.mark.parametrize("command", [[], ["topics"], ["topics", "create"], ["topics", "list"],
                                     ["topics", "describe"], ["topics", "alter"],
                                     ["topics", "delete"], ["produce"], ["consume"],
                                     ["offsets"], ["broker", "start"]])
def test_help_on_every_command(command):
    r = run(*command, "--help")
    assert r.returncode == 0 and b"usage: minilog" in r.stdout, r.stderr


def test_progress_bar_when_producing_a_file_on_a_terminal(tmp_path, broker):
    import os
    import pty
    bs, name = broker.bootstrap, topic_name()
    ok("topics", "create", name, "-b", bs)
    f = tmp_path / "big.txt"
    f.write_bytes(b"x" * 100 + b"\n" * 1 + b"".join(b"row %d\n" % i for i in range(5000)))
    master, slave = pty.openpty()
    try:
        r = subprocess.run([*CLI, "produce", name, "--file", str(f), "-b", bs], check=False,
                           stderr=slave,
                           stdout=subprocess.PIPE, timeout=60)
        os.close(slave)
        shown = b""
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            shown += chunk
    finally:
        os.close(master)
    assert r.returncode == 0
    assert b"100%" in shown and b"5,001 records" in shown
    assert ok("offsets", name, "--latest", "-b", bs) == f"{name}:0:5001\n"



def test_consume_help_says_where_consuming_starts_as_it_does(broker):
    """Without a flag: at the end; a new group: at the earliest, --from-beginning or not."""
    bs, name = broker.bootstrap, topic_name()
    ok("topics", "create", name, "-b", bs)
    ok("produce", name, "-b", bs, input=b"one\ntwo\n")
    assert ok("consume", name, "--exit", "-b", bs) == ""
    group = f"new-{uuid.uuid4().hex[:8]}"
    assert ok("consume", name, "--group", group, "--exit", "-b", bs).split() == ["one", "two"]
    text = " ".join(ok("consume", "--help").split())
    assert "start at the earliest offset (default: at the end, new records only; with --group " \
           "a new group starts at the earliest anyway)" in text, text
    assert "a new group (no committed offset) starts at the earliest" in text, text
