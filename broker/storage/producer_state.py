"""Idempotent-producer state of one partition, as Kafka's ProducerStateManager keeps it.

For each producer id the broker remembers its epoch and its last five batches (sequence range and
the offsets they were written at). That is enough to answer a retried batch with the offsets of
the original write instead of writing it twice (a producer keeps at most five requests in
flight), to reject a sequence gap, and to fence a producer whose epoch was superseded.

State must survive restarts: `snapshot(offset)` writes it at a log offset (the log does so at
every segment roll and at close), `load()` reads the newest valid snapshot, and
`rebuild_from(log, offset)` replays batch headers written after it, so an unclean shutdown loses
nothing either. For transactions it also keeps, per producer, the first offset of its open
transaction (`txn_first_offset`): the smallest of them is the partition's first unstable offset,
which bounds the last stable offset; a commit or abort marker (`end_transaction`) closes it.

Markers are checked as Kafka's ProducerAppendInfo checks them (`check_marker`): each producer
remembers the coordinator epoch of its last marker here, and a marker of an older coordinator
epoch (a deposed coordinator delivering late) or of an older producer epoch is refused, since
it would otherwise close whatever transaction the producer has open now.
"""
import os
import struct
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from minilog.connector import _kernel

SNAPSHOT_SUFFIX = ".snapshot"
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INVALID_PRODUCER_EPOCH = 47
TRANSACTION_COORDINATOR_FENCED = 52
NO_PRODUCER_ID = -1
NO_SEQUENCE = -1
INT32_MAX = 0x7FFFFFFF
BATCHES_RETAINED = 5  # Kafka's max.in.flight.requests.per.connection limit for idempotence

_ERROR_NAMES = {OUT_OF_ORDER_SEQUENCE_NUMBER: "OUT_OF_ORDER_SEQUENCE_NUMBER",
                INVALID_PRODUCER_EPOCH: "INVALID_PRODUCER_EPOCH",
                TRANSACTION_COORDINATOR_FENCED: "TRANSACTION_COORDINATOR_FENCED"}
_MAGIC = b"MLPS"
_HEAD = struct.Struct(">4sBqi")       # magic, version, snapshot offset, producer count
_PRODUCER = struct.Struct(">qhqB")    # producer id, epoch, last timestamp, batch count
_TXN = struct.Struct(">q")            # version 2: the open transaction's first offset, or -1
_TXN_V3 = struct.Struct(">qi")        # version 3: ... and the last marker's coordinator epoch
_BATCH = struct.Struct(">iiqq")       # first seq, last seq, first offset, last offset
_CRC = struct.Struct(">I")


class ProducerStateError(Exception):
    """A batch the producer state rejects; `code` is the Kafka error code to answer with."""

    def __init__(self, code, message):
        super().__init__(f"{_ERROR_NAMES.get(code, code)}: {message}")
        self.code = code
        self.name = _ERROR_NAMES.get(code, str(code))


def next_sequence(sequence, increment=1):
    """`sequence + increment` wrapping past int32 max to 0, as producers number batches."""
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


@dataclass
class ProducerEntry:
    producer_id: int
    epoch: int
    last_timestamp: int = -1
    batches: deque = field(default_factory=lambda: deque(maxlen=BATCHES_RETAINED))
    txn_first_offset: int = -1
    coordinator_epoch: int = -1  # of the last marker written for this producer

    @property
    def last_sequence(self):
        return self.batches[-1][1] if self.batches else NO_SEQUENCE

    def copy(self):
        return ProducerEntry(self.producer_id, self.epoch, self.last_timestamp,
                             deque(self.batches, maxlen=BATCHES_RETAINED), self.txn_first_offset,
                             self.coordinator_epoch)

    def with_epoch(self, epoch: int, timestamp: int = -1) -> "ProducerEntry":
        """A fresh entry for a new producer epoch: batches start over, while the open
        transaction and the coordinator epoch stay (Kafka's ProducerStateEntry keeps them)."""
        return ProducerEntry(self.producer_id, epoch, timestamp,
                             txn_first_offset=self.txn_first_offset,
                             coordinator_epoch=self.coordinator_epoch)


