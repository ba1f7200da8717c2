"""How many bytes a range of offsets holds, learnt from the log sizes seen at each trigger.

Kafka answers a partition's size in bytes (DescribeLogDirs) but not the position of an offset.
Each trigger sees both ends of every log and its size, so the bytes between two log ends seen
at different triggers are exactly the growth of the size between them (while nothing left the
front of the log). The map keeps those points per partition, `(offset, bytes from the log
start)`, and interpolates between them: data that arrived while the query ran is measured
batch by batch, the backlog found at the start by its average. A log whose start moved
(retention, DeleteRecords) starts a new map. This is what `maxBytesPerTrigger` is bounded by.
"""
import bisect
import math

Tp = tuple[str, int]


class LogSizeMap:
    def __init__(self) -> None:
        self._start: dict[Tp, int] = {}                    # log start offset of each map
        self._points: dict[Tp, list[tuple[int, int]]] = {}  # (offset, bytes from log start)

    def observe(self, tp: Tp, log_start: int, log_end: int, size: int) -> None:
        points = self._points.get(tp)
        if points is None or self._start[tp] != log_start or log_end < points[-1][0] or \
                size < points[-1][1]:
            self._start[tp], self._points[tp] = log_start, [(log_start, 0), (log_end, size)]
        elif log_end == points[-1][0]:
            points[-1] = (log_end, size)   # same end, batch headers rewritten (markers)
        else:
            points.append((log_end, size))

    def position(self, tp: Tp, offset: int) -> float:
        """Estimated bytes from the log start to `offset`."""
        points = self._points.get(tp)
        if not points:
            return 0.0
        i = bisect.bisect_left(points, (offset, -1))
        if i < len(points) and points[i][0] == offset:
            return float(points[i][1])
        if i == 0:
            return 0.0
        if i == len(points):
            return float(points[-1][1])
        (o1, b1), (o2, b2) = points[i - 1], points[i]
        return b1 + (b2 - b1) * (offset - o1) / (o2 - o1)

    def bytes_between(self, tp: Tp, start: int, end: int) -> float:
        return max(0.0, self.position(tp, end) - self.position(tp, start))


def ends_within_bytes(start: dict, latest: dict, max_bytes: int,
                               sizes: LogSizeMap) -> dict | None:
    """End offsets that read about `max_bytes`, each partition the same fraction of what it
    has available (Spark's proportional rule for maxOffsetsPerTrigger), or None when all that
    is available fits. The bound is soft, as the file source's maxBytesPerTrigger: it rests on
    estimates, and a batch reads at least one record (the query moves on however large a
    record is)."""
    avail = {tp: max(0, latest[tp] - start.get(tp, latest[tp])) for tp in latest}

    def ends(fraction: float) -> dict:
        return {tp: start.get(tp, latest[tp]) + math.floor(n * fraction)
                for tp, n in avail.items()}

    def cost(end: dict) -> float:
        return sum(sizes.bytes_between(tp, start.get(tp, latest[tp]), end[tp]) for tp in end)

    if cost(dict(latest)) <= max_bytes:
        return None
    lo, hi = 0.0, 1.0
    for _ in range(40):  # bisection: the cost grows with the fraction
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if cost(ends(mid)) <= max_bytes else (lo, mid)
    end = ends(lo)
    if end == {tp: start.get(tp, latest[tp]) for tp in latest}:
        first = max(avail, key=avail.get)
        end[first] += 1
    return end
