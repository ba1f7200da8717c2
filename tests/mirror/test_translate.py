"""Offset translation is exact: for every committed position of a source partition, a
read_committed consumer placed at the translated target offset reads first the copy of the
first record at or after that position, and no copy of a record before it, whatever the gaps
on the source (transaction markers, aborted records) and the micro-batches on the target (each
ending in a commit marker, aborted replays between them). Checked against a brute-force
reference over seeded random logs."""
import random

import numpy as np
import pytest
from minilog.mirror.formats import OffsetSync
from minilog.mirror.translate import OffsetSyncStore, OutOfOrder, Runs


def copy_log(seed):
    """A random source partition and its copy: (source offsets of records, their target
    offsets, the syncs the tasks wrote), micro-batches of random sizes, random gaps."""
    rnd = random.Random(seed)
    upstream, u = [], rnd.randint(0, 5)
    for _ in range(rnd.randint(1, 300)):
        u += 1 if rnd.random() > 0.15 else rnd.randint(2, 4)  # markers, aborted records
        upstream.append(u)
    downstream, syncs, d, i = [], [], rnd.randint(0, 3), 0
    while i < len(upstream):
        batch = upstream[i:i + rnd.randint(1, 40)]
        runs = Runs("orders", 0)
        for j in range(0, len(batch), 7):  # several Arrow batches per task
            runs.observe(np.array(batch[j:j + 7]))
        downstream += range(d, d + len(batch))
        syncs += runs.syncs(d, d + len(batch) - 1)
        d += len(batch) + 1 + rnd.randint(0, 2)  # the commit marker, aborted replays
        i += len(batch)
    return upstream, downstream, syncs


def reference(upstream, downstream, g):
    """Brute force: (target offset of the last copied record before `g`, of the first at or
    after it); any offset after the first and up to the second is right (between them the
    target holds only markers and aborted records)."""
    before = [d for u, d in zip(upstream, downstream) if u < g]
    after = [d for u, d in zip(upstream, downstream) if u >= g]
    return (before[-1] if before else -1), (after[0] if after else downstream[-1] + 1)


@pytest.mark.parametrize("seed", range(40))
def test_every_position_translates_to_the_first_record_at_or_after_it(seed):
    upstream, downstream, syncs = copy_log(seed)
    store = OffsetSyncStore()
    for s in syncs:
        store.add(s)
    last = upstream[-1]
    for g in range(upstream[0], last + 4):
        got = store.translate("orders", 0, g, progress=last + 3)
        low, high = reference(upstream, downstream, g)
        assert got is not None and low < got <= high, \
            f"seed {seed}: position {g} -> {got}, expected in ({low}, {high}]"


def test_a_position_past_the_copy_waits_for_the_copy():
    upstream, downstream, syncs = copy_log(1)
    store = OffsetSyncStore()
    for s in syncs:
        store.add(s)
    last = upstream[-1]
    assert store.translate("orders", 0, last + 1) == downstream[-1] + 1
    assert store.translate("orders", 0, last + 2) is None
    assert store.translate("orders", 0, last + 2, progress=last + 1) is None
    assert store.translate("orders", 0, last + 2, progress=last + 2) == downstream[-1] + 1


def test_positions_before_the_copy_or_of_unknown_partitions_are_not_translated():
    store = OffsetSyncStore()
    store.add(OffsetSync("orders", 0, 10, 0))
    store.add(OffsetSync("orders", 0, 15, 5))
    assert store.translate("orders", 0, 9) is None
    assert store.translate("orders", 1, 10) is None
    assert store.translate("orders", 0, 12) == 2


def test_a_copy_that_is_not_contiguous_on_the_target_is_refused():
    runs = Runs("orders", 0)
    runs.observe(np.array([0, 1, 2]))
    with pytest.raises(OutOfOrder, match="only writer"):
        runs.syncs(10, 13)


def test_offsets_that_go_back_are_refused():
    runs = Runs("orders", 0)
    runs.observe(np.array([4, 5]))
    with pytest.raises(OutOfOrder):
        runs.observe(np.array([5, 6]))
