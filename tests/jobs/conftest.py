"""Input the jobs' tests share: bank transactions with their balances folded independently."""
import json
import random

import pytest
from sparktools import create_topic, produce, unique


@pytest.fixture(scope="module")
def transactions(broker):
    """A 3-partition topic of 400 transactions over 7 accounts; (topic, {account: the
    `bank.balances` value bank_balance must end with})."""
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
