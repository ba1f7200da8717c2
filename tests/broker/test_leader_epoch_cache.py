"""The leader epoch cache: Kafka's endOffsetFor answers, truncation, its checkpoint file, and a
rebuild from the batch headers of a log that has no checkpoint."""
from minilog.broker.storage.leader_epoch_cache import CHECKPOINT, LeaderEpochCache
from minilog.broker.storage.log import Log
from minilog.connector.batch import split_batches
from minilog.connector.records import encode_batch


def _append(log, epoch, n):
    data = encode_batch([(None, None, b"x", ())] * n)
    (_, header), = split_batches(data)
    return log.append([(data, header)], leader_epoch=epoch)


def test_end_offset_for_answers_like_kafka(tmp_path):
    cache = LeaderEpochCache(tmp_path, [(0, 0), (2, 10), (5, 25)])
    assert cache.end_offset_for(5, 40) == (5, 40)     # the latest epoch ends at the log end
    assert cache.end_offset_for(2, 40) == (2, 25)     # an older one where the next began
    assert cache.end_offset_for(3, 40) == (2, 25)     # unknown here: the largest epoch below
    assert cache.end_offset_for(0, 40) == (0, 10)
    assert cache.end_offset_for(7, 40) == (-1, -1)    # newer than anything here
    assert cache.end_offset_for(-1, 40) == (-1, -1)
    assert LeaderEpochCache(tmp_path).end_offset_for(0, 0) == (-1, -1)


def test_assign_keeps_only_newer_epochs_and_truncation_drops_later_ones(tmp_path):
    cache = LeaderEpochCache(tmp_path)
    for epoch, offset in [(1, 0), (1, 5), (0, 7), (3, 9), (4, 12)]:
        cache.assign(epoch, offset)
    assert cache.entries == [(1, 0), (3, 9), (4, 12)]
    cache.truncate_from_end(10)
    assert cache.entries == [(1, 0), (3, 9)] and cache.latest_epoch == 3
    assert (tmp_path / CHECKPOINT).read_text() == "0\n2\n1 0\n3 9\n"  # Kafka's format


def test_load_reads_the_checkpoint_or_rebuilds_from_batches(tmp_path):
    log = Log(tmp_path / "t-0")
    _append(log, 0, 3)
    _append(log, 0, 2)
    _append(log, 4, 1)
    _append(log, 6, 2)
    rebuilt = LeaderEpochCache.load(log)
    assert rebuilt.entries == [(0, 0), (4, 5), (6, 6)]
    assert LeaderEpochCache.load(log).entries == rebuilt.entries  # now from the file
    log.truncate_to(6)  # a cut below the last epoch's start forgets it on the next load
    assert LeaderEpochCache.load(log).entries == [(0, 0), (4, 5)]
    log.close()
