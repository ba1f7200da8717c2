"""The console holds a bounded number of broker connections however many group ids, topics
and records it is asked about: open files counted in /proc/PID/fd of the console and of the
broker, before and after hundreds of requests (each a new HTTP connection, as browsers and
scanners make them)."""
import os
import urllib.error
import urllib.request

import pytest
from confluent_kafka import Producer

pytestmark = pytest.mark.timeout(300)

REQUESTS = 300
SLACK = 8  # sockets a page may leave half-closed for a moment


def get(url):
    """(status, body) of a GET, errors included."""
    try:
        with urllib.request.urlopen(url, timeout=60) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_asking_for_hundreds_of_unknown_groups_opens_no_connections(broker, start_console):
    console = start_console(broker.bootstrap, "--lag-interval", "60")
    assert get(f"{console.url}/groups/warm-up")[0] == 404  # the pool's connections opened
    before = console.open_fds(), fds(broker.proc.pid)
    for i in range(REQUESTS):
        status, body = get(f"{console.url}/groups/no-such-group-{i}")
        assert status == 404, (i, status, body[:300])
    assert f"no-such-group-{REQUESTS - 1}" in body and "does not exist" in body
    after = console.open_fds(), fds(broker.proc.pid)
    assert after[0] - before[0] <= SLACK, f"console: {before[0]} -> {after[0]} open files"
    assert after[1] - before[1] <= SLACK, f"broker: {before[1]} -> {after[1]} open files"


def test_reading_records_again_and_again_opens_no_connections(broker, start_console):
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(20):
        producer.produce("browsed", value=b"record %d" % i)
    assert producer.flush(60) == 0
    console = start_console(broker.bootstrap, "--lag-interval", "60")
    url = f"{console.url}/topics/browsed/records?partition=0&offset=0&limit=5"
    assert "record 4" in get(url)[1]
    before = console.open_fds(), fds(broker.proc.pid)
    for _ in range(REQUESTS // 5):
        status, body = get(url)
        assert status == 200 and "record 4" in body
    after = console.open_fds(), fds(broker.proc.pid)
    assert after[0] - before[0] <= SLACK, f"console: {before[0]} -> {after[0]} open files"
    assert after[1] - before[1] <= SLACK, f"broker: {before[1]} -> {after[1]} open files"
