"""The web console in a real browser (Debian's headless Chromium through selenium) against a
real three-broker cluster: what a person would see on each page, checked against the cluster
itself (`minilog groups describe`, kill -9 of a broker). Screenshots of every page go to
CONSOLE_SCREENSHOTS (default: the test's temporary directory)."""
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from brokers import free_port, wait_for_port
from clustertools import TestCluster, wait_for
from confluent_kafka import Producer
from consoletools import NEEDS_CHROMIUM, text_of

from minilog.connector.client import AdminClient

pytestmark = [NEEDS_CHROMIUM, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def shots(tmp_path_factory):
    where = Path(os.environ.get("CONSOLE_SCREENSHOTS") or tmp_path_factory.mktemp("screenshots"))
    where.mkdir(parents=True, exist_ok=True)
    return where


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = TestCluster(3, tmp_path_factory.mktemp("cluster"), {}).start()
    yield c
    c.destroy()


@pytest.fixture(scope="module")
def console(cluster, tmp_path_factory):
    """`minilog -b BOOTSTRAP console` as a user starts it; its base URL."""
    port = free_port()
    log = tmp_path_factory.mktemp("console") / "console.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "minilog.connector.cli", "-b",
                                 cluster.bootstrap, "console", "--listen", f"127.0.0.1:{port}",
                                 "--lag-interval", "1"], stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        wait_for_port(port, 60, proc)
        yield f"http://127.0.0.1:{port}"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


def shown(browser, url, css, predicate, what):
    """Load `url` until the text of `css` satisfies `predicate`; that text."""
    def check():
        browser.get(url)
        found = text_of(browser, css)
        return found if predicate(found) else None
    return wait_for(check, what, interval=1.0)


def produce(cluster, topic, values):
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for v in values:
        producer.produce(topic, value=v, partition=0, headers=[("source", b"browser-test")])
    assert producer.flush(60) == 0


def describe_lag(cluster, group):
    """The LAG column of `minilog groups describe` for partition 0."""
    run = subprocess.run([sys.executable, "-m", "minilog.connector.cli", "-b", cluster.bootstrap,
                          "groups", "describe", group], capture_output=True, text=True,
                         timeout=60, check=True)
    header, *rows = [line.split() for line in run.stdout.splitlines() if line.startswith(("GROUP", group))]
    return next(row[header.index("LAG")] for row in rows if row[2] == "0")


def test_a_groups_lag_is_the_number_groups_describe_prints(cluster, console, browser, shots):
    cluster.create_topic("payments", partitions=2, rf=3)
    produce(cluster, "payments", [b'{"id": %d, "amount": 5}' % i for i in range(25)])
    with AdminClient({"bootstrap.servers": cluster.bootstrap}) as admin:
        admin.alter_group_offsets("auditors", {("payments", 0): 10}, timeout=30)
    expected = describe_lag(cluster, "auditors")
    assert expected == "15"
    lag = shown(browser, f"{console}/groups/auditors", "#lag-payments-0 .lag",
                lambda t: t == expected, "the console to show the lag groups describe prints")
    assert text_of(browser, "#total-lag") == lag
    browser.save_screenshot(str(shots / "console-group.png"))
    shown(browser, f"{console}/groups", "#group-auditors .lag", lambda t: t == expected,
          "the groups page to show the same lag")
    browser.save_screenshot(str(shots / "console-groups.png"))


def test_a_group_committed_by_a_spark_query_is_shown_as_one(cluster, console, browser):
    """format("minilog") commits with metadata naming itself (datasource/stream.py)."""
    cluster.create_topic("clicks", partitions=1, rf=3)
    spark = json.dumps({"spark": {"source": "format(minilog)", "reader": "5f3a"}})
    with AdminClient({"bootstrap.servers": cluster.bootstrap}) as admin:
        admin.alter_group_offsets("a-spark-query", {("clicks", 0): (0, spark)}, timeout=30)
        admin.alter_group_offsets("plain-consumers", {("clicks", 0): 0}, timeout=30)
    shown(browser, f"{console}/groups", "#groups", lambda t: "plain-consumers" in t,
          "both groups listed")
    assert "Spark query" in text_of(browser, "#group-a-spark-query")
    assert "Spark query" not in text_of(browser, "#group-plain-consumers")


def partition_size(cluster, topic, partition):
    """The partition's size as kafka-python's DescribeLogDirs reads it (the largest replica's:
    the leader's, which the console asks)."""
    from kafka import KafkaAdminClient
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        answers = admin.describe_log_dirs()
    finally:
        admin.close()
    return max(p["partition_size"] for b in answers for d in b["log_dirs"] for t in d["topics"]
               if t["name"] == topic for p in t["partitions"]
               if p["partition_index"] == partition)


