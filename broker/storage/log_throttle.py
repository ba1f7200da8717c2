"""Rate-limited repeats: the first occurrence of a problem is logged at once, the same problem
again within `interval` seconds only counted, and the next line says how many were left out.

A full disk refuses every produce request; one ERROR per request would bury everything else
in the log. Pure bookkeeping with an injectable clock: the caller logs.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Hashable


class RepeatLimiter:
    def __init__(self, interval: float = 60.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.interval, self._clock = interval, clock
        self._last: dict[Hashable, float] = {}
        self._suppressed: dict[Hashable, int] = {}

    def admit(self, key: Hashable) -> int | None:
        """None when this repeat of `key` is to be left out; else how many repeats of it were
        left out since it was last logged (0 the first time)."""
        now = self._clock()
        last = self._last.get(key)
        if last is not None and now - last < self.interval:
            self._suppressed[key] = self._suppressed.get(key, 0) + 1
            return None
        self._last[key] = now
        return self._suppressed.pop(key, 0)


def repeats_note(left_out: int, interval: float) -> str:
    """The suffix saying how many repeats a log line stands for."""
    return f" ({left_out} more like it in the last {interval:g} s)" if left_out else ""
