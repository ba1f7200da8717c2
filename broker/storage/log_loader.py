"""Opening a partition directory: what a crash left behind is cleaned up or recovered.

Kafka's LogLoader, for `Log`'s constructor: finish or undo an interrupted compaction swap,
delete temporary files and orphan indexes, open the segments, and recover (CRC-check batch by
batch, cut at the first invalid one, rebuild indexes) those that may hold unflushed data or
whose indexes contradict their log. Also the small checkpoint files a log keeps (log start
offset, recovery point), written atomically.
"""
import os
import threading

from minilog.connector.batch import HEADER_SIZE, read_header

from .segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, segment_file

CLEANED_SUFFIX = ".cleaned"  # a cleaner's output being written: discarded by a restart
SWAP_SUFFIX = ".swap"        # complete output replacing segments: finished by a restart


def load_segments(dir, clean_shutdown, recovery_point, now_ms, open_segment, empty_log_base):
    """([LogSegment] in offset order, bytes recovery cut off) of the directory `dir`.

    After an unclean shutdown the segments holding offsets from `recovery_point` on (and at
    least the last non-empty one) are recovered; any segment whose indexes contradict its log
    or whose tail is torn is recovered in any case. `open_segment(base, existing)` opens (or
    creates) one segment; `empty_log_base()` is where a log with no segment at all starts.
    """
    complete_interrupted_swap(dir)
    bases = []
    for p in dir.iterdir():
        stem, suffix = p.name[:20], p.name[20:]
        if not (len(p.name) > 20 and stem.isdigit()):
            continue
        if suffix == LOG_SUFFIX:
            bases.append(int(stem))
        elif suffix.endswith(".tmp"):
            p.unlink(missing_ok=True)  # an interrupted atomic write
    bases.sort()
    for p in dir.glob("*.checkpoint.*.tmp"):  # a checkpoint write cut short
        p.unlink(missing_ok=True)  # or one finishing now: gone is as good
    known = set(bases)
    for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):  # left behind by an interrupted delete
        for p in dir.glob("*" + suffix):
            stem = p.name[:-len(suffix)]
            if len(stem) == 20 and stem.isdigit() and int(stem) not in known:
                p.unlink()
    segments = [open_segment(b, True) for b in bases]
    recovered = 0
    last_data = max((i for i, s in enumerate(segments) if s.size), default=0)
    for i, seg in enumerate(segments):
        unflushed = seg.next_offset > recovery_point or i >= last_data
        if seg.problem is not None or (not clean_shutdown and unflushed):
            cut = seg.recover()
            recovered += cut
            if cut and i + 1 < len(segments):
                # Everything after a torn batch was written after it: drop it too, as Kafka
                # does, rather than leave a hole in the offsets.
                for later in segments[i + 1:]:
                    recovered += later.size
                    later.delete()
                del segments[i + 1:]
                break
    # An empty segment left past a tail that recovery cut (a crash just after a roll)
    # would put the log end beyond the data: drop it.
    while len(segments) > 1 and segments[-1].size == 0 and \
            segments[-1].base_offset > segments[-2].next_offset:
        segments.pop().delete()
    if not segments:
        segments = [open_segment(empty_log_base(), False)]
    return segments, recovered


def complete_interrupted_swap(dir):
    """Undo a cleaning that never reached `.swap`; finish one that did (see
    `Log.replace_segments`)."""
    for p in dir.glob("*" + CLEANED_SUFFIX):
        p.unlink()
    for swap in sorted(dir.glob("*" + LOG_SUFFIX + SWAP_SUFFIX)):
        base = end = int(swap.name[:20])
        with open(swap, "rb") as f:  # the swap's next offset: headers only
            pos, size = 0, os.fstat(f.fileno()).st_size
            while size - pos >= HEADER_SIZE:
                h = read_header(os.pread(f.fileno(), HEADER_SIZE, pos))
                if h.batch_length <= 0 or pos + h.size > size:
                    break
                end, pos = h.last_offset + 1, pos + h.size
        for p in list(dir.glob("*" + LOG_SUFFIX)):
            stem = p.name[:-len(LOG_SUFFIX)]
            if len(stem) == 20 and stem.isdigit() and base <= int(stem) < max(end, base + 1):
                for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
                    segment_file(dir, int(stem), suffix).unlink(missing_ok=True)
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):  # the old first segment's indexes
            segment_file(dir, base, suffix).unlink(missing_ok=True)
        os.replace(swap, segment_file(dir, base))


def swap_in_cleaned(dir, old_segments, cleaned):
    """Put a cleaner's output file `cleaned` in place of `old_segments`; return its base.

    The write side of the swap `complete_interrupted_swap` finishes: as in Kafka, the output is
    renamed to `.swap` before any old segment is deleted, so a crash at any point leaves either
    the old segments or a swap that the next open completes."""
    base = old_segments[0].base_offset
    swap = dir / f"{base:020d}{LOG_SUFFIX}{SWAP_SUFFIX}"
    os.replace(cleaned, swap)
    fsync_dir(dir)
    for seg in old_segments:
        seg.delete()
    os.replace(swap, segment_file(dir, base))
    fsync_dir(dir)
    return base


def read_checkpoint(path):
    """The offset in a checkpoint file (version line "0", then the offset), None if unreadable."""
    try:
        lines = path.read_text().split()
        return int(lines[1]) if lines and lines[0] == "0" else None
    except (OSError, ValueError, IndexError):
        return None


def write_checkpoint(path, offset):
    """Replace the checkpoint file atomically (temp file, fsync, rename)."""
    tmp = path.with_name(f"{path.name}.{threading.get_ident()}.tmp")  # one per writer thread
    with open(tmp, "w") as f:
        f.write(f"0\n{offset}\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def fsync_dir(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
