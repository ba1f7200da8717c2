"""Each consumer group's total lag over time, kept in memory for the console's lifetime.

A bounded series per viewer and group, sampled by the console at a fixed interval (and whenever a
group's page is rendered), drawn as an inline SVG polyline: no JavaScript, no chart library.
"""
from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

MAX_POINTS = 720  # an hour at one sample per 5 s


class LagHistory:
    """Series by viewer and group: a viewer is the principal the lag was read as (a logged-in
    user's name, None for the console's own settings), and is shown only its own series, so
    a page never shows a lag read with rights its viewer lacks."""

    def __init__(self, clock: Callable[[], float] = time.time, max_points: int = MAX_POINTS):
        self._clock = clock
        self._max = max_points
        self._series: dict[tuple[str | None, str], deque[tuple[float, int]]] = {}

    def record(self, viewer: str | None, group_id: str, lag: int) -> None:
        self._series.setdefault((viewer, group_id), deque(maxlen=self._max)).append(
            (self._clock(), lag))

    def points(self, viewer: str | None, group_id: str) -> list[tuple[float, int]]:
        return list(self._series.get((viewer, group_id), ()))

    def keep_only(self, viewers: set[str | None]) -> None:
        """Forget the series of viewers no longer sampled (logged out, expired)."""
        for key in [k for k in self._series if k[0] not in viewers]:
            del self._series[key]


def svg_chart(points: list[tuple[float, int]], width: int = 640, height: int = 160) -> str:
    """An SVG line chart of (time, lag) points, the axes labelled with the maximum lag and
    the time span; an empty chart says so."""
    if not points:
        return (f'<svg class="chart" width="{width}" height="{height}" role="img">'
                f'<text x="10" y="20">no samples yet</text></svg>')
    t0, t1 = points[0][0], points[-1][0]
    top = max(lag for _, lag in points) or 1
    span = (t1 - t0) or 1.0
    pad = 30

    def xy(t: float, lag: int) -> str:
        x = pad + (t - t0) / span * (width - 2 * pad)
        y = height - pad - lag / top * (height - 2 * pad)
        return f"{x:.1f},{y:.1f}"
    line = " ".join(xy(t, lag) for t, lag in points)
    return (f'<svg class="chart" width="{width}" height="{height}" role="img" '
            f'aria-label="lag history">'
            f'<line x1="{pad}" y1="{height - pad}" x2="{width - pad}" y2="{height - pad}" '
            f'stroke="#999"/><line x1="{pad}" y1="{pad}" x2="{pad}" y2="{height - pad}" '
            f'stroke="#999"/>'
            f'<text x="2" y="{pad}" font-size="11">{top}</text>'
            f'<text x="2" y="{height - pad}" font-size="11">0</text>'
            f'<text x="{width - pad - 60}" y="{height - 8}" font-size="11">'
            f'{t1 - t0:.0f} s, {len(points)} samples</text>'
            f'<polyline fill="none" stroke="#2b6cb0" stroke-width="2" points="{line}"/></svg>')