def test_the_record_browser_pretty_prints_json_with_headers(cluster, console, browser, shots):
    cluster.create_topic("receipts", partitions=1, rf=3)
    produce(cluster, "receipts", [b'{"id": 7, "items": ["tea"]}'])
    value = shown(browser, f"{console}/topics/receipts/records?partition=0&offset=0",
                  "#records pre.value", lambda t: '"items"' in t, "the record on its page")
    assert value.splitlines()[0] == "{" and '  "id": 7,' in value.splitlines()
    assert "source: browser-test" in text_of(browser, "#records")
    browser.save_screenshot(str(shots / "console-records.png"))
    size = shown(browser, f"{console}/topics/receipts", "#partition-0 td.size",
                 lambda t: t.endswith(" B"), "the partition's size on the topic page")
    assert int(size[:-2].replace(",", "")) == partition_size(cluster, "receipts", 0) > 0


def test_creating_a_topic_asks_for_confirmation_first(cluster, console, browser, shots):
    from selenium.webdriver.common.by import By
    browser.get(f"{console}/topics")
    browser.find_element(By.NAME, "name").send_keys("invoices")
    browser.find_element(By.NAME, "partitions").clear()
    browser.find_element(By.NAME, "partitions").send_keys("2")
    browser.find_element(By.CSS_SELECTOR, "form[action='/change'] button").click()
    assert "create topic invoices with 2 partition(s)" in text_of(browser, "#what")
    assert "invoices" not in AdminClient({"bootstrap.servers": cluster.bootstrap}).list_topics()
    browser.find_element(By.ID, "confirm").click()
    wait_for(lambda: "/topics/invoices" in browser.current_url, "the new topic's page")
    wait_for(lambda: len(browser.find_elements(
        By.CSS_SELECTOR, "#partitions tr[id^=partition-]")) == 2, "the new topic's 2 partitions")


def test_a_killed_broker_shows_as_down_and_its_partitions_as_under_replicated(
        cluster, console, browser, shots):
    cluster.create_topic("ledger", partitions=3, rf=3)
    shown(browser, f"{console}/", "#broker-3", lambda t: "up" in t, "broker 3 up")
    browser.save_screenshot(str(shots / "console-overview.png"))
    cluster.broker(3).kill()
    try:
        shown(browser, f"{console}/", "#broker-3", lambda t: "down" in t,
              "broker 3 shown as down after kill -9")
        count = shown(browser, f"{console}/", "#under-replicated-count",
                      lambda t: int(t) > 0, "under-replicated partitions flagged")
        assert "under-replicated" in text_of(browser, "#attention")
        browser.save_screenshot(str(shots / "console-broker-down.png"))
        assert int(count) >= 3  # every ledger partition had a replica on broker 3
        shown(browser, f"{console}/topics/ledger", "#partitions",
              lambda t: "under-replicated" in t, "the topic page to flag its partitions")
    finally:
        cluster.broker(3).start()
    shown(browser, f"{console}/", "#broker-3", lambda t: "up" in t, "broker 3 up again")


def test_the_record_browser_opens_on_the_newest_records_across_partitions(cluster, console,
                                                                          browser, shots):
    """Partition 0 empty, partition 2 holding 500 records: the page opens on partition 2's
    newest, each time in ISO 8601 with the raw epoch milliseconds on hover."""
    from selenium.webdriver.common.by import By
    cluster.create_topic("sparse", partitions=3, rf=3)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    base = 1_795_000_000_000  # 2026-11-18T11:06:40Z
    for i in range(500):
        producer.produce("sparse", value=b"r%d" % i, partition=2, timestamp=base + i)
    assert producer.flush(60) == 0
    shown(browser, f"{console}/topics/sparse/records", "#records",
          lambda t: "r499" in t, "the newest record of partition 2")
    rows = browser.find_elements(By.CSS_SELECTOR, "#records tr[id^=record-]")
    assert len(rows) == 50 and rows[0].get_attribute("id") == "record-2-450"
    last = browser.find_element(By.CSS_SELECTOR, "#record-2-499 td.time time")
    assert last.text == "2026-11-18T11:06:40.499Z"
    assert last.get_attribute("title") == str(base + 499)
    browser.save_screenshot(str(shots / "console-records-newest.png"))


def test_the_exactly_once_sinks_marker_groups_are_listed_apart_as_internal(cluster, console,
                                                                           browser):
    from sink_markers import make_sink_marker
    cluster.create_topic("sunk", partitions=1, rf=3)
    make_sink_marker(cluster.bootstrap, "sunk", "minilog-sink-q1-0")
    with AdminClient({"bootstrap.servers": cluster.bootstrap}) as admin:
        admin.alter_group_offsets("readers-of-sunk", {("sunk", 0): 0}, timeout=30)
    shown(browser, f"{console}/groups", "#groups", lambda t: "readers-of-sunk" in t,
          "the plain group listed")
    assert "minilog-sink-q1-0" not in text_of(browser, "#groups")
    assert "1 internal group(s)" in text_of(browser, "#internal-groups")
    browser.get(f"{console}/groups/minilog-sink-q1-0")
    assert "internal" in text_of(browser, "#internal")
