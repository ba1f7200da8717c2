"""log_aggregation, run as a user runs it (main() with --trigger available-now) against a real
broker: `logs.per-minute` ends with each minute's count per service and level as they changed
batch after batch, a line for an already closed minute is dropped from the counts, and
`alerts` holds every ERROR line unchanged, in order, late ones included."""
import json
from collections import Counter

import pytest
from sparktools import consume_all, create_topic, latest_by_key, minute, produce, unique, utc

from minilog.jobs import log_aggregation

# One partition, four lines per micro-batch: the batches, and so the watermark, are known.
LINES = [
    ("10:00:01", "api", "INFO"), ("10:00:10", "api", "ERROR"), ("10:00:20", "db", "WARN"),
    ("10:00:40", "api", "info"),
    ("10:00:50", "api", "INFO"), ("10:01:05", "db", "ERROR"), ("10:01:15", "api", "INFO"),
    ("10:01:30", "db", "ERROR"),
    ("10:01:45", "api", "ERROR"), ("10:02:00", "api", "INFO"), ("10:02:20", "db", "INFO"),
    ("10:10:00", "api", "INFO"),  # far ahead: the next batch closes minutes 10:00 to 10:02
    ("10:10:05", "db", "INFO"), ("10:10:10", "api", "WARN"), ("10:10:20", "api", "INFO"),
    ("10:10:30", "db", "INFO"),
    ("10:00:30", "api", "ERROR"),  # minute 10:00 closed by an earlier batch: not counted
    ("10:10:40", "api", "ERROR"),
]
LATE = {16}


def value(i, line):
    ts, service, level = line
    return json.dumps({"ts": utc(ts), "service": service, "level": level,
                       "message": f"line {i}"}).encode()


@pytest.fixture(scope="module")
def logs(broker):
    topic = create_topic(broker.bootstrap, unique("logs"), 1)
    produce(broker.bootstrap, topic, [(0, None, value(i, line), None)
                                      for i, line in enumerate(LINES)])
    return topic


def expected_counts():
    """An independent fold of LINES: {key: value} of the counted lines' minutes."""
    counts = Counter((ts[:5], service, level.upper())
                     for i, (ts, service, level) in enumerate(LINES) if i not in LATE)
    out = {}
    for (hhmm, service, level), n in counts.items():
        start, end = minute(hhmm)
        out[f"{service}/{level}/{start}"] = {"window_start": start, "window_end": end,
                                            "service": service, "level": level, "lines": n}
    return out


def test_counts_per_minute_and_error_lines_forwarded(spark, broker, logs, tmp_path, capsys):
    per_minute = create_topic(broker.bootstrap, unique("logs.per-minute"), 1,
                              {"cleanup.policy": "compact"})
    alerts = create_topic(broker.bootstrap, unique("alerts"), 1)
    assert log_aggregation.main([
        "--bootstrap-servers", broker.bootstrap, "--checkpoint", str(tmp_path),
        "--trigger", "available-now", "--max-offsets-per-trigger", "4", "--logs-topic", logs,
        "--per-minute-topic", per_minute, "--alerts-topic", alerts]) == 0

    errors = [(line[1].encode(), value(i, line))
              for i, line in enumerate(LINES) if line[2] == "ERROR"]
    got = consume_all(broker.bootstrap, alerts, 1)
    assert [(key, v) for _, _, key, v, _ in got] == errors

    expected = expected_counts()
    got = consume_all(broker.bootstrap, per_minute, 1)
    assert latest_by_key(got) == expected
    assert len(got) > len(expected)  # counts written again as they changed
    assert f"late log lines dropped (past the watermark): {len(LATE)}\n" in capsys.readouterr().out
