"""`minilog reassign-partitions`: partition reassignments (KIP-455) as
`kafka-reassign-partitions.sh` runs them, with its options, its JSON files and its lines:

    --generate --topics-to-move-json-file F --broker-list 1,2,3   propose a placement
    --execute  --reassignment-json-file F    start it (prints the current one, for a rollback)
    --verify   --reassignment-json-file F    completed, still in progress, or not as asked
    --cancel   --reassignment-json-file F    go back to the replicas before
    --list                                   the reassignments under way

A reassignment file is `{"version": 1, "partitions": [{"topic": T, "partition": P,
"replicas": [ids]}]}`; a topics file `{"version": 1, "topics": [{"topic": T}]}`. `cli.py`
builds the parser and reports errors."""
import json
from typing import Any, Callable, TextIO

from minilog.connector.client import AdminClient, TopicPartition

MODES = ("generate", "execute", "verify", "cancel", "list")


def add_parser(sub, common) -> None:
    p = sub.add_parser("reassign-partitions", parents=[common],
                       help="move partitions' replicas to other brokers, as "
                            "kafka-reassign-partitions.sh")
    mode = p.add_mutually_exclusive_group(required=True)
    for name in MODES:
        mode.add_argument(f"--{name}", action="store_true")
    p.add_argument("--reassignment-json-file", metavar="FILE",
                   help="the replicas wanted (--execute, --verify, --cancel)")
    p.add_argument("--topics-to-move-json-file", metavar="FILE", help="with --generate")
    p.add_argument("--broker-list", metavar="1,2,3", help="with --generate: brokers to use")


def run(args, out: TextIO, conf: dict, error: Callable[[str], Exception],
        refused: Callable[[str], Exception]) -> None:
    """`error(message)`: a mistake in the command or its file (exit 2); `refused(message)`:
    partitions the cluster refused or that are not as asked (exit 1, as Kafka's tool)."""
    with AdminClient(conf) as admin:
        if args.list:
            _list(admin, out)
        elif args.generate:
            _generate(admin, out, args, error)
        else:
            if not args.reassignment_json_file:
                raise error("--reassignment-json-file is required")
            wanted = _read_reassignment(args.reassignment_json_file, error)
            step = _execute if args.execute else _verify if args.verify else _cancel
            step(admin, out, wanted, refused)


