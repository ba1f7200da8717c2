"""clickstream, run as a user runs it (main() with --trigger available-now) against a real
broker: each closed minute is written once with its views per page, views that arrive after
their window closed are dropped and the job says how many, the open minute stays unwritten."""
import json

import pytest
from sparktools import consume_all, create_topic, minute, produce, unique, utc

from minilog.jobs import clickstream

# One partition, three views per micro-batch: the batches, and so the watermark, are known.
# A batch's watermark is the latest event time of the batches before it, less 1 minute; it
# closes the minutes that end before it. A view is dropped when its minute was closed by an
# earlier batch: the views of a batch that closes their minute are still counted.
VIEWS = [
    ("/home", "10:00:05"), ("/home", "10:00:30"), ("/cart", "10:00:50"),
    ("/home", "10:01:10"), ("/cart", "10:01:20"), ("/home", "10:03:30"),
    # this batch's watermark, 10:02:30, closes minutes 10:00 and 10:01: they are written
    ("/cart", "10:02:45"), ("/about", "10:03:00"), ("/cart", "10:03:10"),
    ("/home", "10:00:40"), ("/cart", "10:01:59"),  # their minutes written: dropped
    ("/home", "10:02:10"),                          # behind the watermark, minute still open
    ("/home", "10:30:00"),  # far ahead: the last batch closes 10:02 and 10:03, 10:30 stays open
]
LATE = 2
WRITTEN = {  # (minute, page): views
    ("10:00", "/home"): 2, ("10:00", "/cart"): 1,
    ("10:01", "/home"): 1, ("10:01", "/cart"): 1,
    ("10:02", "/home"): 1, ("10:02", "/cart"): 1,
    ("10:03", "/home"): 1, ("10:03", "/about"): 1, ("10:03", "/cart"): 1,
}


@pytest.fixture(scope="module")
def pageviews(broker):
    topic = create_topic(broker.bootstrap, unique("pageviews"), 1)
    produce(broker.bootstrap, topic, [
        (0, None, json.dumps({"page": page, "user": f"u{i % 3}", "ts": utc(t)}).encode(), None)
        for i, (page, t) in enumerate(VIEWS)])
    return topic


def test_closed_minutes_are_written_once_and_late_views_counted(spark, broker, pageviews,
                                                                 tmp_path, capsys):
    out = create_topic(broker.bootstrap, unique("pageviews.per-minute"), 1)
    assert clickstream.main([
        "--bootstrap-servers", broker.bootstrap, "--checkpoint", str(tmp_path),
        "--trigger", "available-now", "--max-offsets-per-trigger", "3",
        "--pageviews-topic", pageviews, "--per-minute-topic", out]) == 0
    got = [(key.decode(), json.loads(value))  # in the order written
           for _, _, key, value, _ in consume_all(broker.bootstrap, out, 1)]
    # minutes 10:00 and 10:01 were closed, and written, by an earlier batch than the others
    assert {v["window_start"] for _, v in got[:4]} == {minute("10:00")[0], minute("10:01")[0]}
    expected = [(page, {"window_start": minute(m)[0], "window_end": minute(m)[1],
                        "page": page, "views": n}) for (m, page), n in WRITTEN.items()]
    key = lambda kv: (kv[1]["window_start"], kv[0])  # noqa: E731
    assert sorted(got, key=key) == sorted(expected, key=key)
    assert f"late page views dropped (past the watermark): {LATE}\n" in capsys.readouterr().out
