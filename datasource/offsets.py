"""Offsets on the driver: which partitions a query reads, where each range starts and ends.

An offset, as Spark checkpoints it, is `{"topic": {"partition": offset}}` (JSON keys are
strings), the format of Spark's Kafka source. Inside this package a position is a dict
`{(topic, partition): offset}`; `to_json`/`from_json` convert, always in sorted order so that
equal positions serialise to equal JSON.
"""
import logging
import math

from minilog.connector.client import ErrorCode, KafkaError

from .errors import OptionError
from .options import EARLIEST, LATEST

log = logging.getLogger("minilog.datasource")


class UnknownTopicError(RuntimeError):
    """A batch read names topics that do not exist."""


class DataLossError(RuntimeError):
    """Offsets a query should read are gone (retention, a deleted topic) and failOnDataLoss
    is true."""


def to_json(position):
    out = {}
    for (topic, partition), offset in sorted(position.items()):
        out.setdefault(topic, {})[str(partition)] = int(offset)
    return out


def from_json(offsets):
    return {(topic, int(p)): int(o) for topic, parts in (offsets or {}).items()
            for p, o in parts.items()}


def discover(admin, options):
    """(the topic partitions the query reads now, sorted; the subscribed or assigned topics
    that do not exist): the partitions of subscribed topics, of topics the pattern matches
    anywhere in their name (Spark's `topicRegex.findFirstIn(name)`, a search: `pat` matches
    `xpat-a`; not internal ones), or the assigned partitions, of the topics that exist."""
    topics = admin.describe_topics()
    if options.strategy == "assign":
        missing = sorted(t for t in options.topics if t not in topics)
        return sorted((t, p) for t, parts in options.topics.items() if t in topics
                      for p in parts), missing
    if options.strategy == "subscribe":
        names = [t for t in options.topics if t in topics]
        missing = [t for t in options.topics if t not in topics]
    else:
        names = [t for t, d in topics.items()
                 if not d.internal and options.topics.search(t)]
        missing = []
    return sorted((t, p.partition) for t in names for p in topics[t].partitions), missing


def missing_topics_error(missing):
    """A batch read of topics that do not exist fails, as Spark's does (its describeTopics
    call fails), naming them."""
    return UnknownTopicError("; ".join(
        f"Topic '{t}' does not exist: create it, or check the name given to subscribe/assign"
        for t in missing))


def list_offsets(admin, tps, spec, isolation_level="read_uncommitted"):
    """{tp: offset} for "earliest" / "latest" / a timestamp (None: no record at or after it).
    "latest" under read_committed is the last stable offset: a range planned up to it holds
    no record of an open transaction."""
    if not tps:
        return {}
    found = admin.list_offsets({tp: spec for tp in tps}, isolation_level)
    return {(tp.topic, tp.partition): (None if ot is None else ot.offset)
            for tp, ot in found.items()}


def resolve(admin, spec, tps, options):
    """The concrete offsets of `spec` (an OffsetSpec) for `tps`."""
    if not tps:
        return {}
    level = options.isolation_level
    if spec.kind in ("earliest", "latest"):
        return list_offsets(admin, tps, spec.kind, level)
    if spec.kind == "offsets":
        missing = [tp for tp in tps if tp not in spec.value]
        if missing:
            raise OptionError(
                "Offsets given for specific partitions must name every partition read: "
                f"{', '.join(f'{t}-{p}' for t, p in missing)} missing (use -2 for earliest, "
                "-1 for latest)")
        marks = {EARLIEST: "earliest", LATEST: "latest"}
        out = {tp: spec.value[tp] for tp in tps}
        for mark, name in marks.items():
            wanted = [tp for tp, o in out.items() if o == mark]
            out.update(list_offsets(admin, wanted, name, level))
        return out
    if spec.kind in ("timestamp", "timestamps"):
        if spec.kind == "timestamps":
            missing = [tp for tp in tps if tp not in spec.value]
            if missing:
                raise OptionError("Timestamps given for specific partitions must name every "
                                  f"partition read: {', '.join(f'{t}-{p}' for t, p in missing)}"
                                  " missing")
        out, latest = {}, None
        for tp in tps:
            ts = spec.value if spec.kind == "timestamp" else spec.value[tp]
            out[tp] = list_offsets(admin, [tp], ts, level)[tp]
            if out[tp] is None:
                if spec.on_no_match != "latest":
                    raise OptionError(f"No offset of {tp[0]}-{tp[1]} has a timestamp at or "
                                      f"after {ts} (set startingOffsetsByTimestampStrategy to "
                                      "'latest' to start at the end instead)")
                latest = latest or list_offsets(admin, tps, "latest", level)
                out[tp] = latest[tp]
        return out
    if spec.kind == "group":
        committed = admin.list_group_offsets(options.group_id, tps)
        out = {(tp.topic, tp.partition): om.offset for tp, om in committed.items()
               if om is not None and om.offset >= 0}
        rest = [tp for tp in tps if tp not in out]
        if rest:
            reset = str(options.client.get("auto.offset.reset", "latest")).lower()
            if reset == "none":
                raise OptionError(f"Group '{options.group_id}' has no committed offset for "
                                  f"{', '.join(f'{t}-{p}' for t, p in rest)} and "
                                  "auto.offset.reset is none")
            out.update(list_offsets(admin, rest, reset, level))
        return out
    raise AssertionError(spec)


