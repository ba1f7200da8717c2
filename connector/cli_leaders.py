"""`minilog leader-election`: preferred or unclean leader elections, as `kafka-leader-election.sh`
runs them (`--election-type`, then `--all-topic-partitions` or `--topic` with `--partition`),
printing Kafka's lines: the partitions elected, those whose leader was already the one asked
for, and each failure with its reason, which makes the command fail. `cli.py` builds the
parser and reports errors."""
from typing import Callable, TextIO

from minilog.connector.client import AdminClient, TopicPartition


def add_parser(sub, common) -> None:
    p = sub.add_parser("leader-election", parents=[common],
                       help="move leaders back to preferred replicas, or elect an unclean one")
    p.add_argument("--election-type", required=True, type=str.upper,
                   choices=["PREFERRED", "UNCLEAN"], metavar="PREFERRED|UNCLEAN")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--all-topic-partitions", action="store_true",
                       help="every partition of every topic")
    which.add_argument("--topic", help="the topic of --partition")
    p.add_argument("--partition", type=int, action="append",
                   help="a partition of --topic (repeatable; required with --topic)")


def run(args, out: TextIO, conf: dict, error: Callable[[str], Exception],
        refused: Callable[[str], Exception]) -> None:
    """`error(message)`: a mistake in the command (exit 2); `refused(message)`: partitions
    the cluster could not elect (exit 1, as Kafka's tool fails then)."""
    if args.topic is not None and not args.partition:
        raise error("--partition is required with --topic")
    if args.partition and args.topic is None:
        raise error("--partition is only allowed with --topic")
    partitions = None if args.all_topic_partitions else \
        [TopicPartition(args.topic, p) for p in args.partition]
    with AdminClient(conf) as admin:
        results = admin.elect_leaders(args.election_type, partitions)
    kind = args.election_type
    elected = [tp for tp, e in sorted(results.items()) if e is None]
    already = [tp for tp, e in sorted(results.items()) if e is not None
               and e.name == "ELECTION_NOT_NEEDED"]
    failed = [(tp, e) for tp, e in sorted(results.items()) if e is not None and tp not in already]
    if elected:
        out.write(f"Successfully completed leader election ({kind}) for partitions "
                  f"{_names(elected)}\n")
    if already:
        out.write(f"Valid replica already elected for partitions {_names(already)}\n")
    for tp, e in failed:
        out.write(f"Error completing leader election ({kind}) for partition: "
                  f"{tp.topic}-{tp.partition}: {e}\n")
    if failed:
        raise refused(f"{len(failed)} replica(s) could not be elected")


def _names(tps) -> str:
    return ", ".join(f"{tp.topic}-{tp.partition}" for tp in tps)
