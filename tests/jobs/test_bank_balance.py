"""bank_balance, run as a user runs it (its main() with --trigger available-now) against a
real broker: the compacted output topic ends with each account's balance, equal to an
independent fold of the transactions, and a rerun from scratch reproduces it."""
import pytest
from sparktools import consume_all, create_topic, latest_by_key, unique

from minilog.jobs import bank_balance


@pytest.mark.parametrize("run", ["first", "rerun-from-scratch"])
def test_balances_equal_an_independent_fold(spark, broker, transactions, tmp_path, run):
    topic, expected = transactions
    out = create_topic(broker.bootstrap, unique("bank.balances"), 1,
                       {"cleanup.policy": "compact"})
    assert bank_balance.main([
        "--bootstrap-servers", broker.bootstrap, "--checkpoint", str(tmp_path / run),
        "--trigger", "available-now", "--max-offsets-per-trigger", "150",
        "--transactions-topic", topic, "--balances-topic", out]) == 0
    got = consume_all(broker.bootstrap, out, 1)
    assert latest_by_key(got) == expected
    assert len(got) > len(expected)  # several micro-batches, each writing what it changed
