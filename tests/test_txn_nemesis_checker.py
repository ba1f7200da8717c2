"""The transactional nemesis checker (tests/txn_nemesis.py) against histories made by hand: it
finds each kind of broken promise, and a clean history passes; the schedule follows its seed."""
from txn_nemesis import ABORTED, COMMITTED, UNKNOWN, Txn, TxnHistory, check_txns, txn_schedule

VIEW = {0: {0: b"a0", 2: b"c0"}, 1: {0: b"a1"}}
SOURCE = [b"s0", b"s1", b"s2"]


def _history(**changes):
    h = dict(txns=[Txn("w", [(0, b"a0"), (1, b"a1")], COMMITTED),
                   Txn("w", [(0, b"b0"), (1, b"b1")], ABORTED),
                   Txn("w", [(0, b"c0")], UNKNOWN)],
             views={1: VIEW, 2: VIEW, 3: VIEW},
             served={(0, 0): b"a0", (0, 2): b"c0", (1, 0): b"a1"},
             seen={(0, 0): b"a0"}, source=SOURCE, copy=SOURCE[:2], copied_to=2,
             zombie={"commit": "error", "name": "_FENCED", "fatal": True})
    h.update(changes)
    return TxnHistory(**h)


def _one(h, words):
    problems = check_txns(h)
    assert len(problems) >= 1 and any(words in p for p in problems), problems


def test_a_clean_history_passes():
    assert check_txns(_history()) == []


def test_an_aborted_transaction_visible_is_found():
    view = {0: {**VIEW[0], 1: b"b0"}, 1: VIEW[1]}
    _one(_history(views={1: view, 2: view, 3: view},
                  served={(0, 0): b"a0", (0, 1): b"b0", (0, 2): b"c0", (1, 0): b"a1"}),
         "aborted transaction")


def test_a_partial_or_lost_committed_transaction_is_found():
    view = {0: VIEW[0], 1: {}}
    _one(_history(views={1: view, 2: view, 3: view},
                  served={(0, 0): b"a0", (0, 2): b"c0"}), "is partial")


def test_a_record_read_then_gone_is_found():
    _one(_history(seen={(0, 1): b"b0"}), "was read (read_committed)")


def test_what_the_cluster_serves_must_be_the_logs_view():
    _one(_history(served={(0, 0): b"a0", (1, 0): b"a1"}), "read_committed serves")


def test_replicas_whose_views_differ_are_found():
    _one(_history(views={1: VIEW, 2: VIEW, 3: {0: VIEW[0], 1: {}}}), "differs from broker")


def test_a_copy_not_exactly_once_is_found():
    _one(_history(copy=[b"s0", b"s1", b"s1"]), "not exactly once")
    _one(_history(copy=[b"s0"]), "not exactly once")


def test_a_zombie_not_fenced_is_found():
    _one(_history(zombie={"commit": "ok"}), "not fenced")
    view = {0: {**VIEW[0], 5: b"z-late-0"}, 1: VIEW[1]}
    _one(_history(views={1: view, 2: view, 3: view},
                  served={(0, 0): b"a0", (0, 2): b"c0", (0, 5): b"z-late-0", (1, 0): b"a1"}),
         "zombie's records are visible")


def test_the_schedule_is_a_function_of_its_seed():
    assert txn_schedule(35, 20, 4) == txn_schedule(35, 20, 4)
    assert txn_schedule(35, 20, 4) != txn_schedule(36, 20, 4)
    assert {f.role for s in range(20) for f in txn_schedule(s, 20, 4)} == \
        {"leader", "txn-coordinator", "coordinator"}
