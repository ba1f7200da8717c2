"""`minilog transactions ...`: transactions from the command line, like `kafka-transactions.sh`.

    minilog transactions list [--state S] [--duration-filter MS]
    minilog transactions describe TRANSACTIONAL_ID...
    minilog transactions force-terminate TRANSACTIONAL_ID...
    minilog transactions describe-producers --topic T --partition P
    minilog transactions find-hanging --topic T [--partition P] | --broker-id N
    minilog transactions abort --topic T --partition P --start-offset O

A hanging transaction (KIP-664) is one open in a partition that its coordinator will never end:
its producer id belongs to no transactional id, or the transaction the coordinator has for it
does not include the partition. It holds the partition's last stable offset, so read_committed
consumers stop there. `find-hanging` finds them as Kafka's tool does (DescribeProducers on each
partition's leader, then ListTransactions and DescribeTransactions), among transactions open
longer than `--max-transaction-timeout` minutes; `abort` writes the abort marker at the
partition's leader (WriteTxnMarkers: CLUSTER_ACTION on the cluster). The columns are those of
Kafka's tool. `cli.py` builds the parser and reports errors.

A prepared transaction (KIP-939, `Producer.prepare_transaction`) whose preparing process died
is not hanging: its coordinator knows it, in state Ongoing, and waits for a decision
(forever with two-phase commit), holding read_committed readers back meanwhile. `list
--state Ongoing --duration-filter MS` shows the transactions open longer than MS (KIP-994),
and `force-terminate` aborts one and fences its producer (Kafka's forceTerminateTransaction,
KIP-939: an InitProducerId that does not keep the prepared transaction).
"""
import time
from collections.abc import Callable
from typing import TextIO

from minilog.connector.client import AdminClient, KafkaError, TopicPartition
from minilog.connector.protocol import ErrorCode
from minilog.connector.tables import table

LIST_COLUMNS = ("TransactionalId", "Coordinator", "ProducerId", "TransactionState")
DESCRIBE_COLUMNS = ("CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch",
                    "TransactionState", "TransactionTimeoutMs", "CurrentTransactionStartTimeMs",
                    "TransactionDurationMs", "TopicPartitions")
PRODUCER_COLUMNS = ("ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence",
                    "LastTimestamp", "CurrentTransactionStartOffset")
HANGING_COLUMNS = ("Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch",
                   "StartOffset", "LastTimestamp", "Duration(min)")


def add_parser(sub, common) -> None:
    txns = sub.add_parser("transactions", help="list, describe, find and abort transactions")
    tsub = txns.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = tsub.add_parser("list", parents=[common], help="every transactional id and its state")
    p.add_argument("--state", action="append", metavar="STATE",
                   help="only transactions in this state (Ongoing, CompleteCommit...; repeat "
                        "for several)")
    p.add_argument("--duration-filter", type=int, default=-1, metavar="MS",
                   help="only transactions open longer than MS milliseconds")
    p = tsub.add_parser("describe", parents=[common],
                        help="a transactional id's producer, state and open transaction")
    p.add_argument("transactional_ids", nargs="+", metavar="TRANSACTIONAL_ID")
    p = tsub.add_parser("describe-producers", parents=[common],
                        help="the active producers of a partition, from its leader")
    p.add_argument("--topic", required=True)
    p.add_argument("--partition", type=int, required=True)
    p = tsub.add_parser("find-hanging", parents=[common],
                        help="open transactions no coordinator will end")
    p.add_argument("--topic", help="search this topic (or give --broker-id)")
    p.add_argument("--partition", type=int, help="only this partition of --topic")
    p.add_argument("--broker-id", type=int, help="search the partitions this broker holds")
    p.add_argument("--max-transaction-timeout", type=int, default=15, metavar="MINUTES",
                   help="only transactions open longer than this (default 15, Kafka's "
                        "transaction.max.timeout.ms)")
    p = tsub.add_parser("force-terminate", parents=[common],
                        help="abort a transactional id's open (or prepared) transaction and "
                             "fence its producer")
    p.add_argument("transactional_ids", nargs="+", metavar="TRANSACTIONAL_ID")
    p = tsub.add_parser("abort", parents=[common],
                        help="abort a hanging transaction (needs CLUSTER_ACTION)")
    p.add_argument("--topic", required=True)
    p.add_argument("--partition", type=int, required=True)
    p.add_argument("--start-offset", type=int, help="the first offset of the transaction")
    p.add_argument("--producer-id", type=int, help="instead of --start-offset: with "
                   "--producer-epoch and --coordinator-epoch")
    p.add_argument("--producer-epoch", type=int)
    p.add_argument("--coordinator-epoch", type=int)


