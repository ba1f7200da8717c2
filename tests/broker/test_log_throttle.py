"""Repeated problems are logged once per interval, and the next line counts the ones left out."""
from minilog.broker.storage.log_throttle import RepeatLimiter, repeats_note


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_the_first_occurrence_is_logged_and_repeats_within_the_interval_are_counted():
    clock = Clock()
    limiter = RepeatLimiter(60.0, clock)
    assert limiter.admit("disk full") == 0
    clock.now = 1.0
    assert [limiter.admit("disk full") for _ in range(5)] == [None] * 5
    clock.now = 61.0
    assert limiter.admit("disk full") == 5
    assert repeats_note(5, 60.0) == " (5 more like it in the last 60 s)"


def test_different_problems_are_limited_apart():
    limiter = RepeatLimiter(60.0, Clock())
    assert limiter.admit(("OSError", 28)) == 0
    assert limiter.admit(("OSError", 5)) == 0
    assert limiter.admit(("OSError", 28)) is None
    assert repeats_note(0, 60.0) == ""