def _check(entry, producer_id, epoch, first_seq, last_seq):
    if entry is None:
        # KIP-360: a producer with no state here (new, expired, or its batches all deleted by
        # retention or DeleteRecords) may continue at any sequence, as Kafka accepts it.
        return None
    if epoch < entry.epoch:
        raise ProducerStateError(INVALID_PRODUCER_EPOCH,
                                 f"producer {producer_id} epoch {epoch} is older than {entry.epoch}")
    if epoch > entry.epoch:
        if first_seq != 0:
            raise ProducerStateError(OUT_OF_ORDER_SEQUENCE_NUMBER,
                                     f"producer {producer_id} new epoch {epoch} starts at {first_seq}")
        return None
    for b_first, b_last, o_first, o_last in entry.batches:
        if b_first == first_seq and b_last == last_seq:
            return ("duplicate", o_first, o_last)
    expected = next_sequence(entry.last_sequence)
    if first_seq != expected:
        raise ProducerStateError(OUT_OF_ORDER_SEQUENCE_NUMBER,
                                 f"producer {producer_id} sent sequence {first_seq}, expected {expected}")
    return None


def _update(entry, producer_id, epoch, first_seq, last_seq, first_offset, last_offset, timestamp,
            transactional=False):
    if entry is None:
        entry = ProducerEntry(producer_id, epoch)
    elif epoch != entry.epoch:
        entry = entry.with_epoch(epoch)
    if transactional and entry.txn_first_offset < 0:
        entry.txn_first_offset = first_offset
    entry.batches.append((first_seq, last_seq, first_offset, last_offset))
    entry.last_timestamp = max(entry.last_timestamp, timestamp)
    return entry


class ProducerAppend:
    """Checks and updates of one log append, applied to the manager only by `commit()`.

    Batches of one append are checked in order against the state including the earlier ones,
    and nothing changes if the write fails before `commit()`.
    """

    def __init__(self, manager):
        self._manager = manager
        self._staged = {}

    def _entry(self, producer_id):
        if producer_id in self._staged:
            return self._staged[producer_id]
        return self._manager._producers.get(producer_id)

    def check(self, producer_id, producer_epoch, base_sequence, last_sequence):
        return _check(self._entry(producer_id), producer_id, producer_epoch, base_sequence, last_sequence)

    def update(self, producer_id, producer_epoch, first_seq, last_seq, first_offset, last_offset,
               timestamp=-1, transactional=False):
        entry = self._entry(producer_id)
        if entry is not None and producer_id not in self._staged:
            entry = entry.copy()
        self._staged[producer_id] = _update(entry, producer_id, producer_epoch, first_seq, last_seq,
                                            first_offset, last_offset, timestamp, transactional)

    def commit(self):
        self._manager._producers.update(self._staged)
        if not self._manager.transactional:
            self._manager.transactional = any(e.txn_first_offset >= 0
                                              for e in self._staged.values())
        self._staged = {}


