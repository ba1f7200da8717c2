"""The nemesis checker (tests/nemesis.py) against histories made by hand: it finds each kind
of broken promise, and a clean history passes; the fault schedule is a function of its seed."""
from nemesis import ISOLATE, History, check, schedule

LOG = {0: {0: b"a", 1: b"b"}, 1: {0: b"c"}}


def _history(**changes):
    h = dict(acked=[(b"a", 0, 0), (b"b", 0, 1), (b"c", 1, 0)], failed=[], undelivered=0,
             reads={(0, 0): b"a", (0, 1): b"b", (1, 0): b"c"},
             served={(0, 0): b"a", (0, 1): b"b", (1, 0): b"c"},
             replicas={1: LOG, 2: LOG, 3: LOG})
    h.update(changes)
    return History(**h)


def test_a_clean_history_passes():
    assert check(_history(), 2) == []


def test_a_lost_acknowledged_value_is_found():
    served = {(0, 0): b"a", (0, 1): b"x", (1, 0): b"c"}
    log = {0: {0: b"a", 1: b"x"}, 1: {0: b"c"}}
    problems = check(_history(served=served, replicas={1: log, 2: log, 3: log},
                              reads={**_history().reads, (0, 1): b"x"}), 2)
    assert any("acknowledged b'b' at partition 0 offset 1 is lost" in p for p in problems)


def test_replicas_that_disagree_are_found():
    other = {0: {0: b"a", 1: b"z"}, 1: {0: b"c"}}
    problems = check(_history(replicas={1: LOG, 2: other, 3: LOG}), 2)
    assert problems == ["replicas disagree on partition 0 from offset 1: broker 1 has b'b' "
                        "(2 records), broker 2 has b'z' (2 records)"]


def test_a_read_that_did_not_last_is_found():
    problems = check(_history(reads={**_history().reads, (1, 1): b"gone"}), 2)
    assert problems == ["the group read b'gone' at partition 1 offset 1, which did not last: "
                        "the offset holds None"]


def test_a_value_stored_twice_is_found():
    served = {**_history().served, (1, 1): b"a"}
    log = {0: LOG[0], 1: {0: b"c", 1: b"a"}}
    problems = check(_history(served=served, replicas={1: log, 2: log, 3: log}), 2)
    assert problems == ["value b'a' stored 2 times, at [(0, 0), (1, 1)]"]


def test_an_acknowledged_value_without_offset_must_be_stored_once_in_its_partition():
    implicit = [(b"a", 0, 0), (b"b", 0, None), (b"c", 1, None)]
    assert check(_history(acked=implicit), 2) == []
    problems = check(_history(acked=implicit + [(b"d", 1, None), (b"a", 1, None)]), 2)
    assert problems == ["acknowledged b'd' at partition 1 (offset unknown) is lost: the value "
                        "is at no offset",
                        "acknowledged b'a' at partition 1 (offset unknown) is lost: the value "
                        "is at [(0, 0)]"]


def test_delivery_failures_and_unread_values_are_found():
    problems = check(_history(failed=[(b"d", "OUT_OF_ORDER_SEQUENCE_NUMBER")] * 2, undelivered=1,
                              reads={(0, 0): b"a", (1, 0): b"c"}), 2)
    assert problems == ["acknowledged b'b' at partition 0 offset 1 was never read by the group",
                        "2 delivery failure(s): OUT_OF_ORDER_SEQUENCE_NUMBER",
                        "1 record(s) neither delivered nor failed at the end"]


def test_the_schedule_is_a_function_of_its_seed_and_isolates_the_controller():
    assert schedule(7, 60, 3) == schedule(7, 60, 3) != schedule(8, 60, 3)
    faults = [f for seed in range(5) for f in schedule(seed, 60, 3)]
    assert {f.kind for f in faults} == {"kill", "pause", ISOLATE}
    assert {f.role for f in faults} == {"leader", "coordinator", "controller"}
    assert all(f.role == "controller" for f in faults if f.kind == ISOLATE)
