"""kcat (Debian's `kcat`, librdkafka underneath), a client we did not write, against a real
minilog broker: metadata, produce with every codec and with idempotence, headers, consume,
offsets by time, a consumer group, and offset queries. Skipped where kcat is not installed
(`apt-get install kcat`; CI installs it)."""
import shutil
import subprocess
import time
import uuid

import pytest
from clitools import ok

KCAT = shutil.which("kcat")
pytestmark = [pytest.mark.skipif(KCAT is None,
                                 reason="kcat is not installed (apt-get install kcat)"),
              pytest.mark.timeout(300)]


def kcat(broker, *args, input=None):
    r = subprocess.run([KCAT, "-b", broker.bootstrap, *map(str, args)], input=input,
                       capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 0, r.stderr
    return r.stdout


def topic(broker, partitions=1):
    name = f"kcat-{uuid.uuid4().hex[:8]}"
    ok("-b", broker.bootstrap, "topics", "create", name, "--partitions", partitions)
    return name


def test_metadata_lists_the_broker_and_the_topic(broker):
    name = topic(broker, 3)
    listed = kcat(broker, "-L", "-t", name)
    assert "1 brokers:" in listed and f'topic "{name}" with 3 partitions' in listed, listed


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_produce_with_each_codec_and_headers_reads_back_identically(broker, codec):
    name = topic(broker)
    lines = [f"k{i}:value {i}" for i in range(50)]
    kcat(broker, "-P", "-t", name, "-z", codec, "-K", ":", "-H", "source=kcat",
         input="\n".join(lines) + "\n")
    got = ok("-b", broker.bootstrap, "consume", name, "--from-beginning", "--exit",
             "-f", "%k:%s %h\\n")
    assert got.splitlines() == [f"{line} source=kcat" for line in lines]


def test_idempotent_produce_then_consume_with_kcat(broker):
    name = topic(broker)
    kcat(broker, "-P", "-t", name, "-X", "enable.idempotence=true",
         input="".join(f"r{i}\n" for i in range(100)))
    got = kcat(broker, "-C", "-t", name, "-e", "-f", "%o %s\\n")
    assert got.splitlines() == [f"{i} r{i}" for i in range(100)]


def test_consume_from_a_time_and_query_offsets_by_time(broker):
    name = topic(broker)
    ok("-b", broker.bootstrap, "produce", name, input=b"before\n")
    time.sleep(0.05)
    middle = int(time.time() * 1000)
    time.sleep(0.05)
    ok("-b", broker.bootstrap, "produce", name, input=b"after\n")
    assert kcat(broker, "-C", "-t", name, "-o", f"s@{middle}", "-e", "-f", "%s\\n") == "after\n"
    queried = kcat(broker, "-Q", "-t", f"{name}:0:{middle}")
    assert "offset 1" in queried, queried


def test_a_kcat_consumer_group_commits_what_it_read(broker):
    name, group = topic(broker, 2), f"kcat-group-{uuid.uuid4().hex[:6]}"
    ok("-b", broker.bootstrap, "produce", name, input="".join(f"r{i}\n" for i in range(40))
       .encode())
    got = kcat(broker, "-G", group, "-X", "auto.offset.reset=earliest", "-e", "-f", "%s\\n",
               name)
    assert sorted(got.split()) == sorted(f"r{i}" for i in range(40))
    described = ok("-b", broker.bootstrap, "groups", "describe", group)
    rows = [line.split() for line in described.splitlines() if line.startswith(group)]
    assert sum(int(r[3]) for r in rows) == 40 and all(r[5] == "0" for r in rows), described
