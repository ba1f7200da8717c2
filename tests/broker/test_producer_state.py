"""ProducerStateManager: dedup of retries, sequence and epoch checks, snapshots, replay."""
import pytest
from minilog.broker.storage.log import Log, LogConfig
from minilog.broker.storage.producer_state import (
    INVALID_PRODUCER_EPOCH,
    OUT_OF_ORDER_SEQUENCE_NUMBER,
    TRANSACTION_COORDINATOR_FENCED,
    ProducerStateError,
    ProducerStateManager,
    next_sequence,
)
from minilog.connector.batch import build, read_header, stamp


@pytest.fixture
def psm(tmp_path):
    return ProducerStateManager(tmp_path)


def write(psm, pid, epoch, first_seq, count, first_offset):
    last_seq = next_sequence(first_seq, count - 1)
    assert psm.check(pid, epoch, first_seq, last_seq) is None
    psm.update(pid, epoch, first_seq, last_seq, first_offset, first_offset + count - 1, 1000)


def code_of(psm, *args):
    with pytest.raises(ProducerStateError) as e:
        psm.check(*args)
    return e.value.code


def test_producer_without_state_may_start_at_any_sequence(psm):
    assert psm.check(1, 0, 0, 4) is None
    assert psm.check(1, 0, 3, 4) is None  # KIP-360: its state may have expired


def test_non_idempotent_batches_always_pass(psm):
    assert psm.check(-1, -1, -1, -1) is None


def test_in_sequence_batches_pass_and_gaps_fail(psm):
    write(psm, 1, 0, 0, 5, 100)
    write(psm, 1, 0, 5, 5, 105)
    assert code_of(psm, 1, 0, 11, 12) == OUT_OF_ORDER_SEQUENCE_NUMBER


def test_retry_of_one_of_the_last_five_batches_is_a_duplicate(psm):
    for i in range(7):
        write(psm, 1, 0, 2 * i, 2, 10 * i)
    assert psm.check(1, 0, 4, 5) == ("duplicate", 20, 21)       # 3rd-oldest of the last five
    assert psm.check(1, 0, 12, 13) == ("duplicate", 60, 61)
    assert code_of(psm, 1, 0, 2, 3) == OUT_OF_ORDER_SEQUENCE_NUMBER  # older than five batches


def test_old_epoch_is_fenced_and_new_epoch_restarts_at_zero(psm):
    write(psm, 1, 3, 0, 5, 0)
    assert code_of(psm, 1, 2, 5, 5) == INVALID_PRODUCER_EPOCH
    assert code_of(psm, 1, 4, 5, 5) == OUT_OF_ORDER_SEQUENCE_NUMBER
    write(psm, 1, 4, 0, 1, 5)
    assert psm.entry(1).epoch == 4 and list(psm.entry(1).batches) == [(0, 0, 5, 5)]


def test_sequence_wraps_after_int32_max(psm):
    top = 0x7FFFFFFF
    assert next_sequence(top) == 0 and next_sequence(top - 1, 3) == 1
    psm.update(1, 0, top - 4, top, 0, 4, 0)
    assert psm.check(1, 0, 0, 9) is None
    assert code_of(psm, 1, 0, 1, 5) == OUT_OF_ORDER_SEQUENCE_NUMBER


def test_staged_updates_apply_only_on_commit(psm):
    write(psm, 1, 0, 0, 1, 0)
    staged = psm.stage()
    assert staged.check(1, 0, 1, 1) is None
    staged.update(1, 0, 1, 1, 1, 1)
    assert staged.check(1, 0, 2, 2) is None          # sees its own update
    assert code_of(psm, 1, 0, 2, 2) == OUT_OF_ORDER_SEQUENCE_NUMBER  # manager unchanged
    assert psm.entry(1).last_sequence == 0
    staged.commit()
    assert psm.entry(1).last_sequence == 1


def test_snapshot_round_trip_and_corrupt_snapshot_fallback(psm, tmp_path):
    write(psm, 1, 0, 0, 3, 0)
    write(psm, 2, 5, 0, 1, 3)
    psm.snapshot(4)
    write(psm, 1, 0, 3, 1, 4)
    path = psm.snapshot(5)
    assert path.name == "00000000000000000005.snapshot"
    data = bytearray(path.read_bytes())
    data[10] ^= 0xFF
    path.write_bytes(bytes(data))
    fresh = ProducerStateManager(tmp_path)
    assert fresh.load() == 4                         # the damaged newer one is skipped
    assert fresh.entry(1).last_sequence == 2 and fresh.entry(2).epoch == 5
    assert fresh.snapshot_offsets() == [4]


