"""Streaming reads: micro-batches of offset ranges, with Spark's Kafka admission control.

Spark keeps one instance of this reader on the driver for the life of a query and checkpoints
the offsets it returns. Each micro-batch: `latestOffset(start, limit)` finds the partitions
read now (new partitions and new topics matching a pattern included), their log end offsets,
and caps them by maxOffsetsPerTrigger / maxBytesPerTrigger (the tighter wins) /
minOffsetsPerTrigger + maxTriggerDelay, and by the target fixed for `availableNow`; `partitions` turns the batch into offset ranges read on the
executors; `commit(end)` records the progress in the consumer group `commitOffsetsToGroup`
(by default `kafka.group.id`).
"""
import json
import time
import uuid

from pyspark.sql.datasource import DataSourceStreamReader
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadMaxBytes,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from minilog.connector.client import KafkaError

from . import clients
from .errors import OptionError
from .offsets import (
    check_moves,
    discover,
    from_json,
    list_offsets,
    log,
    rate_limit,
    resolve,
    to_json,
)
from .log_sizes import LogSizeMap, ends_within_bytes
from .reader import plan, read_range


class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options):
        self.options = options
        self._admin = None
        self._target = None         # availableNow: the offsets to stop at
        self._latest = None         # the log end offsets seen last, for query progress
        self._committed = None      # the group offsets committed last
        self._last_batch = time.monotonic()
        self._missing = set()       # the topics said to be missing, to say so once
        self._group_checked = False  # commit_group seen to have no members of its own
        self._sizes = LogSizeMap()   # maxBytesPerTrigger: bytes per offset range, learnt
        # Commit metadata saying a Spark query commits this group (the console shows it as
        # one): pyspark gives a Python reader no query id, so each run of a reader has its own.
        self._commit_metadata = json.dumps({"spark": {"source": "format(minilog)",
                                                      "reader": uuid.uuid4().hex[:12]}})

    @property
    def admin(self):
        if self._admin is None:
            self._admin = clients.admin(self.options.client)
        return self._admin

    def _discover(self):
        """The partitions read now. A subscribed topic that does not exist is waited for (a
        job may start before its input topic is created): said once, when first seen."""
        tps, missing = discover(self.admin, self.options)
        for t in sorted(set(missing) - self._missing):
            log.warning("Topic '%s' does not exist yet: the query reads it once it is created",
                        t)
        self._missing = set(missing)
        return tps

    def initialOffset(self):
        o = self.options
        self._check_commit_group()
        tps = self._discover()
        return to_json(resolve(self.admin, o.starting, tps, o))

    def getDefaultReadLimit(self):
        o = self.options
        if o.max_offsets_per_trigger is not None:
            return ReadMaxRows(o.max_offsets_per_trigger)
        if o.max_bytes_per_trigger is not None:
            return ReadMaxBytes(o.max_bytes_per_trigger)
        if o.min_offsets_per_trigger is not None:
            return ReadMinRows(o.min_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self):
        self._target = self._log_ends(self._discover())[1]

    def _log_ends(self, tps):
        return (list_offsets(self.admin, tps, "earliest"),
                list_offsets(self.admin, tps, "latest", self.options.isolation_level))

    def latestOffset(self, start, limit):
        o = self.options
        begin = from_json(start)
        # Spark calls this when it plans the next batch: `start` is then complete, so the
        # group gets it now (commit() never sees the last batch of an availableNow query).
        self._check_commit_group()
        self._commit_group(begin)
        tps = self._discover()
        if self._target is not None:
            tps = [tp for tp in tps if tp in self._target]
        earliest, latest = self._log_ends(tps)
        if self._max_bytes(limit) is not None:
            self._observe_sizes(earliest, latest)
        if self._target is not None:
            latest = {tp: min(off, self._target[tp]) for tp, off in latest.items()}
        self._latest = latest
        begin = check_moves(begin, latest, earliest, o.fail_on_data_loss)
        for tp in tps:  # partitions new to the query are read from their earliest offset
            begin.setdefault(tp, earliest[tp])
        end = self._admit(begin, latest, limit)
        if end == from_json(start):
            return start
        self._last_batch = time.monotonic()
        return to_json(end)

    def _max_bytes(self, limit):
        if isinstance(limit, ReadAllAvailable):
            return None
        return limit.max_bytes if isinstance(limit, ReadMaxBytes) else \
            self.options.max_bytes_per_trigger

    def _admit(self, begin, latest, limit):
        """The end offsets this batch may read, as the trigger's read limit allows: the
        tighter of maxOffsetsPerTrigger and maxBytesPerTrigger, partition by partition."""
        o = self.options
        if isinstance(limit, ReadAllAvailable):
            return dict(latest)
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else o.max_offsets_per_trigger
        min_rows = limit.min_rows if isinstance(limit, ReadMinRows) else o.min_offsets_per_trigger
        if min_rows is not None and self._target is None:
            available = sum(latest[tp] - begin[tp] for tp in latest)
            waited = time.monotonic() - self._last_batch
            if available < min_rows and waited < o.max_trigger_delay:
                return dict(begin)
        end = rate_limit(begin, latest, max_rows) if max_rows is not None else dict(latest)
        max_bytes = self._max_bytes(limit)
        by_bytes = None if max_bytes is None else \
            ends_within_bytes(begin, latest, max_bytes, self._sizes)
        return end if by_bytes is None else {tp: min(end[tp], by_bytes[tp]) for tp in end}

    def _observe_sizes(self, earliest, latest):
        """Each log's size now, with its ends (see log_sizes.py): one DescribeLogDirs per
        leader, answered from segment lengths (no data is read)."""
        tps = [tp for tp in latest if latest[tp] > earliest[tp]]
        if not tps:
            return
        try:
            sizes = self.admin.partition_sizes(tps)
        except KafkaError as e:
            raise OptionError("Option 'maxBytesPerTrigger' needs the partitions' sizes "
                              f"(DescribeLogDirs), which the cluster refused: {e}") from None
        for tp in tps:
            self._sizes.observe(tp, earliest[tp], latest[tp], sizes[tp])

    def reportLatestOffset(self):
        return None if self._latest is None else to_json(self._latest)

    def partitions(self, start, end):
        begin, stop = from_json(start), from_json(end)
        # Partitions new in this batch, and those whose log was re-created (data loss already
        # reported by latestOffset), are read from their earliest offset.
        fresh = [tp for tp, off in stop.items() if tp not in begin or begin[tp] > off]
        if fresh:
            begin.update(list_offsets(self.admin, fresh, "earliest"))
        return plan([(tp, begin[tp], off) for tp, off in stop.items()], self.options)

    def read(self, partition):
        return read_range(partition, self.options)

    def commit(self, end):
        self._commit_group(from_json(end))

    def _check_commit_group(self):
        """Refuse, once, to commit into a group that has members: its consumers' offsets would
        move under them (and the broker refuses commits from outside an active group)."""
        group = self.options.commit_group
        if group is None or self._group_checked:
            return
        found = self.admin.describe_groups([group]).get(group)
        if found is not None and found.members:
            raise OptionError(
                f"Consumer group '{group}' has {len(found.members)} active member(s) "
                f"({found.protocol_type or 'unknown'} protocol, state {found.state}): this "
                "query would move their offsets. Set the option commitOffsetsToGroup to a "
                "group of the query's own, or to false to commit nowhere (as Spark's Kafka "
                "source)")
        self._group_checked = True

    def _commit_group(self, position):
        """Record the query's progress in its consumer group, so Kafka tools show its lag."""
        group = self.options.commit_group
        if not group or not position or position == self._committed:
            return
        try:
            self.admin.alter_group_offsets(group, {tp: (offset, self._commit_metadata)
                                                   for tp, offset in position.items()})
            self._committed = dict(position)
        except Exception as e:  # noqa: BLE001 - progress is checkpointed; the group is a view
            log.warning("Could not commit the offsets of group %r: %s", group, e)

    def stop(self):
        if self._admin is not None:
            self._admin.close()
            self._admin = None


class RefusedStreamReader(DataSourceStreamReader):
    """A stream whose options were refused: the refusal is raised at the query's first call,
    alone, instead of from streamReader() (see MinilogDataSource.streamReader)."""

    def __init__(self, error):
        self.error = error

    def initialOffset(self):
        raise self.error

    def latestOffset(self, start=None, limit=None):
        raise self.error

    def getDefaultReadLimit(self):
        raise self.error

    def partitions(self, start, end):
        raise self.error

    def read(self, partition):
        raise self.error

    def stop(self):
        pass
