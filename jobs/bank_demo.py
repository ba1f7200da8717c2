"""The bank-balance demo: a log as the source of truth, end to end on a bundled local cluster.

Transactions (positive or negative amounts, keyed by account) go to `bank.transactions`; the
keep-balance consumer reads them from the beginning, folds them into balances and publishes each
account's balance to the compacted topic `bank.balances`. Because the log is the source of
truth, replaying it from offset 0 always gives the same balances: the demo checks that.
"""
import json
import random
import sys
import time

from minilog.broker.local_cluster import LocalCluster
from minilog.connector.cli_parser import Parser
from minilog.connector.client import (
    AdminClient,
    Consumer,
    NewTopic,
    Producer,
    TopicPartition,
)

TRANSACTIONS, BALANCES = "bank.transactions", "bank.balances"


def generate(n, accounts, seed):
    rng = random.Random(seed)
    names = [f"account-{i:03d}" for i in range(accounts)]
    for i in range(n):
        yield rng.choice(names), {"id": i, "amount": rng.randint(-500, 1000)}


def create_topics(bootstrap, partitions):
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        existing = set(admin.list_topics())
        admin.create_topics([t for t in (
            NewTopic(TRANSACTIONS, partitions),
            NewTopic(BALANCES, partitions, config={"cleanup.policy": "compact"}))
            if t.name not in existing])


def write_transactions(bootstrap, transactions):
    expected = {}
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 10,
                         "compression.type": "zstd"})
    try:
        for account, txn in transactions:
            expected[account] = expected.get(account, 0) + txn["amount"]
            producer.send(TRANSACTIONS, key=account.encode(), value=json.dumps(txn).encode())
        producer.flush(60)
    finally:
        producer.close()
    return expected


def keep_balance(bootstrap, partitions, timeout=60):
    """Read every transaction from offset 0 to the current end and fold them into balances."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"})
    tps = [TopicPartition(TRANSACTIONS, p) for p in range(partitions)]
    try:
        consumer.assign(tps)
        consumer.seek_to_beginning(tps)
        with AdminClient({"bootstrap.servers": bootstrap}) as admin:
            latest = admin.list_offsets({tp: "latest" for tp in tps})
        ends = {(tp.topic, tp.partition): found.offset for tp, found in latest.items()}
        balances, seen = {}, {}
        deadline = time.monotonic() + timeout
        while any(seen.get(k, 0) < end for k, end in ends.items()):
            if time.monotonic() > deadline:
                raise TimeoutError("the transactions did not all arrive in time")
            for rec in consumer.poll(1.0):
                account = rec.key.decode()
                balances[account] = balances.get(account, 0) + json.loads(rec.value)["amount"]
                seen[(rec.topic, rec.partition)] = rec.offset + 1
        return balances
    finally:
        consumer.close()


def publish_balances(bootstrap, balances):
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    try:
        for account, balance in sorted(balances.items()):
            producer.send(BALANCES, key=account.encode(), value=str(balance).encode())
        producer.flush(30)
    finally:
        producer.close()


def run(bootstrap, transactions, accounts, partitions, seed, out=sys.stdout):
    create_topics(bootstrap, partitions)
    started = time.monotonic()
    expected = write_transactions(bootstrap, generate(transactions, accounts, seed))
    written = time.monotonic() - started
    balances = keep_balance(bootstrap, partitions)
    publish_balances(bootstrap, balances)
    print(f"{transactions} transactions written to {TRANSACTIONS} in {written:.2f}s; "
          f"balances replayed from offset 0 in {time.monotonic() - started - written:.2f}s", file=out)
    print(f"{'account':<14}{'balance':>10}", file=out)
    for account, balance in sorted(balances.items()):
        print(f"{account:<14}{balance:>10}", file=out)
    if balances != expected:
        print("MISMATCH: replayed balances differ from the amounts written", file=out)
        return 1
    # "balances verified" is what the fresh-install test of the README's first command looks
    # for (tests/test_fresh_install.py): keep that line whatever the demo runs on.
    print("balances verified: replayed balances match the transactions written", file=out)
    return 0


def main(argv=None):
    parser = Parser(prog="minilog demo", description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap-server", help="use this cluster instead of starting a local one")
    parser.add_argument("--transactions", type=int, default=20000)
    parser.add_argument("--accounts", type=int, default=10)
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--seed", type=int, default=4)
    args = parser.parse_args(argv)
    if args.bootstrap_server:
        return run(args.bootstrap_server, args.transactions, args.accounts, args.partitions, args.seed)
    with LocalCluster() as cluster:
        print(f"started a local minilog broker at {cluster.bootstrap}")
        return run(cluster.bootstrap, args.transactions, args.accounts, args.partitions, args.seed)


if __name__ == "__main__":
    sys.exit(main())