class ProducerStateManager:
    """Producer id -> ProducerEntry for one partition, with snapshots in the partition dir."""

    def __init__(self, dir):
        self.dir = Path(dir)
        self._producers = {}
        # whether any transaction was seen: until then the first unstable offset costs nothing
        self.transactional = False

    @property
    def producers(self):
        """Read-only view: producer id -> ProducerEntry."""
        return dict(self._producers)

    def entry(self, producer_id):
        return self._producers.get(producer_id)

    def check(self, producer_id, producer_epoch, base_sequence, last_sequence):
        """Validate a batch before it is written.

        Returns None when the batch is new and in sequence, ("duplicate", first_offset,
        last_offset) when it repeats one of the producer's last five batches, and raises
        ProducerStateError for a gap (45) or an old epoch (47). A producer without state
        starts at any sequence (KIP-360). Non-idempotent batches
        (producer id -1) always pass.
        """
        if producer_id == NO_PRODUCER_ID:
            return None
        return _check(self._producers.get(producer_id), producer_id, producer_epoch,
                      base_sequence, last_sequence)

    def update(self, producer_id, producer_epoch, first_seq, last_seq, first_offset, last_offset,
               timestamp=-1, transactional=False):
        """Record a batch written at [first_offset, last_offset]. No validation (replay, replicas)."""
        if producer_id == NO_PRODUCER_ID:
            return
        self._producers[producer_id] = _update(self._producers.get(producer_id), producer_id,
                                               producer_epoch, first_seq, last_seq, first_offset,
                                               last_offset, timestamp, transactional)
        self.transactional |= transactional

    def update_from_header(self, h):
        """Replay one stored data batch header (offsets already assigned); markers go through
        `end_transaction`, since only their record says commit or abort."""
        if h.producer_id == NO_PRODUCER_ID or h.is_control:
            return
        if h.base_sequence == NO_SEQUENCE and h.is_transactional:
            self.begin_transaction(h.producer_id, h.producer_epoch, h.base_offset, h.max_timestamp)
            return
        self.update(h.producer_id, h.producer_epoch, h.base_sequence,
                    next_sequence(h.base_sequence, h.last_offset_delta), h.base_offset, h.last_offset,
                    h.max_timestamp, h.is_transactional)

    def check_epoch(self, producer_id, epoch):
        """Raise ProducerStateError (INVALID_PRODUCER_EPOCH) for an epoch older than known."""
        entry = self._producers.get(producer_id)
        if entry is not None and epoch < entry.epoch:
            raise ProducerStateError(INVALID_PRODUCER_EPOCH,
                                     f"producer {producer_id} epoch {epoch} is older than {entry.epoch}")

    def begin_transaction(self, producer_id, epoch, first_offset, timestamp=-1):
        """A transactional batch without sequence numbers (a coordinator writes those) at
        `first_offset`: it opens the producer's transaction here if none is open."""
        entry = self._producers.get(producer_id)
        if entry is None or epoch > entry.epoch:
            entry = self._producers[producer_id] = ProducerEntry(producer_id, epoch, timestamp) \
                if entry is None else entry.with_epoch(epoch, timestamp)
        if entry.txn_first_offset < 0:
            entry.txn_first_offset = first_offset
        entry.last_timestamp = max(entry.last_timestamp, timestamp)
        self.transactional = True

    def check_marker(self, producer_id: int, epoch: int, coordinator_epoch: int) -> None:
        """Refuse a marker before it is written, as Kafka's ProducerAppendInfo does: a producer
        epoch older than the producer's (INVALID_PRODUCER_EPOCH), or a coordinator epoch older
        than that of the last marker written for it (TRANSACTION_COORDINATOR_FENCED: a deposed
        coordinator's marker would end the producer's next transaction). Replicas and log
        recovery do not check: the leader did."""
        self.check_epoch(producer_id, epoch)
        entry = self._producers.get(producer_id)
        if entry is not None and coordinator_epoch < entry.coordinator_epoch:
            raise ProducerStateError(
                TRANSACTION_COORDINATOR_FENCED,
                f"marker of producer {producer_id} from coordinator epoch {coordinator_epoch}, "
                f"older than {entry.coordinator_epoch}")

    def end_transaction(self, producer_id, epoch, coordinator_epoch=-1, timestamp=-1):
        """A commit or abort marker of `producer_id` was written: return the first offset of
        the transaction it closes (-1 if none was open). The marker's epoch fences older ones,
        and its coordinator epoch becomes the one `check_marker` holds the next markers to."""
        entry = self._producers.get(producer_id)
        if entry is None:
            entry = self._producers[producer_id] = ProducerEntry(producer_id, epoch, timestamp)
        first, entry.txn_first_offset = entry.txn_first_offset, -1
        entry.coordinator_epoch = coordinator_epoch
        if epoch > entry.epoch:
            entry.epoch = epoch
            entry.batches.clear()
        entry.last_timestamp = max(entry.last_timestamp, timestamp)
        return first

    def first_unstable_offset(self):
        """The first offset of the oldest open transaction, or None."""
        if not self.transactional:
            return None
        firsts = [e.txn_first_offset for e in self._producers.values() if e.txn_first_offset >= 0]
        return min(firsts) if firsts else None

    def open_transactions(self):
        """[(producer id, epoch, first offset)] of the transactions open in this partition."""
        return [(e.producer_id, e.epoch, e.txn_first_offset) for e in self._producers.values()
                if e.txn_first_offset >= 0]

    def stage(self):
        return ProducerAppend(self)

    def remove_expired(self, now_ms, max_age_ms=86_400_000):
        """Forget producers idle for producer.id.expiration.ms (Kafka default 1 day).

        Idle is judged as Kafka's ProducerStateManager does, by the max timestamp of the
        producer's last batch, so a producer backfilling old timestamps is forgotten at each
        check; it goes on writing all the same, since a producer without state may continue
        at any sequence (KIP-360)."""
        expired = [pid for pid, e in self._producers.items()
                   if now_ms - e.last_timestamp >= max_age_ms and e.txn_first_offset < 0]
        for pid in expired:
            del self._producers[pid]
        return len(expired)

    def clear(self):
        self._producers.clear()

    # -- snapshots ----------------------------------------------------------------------------

    def snapshot_offsets(self):
        out = []
        for p in self.dir.glob("*" + SNAPSHOT_SUFFIX):
            stem = p.name[:-len(SNAPSHOT_SUFFIX)]
            if len(stem) == 20 and stem.isdigit():
                out.append(int(stem))
        return sorted(out)

    def _path(self, offset):
        return self.dir / f"{offset:020d}{SNAPSHOT_SUFFIX}"

    def snapshot(self, offset, sync=True):
        """Write the state as of log offset `offset` (atomically: temp file, fsync, rename).

        With `sync` False the fsync is left to the caller (`sync_snapshot`, off the event
        loop): on ext4 an fsync commits the journal, which waits for every dirty page of the
        file system, hundreds of milliseconds after a segment's worth of appends. A snapshot
        torn by a crash fails its checksum at load and an older one is replayed from instead.
        """
        parts = [_HEAD.pack(_MAGIC, 3, offset, len(self._producers))]
        for e in self._producers.values():
            parts.append(_PRODUCER.pack(e.producer_id, e.epoch, e.last_timestamp, len(e.batches)))
            parts.append(_TXN_V3.pack(e.txn_first_offset, e.coordinator_epoch))
            parts.extend(_BATCH.pack(*b) for b in e.batches)
        body = b"".join(parts)
        path = self._path(offset)
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "wb") as f:
            f.write(body + _CRC.pack(_kernel.crc32c(body)))
            f.flush()
            if sync:
                os.fsync(f.fileno())
        os.replace(tmp, path)
        return path

    @staticmethod
    def sync_snapshot(path):
        """fsync a snapshot written with `sync=False` (gone meanwhile: nothing to do)."""
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def load(self):
        """Replace the state with the newest valid snapshot; return its offset, or None.

        Unreadable snapshots (bad checksum, torn) are deleted and the next older one is tried.
        """
        self._producers = {}
        for offset in reversed(self.snapshot_offsets()):
            path = self._path(offset)
            try:
                self._producers = self._parse(path.read_bytes(), offset)
                self.transactional |= any(e.txn_first_offset >= 0
                                          for e in self._producers.values())
                return offset
            except (ValueError, struct.error, OSError):
                path.unlink(missing_ok=True)
        return None

    @staticmethod
    def _parse(data, offset):
        if len(data) < _HEAD.size + _CRC.size:
            raise ValueError("snapshot too short")
        body, (crc,) = data[:-_CRC.size], _CRC.unpack_from(data, len(data) - _CRC.size)
        if _kernel.crc32c(body) != crc:
            raise ValueError("snapshot checksum mismatch")
        magic, version, snap_offset, count = _HEAD.unpack_from(body, 0)
        if magic != _MAGIC or version not in (1, 2, 3) or snap_offset != offset:
            raise ValueError("not a producer state snapshot for this offset")
        pos, producers = _HEAD.size, {}
        for _ in range(count):
            pid, epoch, last_ts, n = _PRODUCER.unpack_from(body, pos)
            pos += _PRODUCER.size
            entry = ProducerEntry(pid, epoch, last_ts)
            if version >= 3:
                entry.txn_first_offset, entry.coordinator_epoch = _TXN_V3.unpack_from(body, pos)
                pos += _TXN_V3.size
            elif version == 2:
                (entry.txn_first_offset,) = _TXN.unpack_from(body, pos)
                pos += _TXN.size
            for _ in range(n):
                entry.batches.append(_BATCH.unpack_from(body, pos))
                pos += _BATCH.size
            producers[pid] = entry
        if pos != len(body):
            raise ValueError("trailing bytes in snapshot")
        return producers

    def truncate_snapshots_after(self, offset):
        """Delete snapshots taken beyond `offset` (the log end after recovery or truncation)."""
        for o in self.snapshot_offsets():
            if o > offset:
                self._path(o).unlink(missing_ok=True)

    def delete_snapshots_before(self, offset):
        """Delete snapshots older than `offset`, always keeping the newest one."""
        offsets = self.snapshot_offsets()
        for o in offsets[:-1]:
            if o < offset:
                self._path(o).unlink(missing_ok=True)

    def delete_all_snapshots(self):
        for o in self.snapshot_offsets():
            self._path(o).unlink(missing_ok=True)

    def rebuild_from(self, log, from_offset, on_marker=None):
        """Replay the producer fields of every batch header in `log` from `from_offset` on;
        transaction markers go to `on_marker(header)`, which reads what they say."""
        for h in log.iter_batch_headers(from_offset):
            if h.last_offset < from_offset:
                continue
            if h.is_control and h.producer_id != NO_PRODUCER_ID and on_marker is not None:
                on_marker(h)
            else:
                self.update_from_header(h)