def _read_json(path: str, key: str, error: Callable[[str], Exception]) -> list[dict[str, Any]]:
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except OSError as e:
        raise error(f"cannot read {path}: {e.strerror}") from None
    except ValueError as e:
        raise error(f"{path} is not JSON: {e}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get(key), list):
        raise error(f"{path}: expected {{\"version\": 1, \"{key}\": [...]}}")
    return doc[key]


def _read_reassignment(path: str, error: Callable[[str], Exception]
                       ) -> dict[TopicPartition, list[int]]:
    wanted: dict[TopicPartition, list[int]] = {}
    for entry in _read_json(path, "partitions", error):
        try:
            tp = TopicPartition(str(entry["topic"]), int(entry["partition"]))
            replicas = [int(r) for r in entry["replicas"]]
        except (KeyError, TypeError, ValueError):
            raise error(f"{path}: each partition needs \"topic\", \"partition\" and "
                        f"\"replicas\" (a list of broker ids): {json.dumps(entry)}") from None
        if tp in wanted:
            raise error(f"{path}: partition {tp.topic}-{tp.partition} is listed twice")
        wanted[tp] = replicas
    if not wanted:
        raise error(f"{path}: no partitions to reassign")
    return wanted


def _assignment_json(assignment: dict[TopicPartition, list[int]]) -> str:
    return json.dumps({"version": 1, "partitions": [
        {"topic": tp.topic, "partition": tp.partition, "replicas": list(replicas),
         "log_dirs": ["any"] * len(replicas)} for tp, replicas in sorted(assignment.items())]},
        separators=(",", ":"))


def _current(admin: AdminClient, topics) -> dict[TopicPartition, list[int]]:
    described = admin.describe_topics(sorted(topics))
    return {TopicPartition(name, p.partition): list(p.replicas)
            for name, d in described.items() for p in d.partitions}


def _execute(admin, out, wanted, refused) -> None:
    current = _current(admin, {tp.topic for tp in wanted})
    out.write("Current partition replica assignment\n\n"
              f"{_assignment_json({tp: current[tp] for tp in wanted if tp in current})}\n\n"
              "Save this to use as the --reassignment-json-file option during rollback\n")
    _report(out, admin.alter_partition_reassignments(wanted), refused,
            "Successfully started partition reassignments for", "Error reassigning partition(s)")


def _cancel(admin, out, wanted, refused) -> None:
    _report(out, admin.alter_partition_reassignments(dict.fromkeys(wanted)), refused,
            "Successfully cancelled partition reassignments for:",
            "Error cancelling partition reassignment(s)")


def _report(out, results, refused, started: str, failed_title: str) -> None:
    done = [tp for tp, e in sorted(results.items()) if e is None]
    failed = [(tp, e) for tp, e in sorted(results.items()) if e is not None]
    if done:
        out.write(f"{started} {_names(done)}\n")
    if failed:
        out.write(f"{failed_title}:\n")
        for tp, e in failed:
            out.write(f"{tp.topic}-{tp.partition}: {e}\n")
        raise refused(f"{len(failed)} partition(s) refused")


def _verify(admin, out, wanted, refused) -> None:
    ongoing = admin.list_partition_reassignments(list(wanted))
    current = _current(admin, {tp.topic for tp in wanted})
    out.write("Status of partition reassignment:\n")
    unlike = 0
    for tp, replicas in sorted(wanted.items()):
        name = f"{tp.topic}-{tp.partition}"
        if tp in ongoing:
            out.write(f"Reassignment of partition {name} is still in progress.\n")
        elif current.get(tp) == replicas:
            out.write(f"Reassignment of partition {name} is completed.\n")
        else:
            unlike += 1
            now = ",".join(map(str, current.get(tp, [])))
            out.write(f"There is no active reassignment of partition {name}, but replica set "
                      f"is {now} rather than {','.join(map(str, replicas))}.\n")
    if unlike:
        raise refused(f"{unlike} partition(s) not as the file asks")


def _list(admin, out) -> None:
    ongoing = admin.list_partition_reassignments()
    if not ongoing:
        out.write("No partition reassignments found.\n")
        return
    out.write("Current partition reassignments:\n")
    for tp, r in sorted(ongoing.items()):
        out.write(f"{tp.topic}-{tp.partition}: replicas: {_ids(r.replicas)}. adding: "
                  f"{_ids(r.adding)}. removing: {_ids(r.removing)}.\n")


def _generate(admin, out, args, error) -> None:
    """A proposal spreading each topic's replicas over --broker-list, round robin (the
    partition's first replica on broker i, the others next to it), as many as it has today."""
    if not args.topics_to_move_json_file or not args.broker_list:
        raise error("--generate needs --topics-to-move-json-file and --broker-list")
    try:
        brokers = [int(b) for b in args.broker_list.split(",")]
    except ValueError:
        raise error(f"--broker-list: expected broker ids like 1,2,3, got "
                    f"{args.broker_list!r}") from None
    topics = [str(t.get("topic")) for t in _read_json(args.topics_to_move_json_file, "topics",
                                                      error) if isinstance(t, dict)]
    current = _current(admin, set(topics))
    proposed = {}
    for tp, replicas in current.items():
        if len(replicas) > len(brokers):
            raise error(f"{tp.topic} has {len(replicas)} replicas, more than the "
                        f"{len(brokers)} broker(s) of --broker-list")
        proposed[tp] = [brokers[(tp.partition + k) % len(brokers)] for k in range(len(replicas))]
    out.write(f"Current partition replica assignment\n{_assignment_json(current)}\n\n"
              f"Proposed partition reassignment configuration\n{_assignment_json(proposed)}\n")


def _names(tps) -> str:
    return ",".join(f"{tp.topic}-{tp.partition}" for tp in tps)


def _ids(ids) -> str:
    return ",".join(map(str, ids))