def rate_limit(start, latest, max_rows):
    """End offsets reading at most `max_rows` in all, shared among partitions in proportion
    to what each has available (Spark's rule), the remainder going to the largest shares."""
    avail = {tp: max(0, latest[tp] - start.get(tp, latest[tp])) for tp in latest}
    total = sum(avail.values())
    if total <= max_rows:
        return dict(latest)
    shares = {tp: max_rows * n / total for tp, n in avail.items()}
    take = {tp: math.floor(s) for tp, s in shares.items()}
    left = max_rows - sum(take.values())
    for tp in sorted(shares, key=lambda tp: take[tp] - shares[tp])[:left]:
        take[tp] += 1
    return {tp: start.get(tp, latest[tp]) + take[tp] for tp in latest}


def split_ranges(ranges, min_partitions=None, max_records=None):
    """[(tp, start, end)] cut so that there are at least `min_partitions` pieces (large ranges
    cut the most, as Spark's KafkaOffsetRangeCalculator does) and none holds more than
    `max_records` offsets."""
    ranges = [r for r in ranges if r[2] > r[1]]
    total = sum(e - s for _, s, e in ranges)
    out = []
    for tp, s, e in ranges:
        parts = 1
        if min_partitions and len(ranges) < min_partitions and total:
            parts = max(1, math.ceil((e - s) * min_partitions / total))
        if max_records:
            parts = max(parts, math.ceil((e - s) / max_records))
        step = (e - s) / parts
        cuts = [s + round(i * step) for i in range(parts)] + [e]
        out += [(tp, a, b) for a, b in zip(cuts, cuts[1:]) if b > a]
    return out


def check_moves(start, latest, earliest, fail_on_data_loss):
    """Positions that went backwards or below the log start (a topic deleted and re-created,
    records removed by retention) and partitions that vanished are data loss: raise, or warn
    and restart those partitions at their earliest offset. Returns the corrected start."""
    fixed = dict(start)
    problems = []
    for tp, offset in start.items():
        if tp not in latest:
            problems.append(f"{tp[0]}-{tp[1]} no longer exists (offset {offset} was next)")
            del fixed[tp]
        elif offset > latest[tp]:
            problems.append(f"{tp[0]}-{tp[1]}: offset {offset} is past the log end "
                            f"{latest[tp]} (the topic was re-created?)")
            fixed[tp] = earliest[tp]
        elif offset < earliest[tp]:
            problems.append(f"{tp[0]}-{tp[1]}: offsets {offset} to {earliest[tp] - 1} were "
                            "deleted before they were read")
            fixed[tp] = earliest[tp]
    if problems:
        report_data_loss("; ".join(problems), fail_on_data_loss)
    return fixed


def report_data_loss(message, fail_on_data_loss):
    if fail_on_data_loss:
        raise DataLossError(f"Data loss: {message}. Some data may have been lost because it "
                            "is not available any more (retention, or a deleted topic). Set "
                            "the option failOnDataLoss to false to skip it instead.")
    log.warning("Data loss, skipped because failOnDataLoss is false: %s", message)


def is_out_of_range(exc):
    return isinstance(exc, KafkaError) and exc.code == ErrorCode.OFFSET_OUT_OF_RANGE
