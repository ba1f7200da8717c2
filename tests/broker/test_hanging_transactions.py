"""No write can leave a partition with a transaction nothing will end, and what Kafka offers when
one hangs anyway (KIP-664) works: transactional records need a transactional id (else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as Kafka answers, authorizer or not); a batch under one
transactional id carrying another producer's id is refused by KIP-890's verification even where
that producer's transaction is open; and with verification off (Kafka's
`transaction.partition.verification.enable=false`) a raw batch hangs a partition, which
`minilog transactions find-hanging` finds and `minilog transactions abort` ends."""
import contextlib

import pytest
from brokers import MinilogBroker
from clitools import ok
from test_groups import _create
from txntools import SMALL, list_offset, raw_add_partition, raw_init, raw_txn_produce
from wire import RawConnection

from minilog.connector.protocol import ErrorCode

pytestmark = pytest.mark.timeout(240)
READ_UNCOMMITTED, READ_COMMITTED = 0, 1


@contextlib.contextmanager
def _started(*extra: str):
    b = MinilogBroker(extra=[*SMALL, *extra]).start()
    try:
        yield b
    finally:
        b.cleanup()


@pytest.fixture(scope="module")
def broker():
    with _started() as b:
        yield b


@pytest.fixture(scope="module")
def unverified_broker():
    with _started("-o", "transaction.partition.verification.enable=false") as b:
        yield b


def test_a_transactional_batch_without_a_transactional_id_is_refused(broker):
    bs = broker.bootstrap
    _create(bs, "no-txn-id", 1)
    with contextlib.closing(RawConnection(bs)) as conn:
        code = raw_txn_produce(conn, None, 4242, 0, "no-txn-id")
    assert code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert list_offset(bs, "no-txn-id", 0, READ_UNCOMMITTED) == 0
    assert list_offset(bs, "no-txn-id", 0, READ_COMMITTED) == 0


def test_another_producers_id_under_ones_own_transactional_id_is_refused(broker):
    """alice's transaction is open in the partition; mallory, who may write her own
    transactional id, sends a batch with alice's producer id, epoch and next sequence."""
    bs = broker.bootstrap
    _create(bs, "shared", 1)
    with contextlib.closing(RawConnection(bs)) as conn:
        alice, alice_epoch = raw_init(conn, "alice-txn")
        raw_init(conn, "mallory-txn")
        assert raw_add_partition(conn, "alice-txn", alice, alice_epoch, "shared") == 0
        assert raw_txn_produce(conn, "alice-txn", alice, alice_epoch, "shared") == 0
        assert raw_txn_produce(conn, "mallory-txn", alice, alice_epoch, "shared", seq=3) == \
            ErrorCode.INVALID_TXN_STATE
        assert list_offset(bs, "shared", 0, READ_UNCOMMITTED) == 3
        assert raw_txn_produce(conn, "alice-txn", alice, alice_epoch, "shared", seq=3) == 0


def _rows(text: str) -> list:
    lines = [ln.split() for ln in text.splitlines() if ln.strip()]
    return [dict(zip(lines[0], ln)) for ln in lines[1:]]


def test_find_hanging_finds_a_hung_partition_and_abort_ends_it(unverified_broker):
    bs = unverified_broker.bootstrap
    _create(bs, "hung", 2)
    with contextlib.closing(RawConnection(bs)) as conn:
        raw_init(conn, "some-txn")  # the coordinator is ready; 777 is no producer it knows
        assert raw_txn_produce(conn, "some-txn", 777, 0, "hung", partition=1) == 0
    assert list_offset(bs, "hung", 1, READ_UNCOMMITTED) == 3
    assert list_offset(bs, "hung", 1, READ_COMMITTED) == 0  # held by the hanging transaction

    hanging = _rows(ok("transactions", "find-hanging", "--topic", "hung",
                       "--max-transaction-timeout", "0", "-b", bs))
    assert [(r["Topic"], r["Partition"], r["ProducerId"], r["StartOffset"]) for r in hanging] \
        == [("hung", "1", "777", "0")]

    out = ok("transactions", "abort", "--topic", "hung", "--partition", "1", "--start-offset",
             "0", "-b", bs)
    assert "777" in out
    assert list_offset(bs, "hung", 1, READ_COMMITTED) == 4  # three records and the marker
    assert _rows(ok("transactions", "find-hanging", "--topic", "hung",
                    "--max-transaction-timeout", "0", "-b", bs)) == []
