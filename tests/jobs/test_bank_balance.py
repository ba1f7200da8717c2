"""bank_balance, run as a user runs it (its main() with --trigger available-now) against a
real broker: the compacted output topic ends with each account's balance, equal to an
independent fold of the transactions, and a rerun from scratch reproduces it."""
import json
import random

import pytest
from sparktools import consume_all, create_topic, produce, unique

from minilog.jobs import bank_balance


def latest_by_key(records):
    out = {}
    for _, _, key, value, _ in records:  # sorted by partition, offset: the last one wins
        out[key.decode()] = json.loads(value)
    return out


@pytest.fixture(scope="module")
def transactions(broker):
    rng = random.Random(4)
    topic = create_topic(broker.bootstrap, unique("bank.transactions"), 3)
    txns = [(f"account-{rng.randrange(7)}", rng.randint(-500, 1000)) for _ in range(400)]
    produce(broker.bootstrap, topic, [(None, a.encode(), json.dumps({"id": i, "amount": n})
                                       .encode(), None) for i, (a, n) in enumerate(txns)])
    fold = {}
    for a, n in txns:
        fold.setdefault(a, [0, 0])
        fold[a][0] += n
        fold[a][1] += 1
    return topic, {a: {"account": a, "balance": b, "transactions": c}
                   for a, (b, c) in fold.items()}


@pytest.mark.parametrize("run", ["first", "rerun-from-scratch"])
def test_balances_equal_an_independent_fold(spark, broker, transactions, tmp_path, run):
    topic, expected = transactions
    out = create_topic(broker.bootstrap, unique("bank.balances"), 1,
                       {"cleanup.policy": "compact"})
    assert bank_balance.main([
        "--bootstrap-servers", broker.bootstrap, "--checkpoint", str(tmp_path / run),
        "--trigger", "available-now", "--max-offsets-per-trigger", "150",
        "--transactions-topic", topic, "--balances-topic", out]) == 0
    got = consume_all(broker.bootstrap, out, 1, len(expected))
    assert latest_by_key(got) == expected
    assert len(got) > len(expected)  # several micro-batches, each writing what it changed