def run(args, out: TextIO, conf: dict, user_error: Callable[[str], Exception]) -> None:
    with AdminClient(conf) as admin:
        if args.action == "list":
            if args.duration_filter < -1:
                raise user_error("--duration-filter must be a number of milliseconds >= 0")
            table([LIST_COLUMNS] + [(t.transactional_id, t.coordinator_id, t.producer_id,
                                     t.state) for t in admin.list_transactions(
                                         states=args.state,
                                         duration_filter_ms=args.duration_filter)], out)
        elif args.action == "force-terminate":
            for txn_id in args.transactional_ids:
                admin.force_terminate_transaction(txn_id)
                out.write(f"Terminated the transaction of {txn_id}: its open transaction, "
                          f"if any, is aborted and its producer fenced.\n")
        elif args.action == "describe":
            _describe(admin, args.transactional_ids, out)
        elif args.action == "describe-producers":
            tp = TopicPartition(args.topic, args.partition)
            table([PRODUCER_COLUMNS] + [
                (s.producer_id, s.producer_epoch, s.coordinator_epoch, s.last_sequence,
                 s.last_timestamp, _or_none(s.current_txn_start_offset))
                for s in admin.describe_producers([tp])[tp]], out)
        elif args.action == "find-hanging":
            _find_hanging(admin, args, out, user_error)
        else:
            _abort(admin, args, out, user_error)


def _or_none(offset: int):
    return "None" if offset < 0 else offset


def _describe(admin: AdminClient, txn_ids: list, out: TextIO) -> None:
    now = int(time.time() * 1000)
    rows = [DESCRIBE_COLUMNS]
    for txn_id, d in admin.describe_transactions(txn_ids).items():
        open_ = d.start_ms >= 0
        rows.append((d.coordinator_id, txn_id, d.producer_id, d.producer_epoch, d.state,
                     d.timeout_ms, d.start_ms if open_ else "None",
                     now - d.start_ms if open_ else "None",
                     ",".join(f"{tp.topic}-{tp.partition}" for tp in d.partitions)))
    table(rows, out)


def _partitions_to_search(admin: AdminClient, args, user_error) -> list:
    if args.topic is None and args.broker_id is None:
        raise user_error("find-hanging needs --topic or --broker-id to limit the search")
    if args.partition is not None:
        if args.topic is None:
            raise user_error("--partition needs --topic")
        return [TopicPartition(args.topic, args.partition)]
    names = [args.topic] if args.topic is not None else \
        [t for t in admin.list_topics() if not t.startswith("__")]
    return [TopicPartition(name, p.partition)
            for name, t in admin.describe_topics(names).items() for p in t.partitions
            if args.broker_id is None or args.broker_id in p.replicas]


def _find_hanging(admin: AdminClient, args, out: TextIO, user_error) -> None:
    now = int(time.time() * 1000)
    longer_than = args.max_transaction_timeout * 60_000
    candidates = [(tp, s) for tp, states in
                  admin.describe_producers(_partitions_to_search(admin, args, user_error)).items()
                  for s in states
                  if s.current_txn_start_offset >= 0 and now - s.last_timestamp > longer_than]
    pids = {s.producer_id for _, s in candidates}
    txn_ids = {t.producer_id: t.transactional_id
               for t in admin.list_transactions(producer_ids=pids) if t.producer_id in pids} \
        if pids else {}
    described = {}
    for txn_id in set(txn_ids.values()):
        try:
            described[txn_id] = set(admin.describe_transactions([txn_id])[txn_id].partitions)
        except KafkaError as e:
            if e.code != ErrorCode.TRANSACTIONAL_ID_NOT_FOUND:
                raise
    hanging = [(tp, s) for tp, s in candidates
               if tp not in described.get(txn_ids.get(s.producer_id), ())]
    table([HANGING_COLUMNS] + [
        (tp.topic, tp.partition, s.producer_id, s.producer_epoch, s.coordinator_epoch,
         s.current_txn_start_offset, s.last_timestamp, (now - s.last_timestamp) // 60_000)
        for tp, s in sorted(hanging)], out)


def _abort(admin: AdminClient, args, out: TextIO, user_error) -> None:
    tp = TopicPartition(args.topic, args.partition)
    if args.start_offset is not None:
        found = [s for s in admin.describe_producers([tp])[tp]
                 if s.current_txn_start_offset == args.start_offset]
        if not found:
            raise user_error(f"no open transaction starts at offset {args.start_offset} "
                             f"of {tp.topic}-{tp.partition}")
        pid, epoch, coordinator_epoch = (found[0].producer_id, found[0].producer_epoch,
                                         found[0].coordinator_epoch)
    elif None in (args.producer_id, args.producer_epoch, args.coordinator_epoch):
        raise user_error("identify the transaction with --start-offset, or with --producer-id, "
                         "--producer-epoch and --coordinator-epoch")
    else:
        pid, epoch, coordinator_epoch = (args.producer_id, args.producer_epoch,
                                         args.coordinator_epoch)
    admin.abort_transaction(tp, pid, epoch, coordinator_epoch)
    out.write(f"Aborted the transaction of producer {pid} (epoch {epoch}) in "
              f"{tp.topic}-{tp.partition}.\n")
