"""Which of a log's oldest segments go: retention.ms, retention.bytes and DeleteRecords.

Apart from `log.py` because these are decisions over the segment list (Kafka's
UnifiedLog.deleteOldSegments and its retention predicates), checkable without deleting
anything; `Log` applies them, deleting the prefix they name and moving its start offset.
"""
from collections.abc import Callable, Iterator, Sequence

from .log_config import LogConfig
from .segment import LogSegment

# (segment, base offset of the segment after it, or the log end) -> True if it may go.
Rule = Callable[[LogSegment, int], bool]


def below(log_start: Callable[[], int]) -> Rule:
    """Segments wholly below the log start offset (DeleteRecords): they go whatever the policy."""
    return lambda seg, next_base: next_base <= log_start()


def retention_rules(config: LogConfig, now_ms: int, log_size: Callable[[], int]) -> Iterator[Rule]:
    """The time rule, then the size rule, as Kafka applies them when cleanup.policy includes
    "delete": a segment whose largest timestamp is older than retention.ms, then the oldest
    segments while the log stays above retention.bytes. Lazy: the size rule measures the log
    (`log_size`) once the time rule's segments are gone."""
    if "delete" not in config.cleanup_policy.split(","):
        return
    if config.retention_ms >= 0:
        yield lambda seg, _: now_ms - seg.largest_timestamp > config.retention_ms
    if config.retention_bytes >= 0:
        excess = log_size() - config.retention_bytes

        def over_size(seg: LogSegment, _: int) -> bool:
            nonlocal excess
            if excess - seg.size < 0:
                return False
            excess -= seg.size
            return True
        yield over_size


def deletable_prefix(segments: Sequence[LogSegment], bases: Sequence[int], log_end: int,
                     rule: Rule, upper_bound: int | None = None, keep_active: bool = False) -> int:
    """How many of the oldest segments `rule` deletes: it stops at the first segment that must
    stay, never passes `upper_bound` (the high watermark), and keeps the active segment if
    `keep_active` or if it is empty."""
    n, k = len(segments), 0
    while k < n:
        seg, last = segments[k], k == n - 1
        next_base = log_end if last else bases[k + 1]
        if (last and (keep_active or seg.size == 0)) or \
                (upper_bound is not None and next_base > upper_bound) or not rule(seg, next_base):
            break
        k += 1
    return k