def test_truncate_and_delete_snapshots(psm):
    for o in (10, 20, 30):
        psm.snapshot(o)
    psm.truncate_snapshots_after(20)
    assert psm.snapshot_offsets() == [10, 20]
    psm.delete_snapshots_before(100)
    assert psm.snapshot_offsets() == [20]            # the newest one always stays


def test_remove_expired(psm):
    psm.update(1, 0, 0, 0, 0, 0, timestamp=1000)
    psm.update(2, 0, 0, 0, 1, 1, timestamp=9000)
    assert psm.remove_expired(now_ms=10_000, max_age_ms=5000) == 1
    assert list(psm.producers) == [2]


def test_rebuild_from_log_replays_batch_headers(tmp_path):
    lg = Log(tmp_path / "t-0", LogConfig())
    for i in range(5):
        raw = build(b"x" * 20, 2, 1, 0, 0, producer_id=4, producer_epoch=1, base_sequence=2 * i)
        lg.append_as_follower(stamp(raw, 2 * i))
    psm = ProducerStateManager(tmp_path / "elsewhere")
    psm.rebuild_from(lg, 4)
    entry = psm.entry(4)
    assert [b[:2] for b in entry.batches] == [(4, 5), (6, 7), (8, 9)]
    assert psm.check(4, 1, 8, 9) == ("duplicate", 8, 9)
    assert read_header(lg.read(0, 1)).producer_id == 4
    lg.close()


# -- transaction markers: a deposed coordinator's marker is refused ---------------------------

def _txn_batch(pid, epoch, seq):
    from minilog.connector.batch import split_batches
    from minilog.connector.records import encode_batch
    data = encode_batch([(1000, None, b"v%d" % seq, [])], producer_id=pid, producer_epoch=epoch,
                        base_sequence=seq, transactional=True)
    return [(data, h) for _, h in split_batches(data)]


def _marker(pid, epoch, coordinator_epoch, commit):
    from minilog.connector.batch import split_batches
    from minilog.connector.records import CONTROL_ABORT, CONTROL_COMMIT, encode_control_batch
    data = encode_control_batch(CONTROL_COMMIT if commit else CONTROL_ABORT, pid, epoch,
                                coordinator_epoch)
    return [(data, h) for _, h in split_batches(data)]


def _refused(lg, batches):
    end = lg.log_end_offset
    with pytest.raises(ProducerStateError) as e:
        lg.append(batches)
    assert lg.log_end_offset == end  # nothing written
    return e.value.code


def test_a_marker_of_an_older_coordinator_or_producer_epoch_is_refused(tmp_path):
    lg = Log(tmp_path / "t-0", LogConfig())
    try:
        lg.append(_txn_batch(7, 0, 0))                   # T1
        lg.append(_marker(7, 0, 1, commit=False))        # ended by coordinator epoch 1
        t2 = lg.append(_txn_batch(7, 0, 1)).first_offset
        # the deposed coordinator (epoch 0) delivers late: T2 must stay open
        assert _refused(lg, _marker(7, 0, 0, commit=False)) == TRANSACTION_COORDINATOR_FENCED
        assert _refused(lg, _marker(7, 0, 0, commit=True)) == TRANSACTION_COORDINATOR_FENCED
        assert lg.first_unstable_offset() == t2
        lg.append(_marker(7, 0, 1, commit=True))          # the current coordinator's
        assert lg.first_unstable_offset() is None
        lg.append(_txn_batch(7, 1, 0))                    # a new producer epoch
        assert _refused(lg, _marker(7, 0, 2, commit=False)) == INVALID_PRODUCER_EPOCH
        lg.append(_marker(7, 1, 2, commit=False))         # a newer coordinator may write
    finally:
        lg.close()


@pytest.mark.parametrize("with_snapshot", [True, False])
def test_the_last_coordinator_epoch_survives_a_restart(tmp_path, with_snapshot):
    lg = Log(tmp_path / "t-0", LogConfig())
    lg.append(_txn_batch(7, 0, 0))
    lg.append(_marker(7, 0, 3, commit=True))
    lg.append(_txn_batch(7, 0, 1))
    lg.close()
    if not with_snapshot:  # rebuilt from the control records in the log
        ProducerStateManager(tmp_path / "t-0").delete_all_snapshots()
    lg = Log(tmp_path / "t-0", LogConfig())
    try:
        assert lg.producer_state.entry(7).coordinator_epoch == 3
        assert _refused(lg, _marker(7, 0, 2, commit=False)) == TRANSACTION_COORDINATOR_FENCED
    finally:
        lg.close()


def test_a_replica_takes_markers_as_the_leader_wrote_them(psm):
    psm.end_transaction(7, 0, coordinator_epoch=3)
    assert psm.end_transaction(7, 0, coordinator_epoch=2) == -1  # replay: no check
    assert psm.entry(7).coordinator_epoch == 2
