"""`minilog transactions ...`: transactions from the command line, like `kafka-transactions.sh`.

    minilog transactions list                      every transactional id, its state
    minilog transactions describe TRANSACTIONAL_ID...

The columns are those of Kafka's tool. `cli.py` builds the parser and reports errors.
"""
import time

from minilog.connector.tables import table
from minilog.connector.client import AdminClient

LIST_COLUMNS = ("TransactionalId", "Coordinator", "ProducerId", "TransactionState")
DESCRIBE_COLUMNS = ("CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch",
                    "TransactionState", "TransactionTimeoutMs", "CurrentTransactionStartTimeMs",
                    "TransactionDurationMs", "TopicPartitions")


def add_parser(sub, common):
    txns = sub.add_parser("transactions", help="list and describe transactions")
    tsub = txns.add_subparsers(dest="action", metavar="ACTION", required=True)
    tsub.add_parser("list", parents=[common], help="every transactional id and its state")
    p = tsub.add_parser("describe", parents=[common],
                        help="a transactional id's producer, state and open transaction")
    p.add_argument("transactional_ids", nargs="+", metavar="TRANSACTIONAL_ID")


def run(args, out, conf):
    with AdminClient(conf) as admin:
        if args.action == "list":
            rows = [LIST_COLUMNS] + [(t.transactional_id, t.coordinator_id, t.producer_id,
                                      t.state) for t in admin.list_transactions()]
        else:
            now = int(time.time() * 1000)
            rows = [DESCRIBE_COLUMNS]
            for txn_id, d in admin.describe_transactions(args.transactional_ids).items():
                open_ = d.start_ms >= 0
                rows.append((d.coordinator_id, txn_id, d.producer_id, d.producer_epoch, d.state,
                             d.timeout_ms, d.start_ms if open_ else "None",
                             now - d.start_ms if open_ else "None",
                             ",".join(f"{tp.topic}-{tp.partition}" for tp in d.partitions)))
        table(rows, out)
