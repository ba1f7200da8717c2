"""`minilog`: the command line, in the style of Kafka's tools and kcat.

    minilog broker start ...                   run a broker (see `minilog broker start --help`)
    minilog cluster up|status|down             a replicated cluster on 127.0.0.1 (see --help)
    minilog topics create|list|describe|alter|delete
    minilog produce TOPIC                      lines from stdin or --file become records
    minilog consume TOPIC                      records to stdout, formatted with -f like kcat
    minilog offsets TOPIC                      earliest/latest offsets, or offsets by --timestamp
    minilog groups list|describe|delete|reset-offsets   consumer groups (see cli_groups.py)
    minilog transactions list|describe|find-hanging|abort|force-terminate (cli_transactions.py)
    minilog users add|list|remove              SCRAM users (see cli_users.py)
    minilog leader-election                    preferred or unclean leader elections
    minilog reassign-partitions                move replicas (cli_reassign.py), as Kafka's tool
    minilog acls add|list|remove               ACLs, kafka-acls.sh's options (see cli_acls.py)
    minilog configs describe                   a broker's or topic's settings (cli_configs.py)
    minilog console [--listen HOST:PORT] [--read-only]   the web console (minilog.console)
    minilog connect worker.properties          a Kafka Connect worker (minilog.connect)
    minilog mirror mm2.properties              MirrorMaker 2 on Spark (minilog.mirror)

Every client command takes `--bootstrap-server` (default 127.0.0.1:9092), `-X key=value`
(any client setting, Kafka's names) and `--command-config FILE` (settings from a properties
file, e.g. security.protocol=SASL_SSL with its sasl.* and ssl.* settings). A user error (bad flag, bad setting, unknown topic,
unreachable broker) prints one line to stderr and exits non-zero; tracebacks are for bugs.
"""
import argparse
import importlib
import os
import sys
import time

from minilog.connector import (
    cli_acls,
    cli_configs,
    cli_console,
    cli_groups,
    cli_leaders,
    cli_reassign,
    cli_transactions,
    cli_users,
)
from minilog.connector.cli_parser import Parser
from minilog.connector.client import (
    AdminClient,
    ConfigError,
    Consumer,
    KafkaConnectionError,
    KafkaError,
    NewTopic,
    Producer,
    TopicPartition,
)
from minilog.connector.client.config import parse_assignments
from minilog.connector.client.serialization import SerializationError
from minilog.connector.properties import PropertiesError, read_properties
from minilog.connector.tables import describe_topics

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
DEFAULT_FORMAT = "%s\\n"


class UserError(Exception):
    """A mistake in how the command was called: reported in one line, exit status 2."""


class Refused(Exception):
    """The cluster refused part of what was asked (each refusal already printed): reported
    in one line, exit status 1."""


class Interrupted(Exception):
    """Ctrl-C, with what was done by then: reported in one line, exit status 130."""


_INTERRUPTED_FLUSH_S = 5.0  # after Ctrl-C, how long records in flight may take to be acknowledged


def global_flags():
    """The flags every client command takes, before or after its name."""
    common = Parser(prog="minilog", add_help=False)
    common.add_argument("--bootstrap-server", "-b", default=argparse.SUPPRESS, metavar="HOST:PORT",
                        help=f"broker(s) to bootstrap from, comma separated (default "
                             f"{DEFAULT_BOOTSTRAP}); for demo: run it on that cluster")
    common.add_argument("-X", dest="settings", action="append", default=argparse.SUPPRESS,
                        metavar="KEY=VALUE", help="client setting, Kafka's name (repeatable; "
                                                  "not for broker, cluster, demo)")
    common.add_argument("--command-config", default=argparse.SUPPRESS, metavar="FILE",
                        help="client settings from a properties file (security.protocol, "
                             "sasl.*, ssl.* ...); -X overrides them")
    return common


def build_parser():
    common = global_flags()
    parser = Parser(prog="minilog", parents=[common],
                     description="minilog: a Kafka-compatible log. Manage topics, produce, consume.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    sub.add_parser("broker", help="run a broker: minilog broker start --help", add_help=False)
    sub.add_parser("cluster", help="a replicated local cluster: minilog cluster up|status|down",
                   add_help=False)
    sub.add_parser("demo", help="the bank-balance demo on a local cluster: minilog demo --help",
                   add_help=False)
    sub.add_parser("certs", help="a local CA and TLS certificates: minilog certs create --help",
                   add_help=False)
    sub.add_parser("mirror", help="MirrorMaker 2 on Spark: minilog mirror mm2.properties",
                   add_help=False)

    topics = sub.add_parser("topics", help="create, list, describe, alter, delete topics")
    tsub = topics.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = tsub.add_parser("create", parents=[common], help="create a topic")
    p.add_argument("topic")
    p.add_argument("--partitions", "-p", type=int, default=1)
    p.add_argument("--replication-factor", "-r", type=int, default=-1,
                   help="default: the broker's default.replication.factor")
    p.add_argument("--config", "-c", action="append", default=[], metavar="KEY=VALUE",
                   help="topic setting, e.g. retention.ms=60000 (repeatable)")
    p.add_argument("--if-not-exists", action="store_true")
    p = tsub.add_parser("list", parents=[common], help="list topic names")
    p.add_argument("--internal", action="store_true", help="include internal topics")
    p = tsub.add_parser("describe", parents=[common], help="partitions, leaders, replicas, configs")
    p.add_argument("topics", nargs="*", help="default: every topic")
    p = tsub.add_parser("alter", parents=[common], help="add partitions or change configs")
    p.add_argument("topic")
    p.add_argument("--partitions", "-p", type=int, help="new total partition count")
    p.add_argument("--config", "-c", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--delete-config", action="append", default=[], metavar="KEY",
                   help="reset a setting to its default (repeatable)")
    p = tsub.add_parser("delete", parents=[common], help="delete topics")
    p.add_argument("topics", nargs="+")
    p.add_argument("--if-exists", action="store_true")

    p = sub.add_parser("produce", parents=[common], help="produce lines from stdin or a file")
    p.add_argument("topic")
    p.add_argument("--file", "-F", help="read records from this file instead of stdin")
    p.add_argument("--key-separator", "-K", metavar="SEP",
                   help="split each line at the first SEP into key and value")
    p.add_argument("--header", "-H", action="append", default=[], metavar="KEY=VALUE",
                   help="header added to every record (repeatable)")
    p.add_argument("--partition", "-p", type=int, help="write to this partition only")

    p = sub.add_parser("consume", parents=[common], help="print records")
    p.add_argument("topic")
    start = p.add_mutually_exclusive_group()
    start.add_argument("--from-beginning", action="store_true",
                       help="start at the earliest offset (default: at the end, new records "
                            "only; with --group a new group starts at the earliest anyway)")
    start.add_argument("--offset", "-o", type=int,
                       help="start at this offset (negative: that many before the end)")
    start.add_argument("--timestamp", type=int, metavar="MS",
                       help="start at the first record at or after this time (ms since epoch)")
    p.add_argument("--partition", "-p", type=int, action="append",
                   help="consume only this partition (repeatable; default all)")
    p.add_argument("--max-messages", "-c", type=int, help="stop after this many records")
    p.add_argument("--format", "-f", default=DEFAULT_FORMAT,
                   help="output format: %%t topic, %%p partition, %%o offset, %%k key, %%s value, "
                        "%%T timestamp, %%h headers, %%K/%%S key/value length, \\n \\t "
                        f"(default {DEFAULT_FORMAT.replace('%', '%%')!r})")
    p.add_argument("--exit", "-e", action="store_true",
                   help="exit once the end of every partition (as of start) is reached")
    p.add_argument("--group", "-G", metavar="GROUP",
                   help="consume as a member of this consumer group: its partitions, from its "
                        "committed offsets, committing as it goes; a new group (no committed "
                        "offset) starts at the earliest (-X auto.offset.reset=latest: at the "
                        "end)")
    p.add_argument("--isolation-level", choices=("read_uncommitted", "read_committed"),
                   help="read_committed: only records of committed transactions, up to the "
                        "last stable offset (default read_uncommitted, as Kafka's tools)")

    p = sub.add_parser("offsets", parents=[common], help="earliest/latest offsets or by time")
    p.add_argument("topic")
    p.add_argument("--partition", "-p", type=int, action="append")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--earliest", action="store_true")
    which.add_argument("--latest", action="store_true")
    which.add_argument("--timestamp", type=int, metavar="MS",
                       help="first offset with a timestamp at or after MS")

    cli_groups.add_parser(sub, common)
    cli_transactions.add_parser(sub, common)
    cli_users.add_parser(sub, common)
    cli_leaders.add_parser(sub, common)
    cli_reassign.add_parser(sub, common)
    cli_acls.add_parser(sub, common)
    cli_configs.add_parser(sub, common)
    cli_console.add_parser(sub, common)
    p = sub.add_parser("connect", help="a Kafka Connect worker: Connect's REST API, connectors "
                                       "run as Spark queries (minilog.connect)")
    p.add_argument("worker_properties", metavar="worker.properties",
                   help="Connect's worker settings (bootstrap.servers, group.id, "
                        "config/offset/status.storage.topic, listeners, key/value.converter)")
    return parser


def _settings(args):
    """The client config dict: --command-config, overridden by --bootstrap-server, then -X."""
    conf = {"bootstrap.servers": DEFAULT_BOOTSTRAP}
    if getattr(args, "command_config", None):
        try:
            conf.update(read_properties(args.command_config))
        except PropertiesError as e:
            raise UserError(f"minilog: --command-config: {e}") from None
    if hasattr(args, "bootstrap_server"):
        conf["bootstrap.servers"] = args.bootstrap_server
    conf.update(parse_assignments(getattr(args, "settings", None) or []))
    return conf


def _partitions(client, topic, only=None):
    parts = client.partitions_for(topic)
    if not parts:
        raise KafkaError(3, f"topic {topic!r} has no partitions yet")
    if only:
        missing = sorted(set(only) - set(parts))
        if missing:
            raise UserError(f"topic {topic!r} has no partition {missing[0]} "
                            f"(partitions 0-{max(parts)})")
        return sorted(set(only))
    return parts


# ---- topics ----------------------------------------------------------------------------------
def _topics(args, out):
    with AdminClient(_settings(args)) as admin:
        if args.action == "create":
            cfg = parse_assignments(args.config)
            try:
                admin.create_topics([NewTopic(args.topic, args.partitions,
                                              args.replication_factor, cfg)])
            except KafkaError as e:
                if not (args.if_not_exists and e.name == "TOPIC_ALREADY_EXISTS"):
                    raise
            out.write(f"Created topic {args.topic}.\n")
        elif args.action == "list":
            for name in admin.list_topics(internal=args.internal):
                out.write(name + "\n")
        elif args.action == "describe":
            describe_topics(admin, args.topics or None, out)
        elif args.action == "alter":
            if args.partitions is None and not args.config and not args.delete_config:
                raise UserError("minilog topics alter: nothing to change "
                                "(give --partitions, --config or --delete-config)")
            admin.describe_topics([args.topic])
            if args.partitions is not None:
                admin.create_partitions(args.topic, args.partitions)
            if args.config or args.delete_config:
                admin.alter_configs("topic", args.topic, set=parse_assignments(args.config),
                                    delete=args.delete_config)
            out.write(f"Altered topic {args.topic}.\n")
        elif args.action == "delete":
            for name in args.topics:
                try:
                    admin.delete_topics([name])
                except KafkaError as e:
                    if not (args.if_exists and e.name == "UNKNOWN_TOPIC_OR_PARTITION"):
                        raise
                out.write(f"Deleted topic {name}.\n")


# ---- produce -----------------------------------------------------------------------------------
class _Progress:
    """A one-line progress bar on stderr (only drawn on a terminal)."""

    def __init__(self, total, enabled):
        self.total, self.enabled, self.last = total, enabled and total > 0, 0.0

    def update(self, done, records, final=False):
        now = time.monotonic()
        if not self.enabled or (not final and now - self.last < 0.1):
            return
        self.last = now
        frac = min(done / self.total, 1.0)
        bar = "#" * int(frac * 30)
        sys.stderr.write(f"\r[{bar:<30}] {frac:4.0%} {done / 1e6:.1f}/{self.total / 1e6:.1f} MB "
                         f"{records:,} records" + ("\n" if final else ""))
        sys.stderr.flush()


def _produce(args, out):
    headers = [(k, v.encode()) for k, v in parse_assignments(args.header).items()]
    sep = args.key_separator.encode() if args.key_separator else None
    # acked, settled: records acknowledged; records whose outcome is known (acked or failed).
    # Once the producer is closed every record it accepted is settled, so `settled` is what was
    # sent even when Ctrl-C lands between `send` queuing a record and `count` counting it.
    failures, acked, settled = [], [0], [0]

    def on_delivery(err, _):
        settled[0] += 1
        if err is None:
            acked[0] += 1
        elif len(failures) < 1:
            failures.append(err)
    settings = _settings(args)
    settings.setdefault("error_cb", _say_unreachable(settings))
    source = open(args.file, "rb") if args.file else sys.stdin.buffer  # noqa: SIM115
    total = os.fstat(source.fileno()).st_size if args.file else 0
    progress = _Progress(total, bool(args.file) and sys.stderr.isatty())
    count = done = 0
    try:
        with Producer(settings) as producer:
            known = producer.partitions_for(args.topic)  # unknown topics fail here, at once
            if known is not None and args.partition is not None:
                _partitions(producer, args.topic, [args.partition])
            try:
                for n, line in enumerate(source, 1):
                    done += len(line)
                    line = line.rstrip(b"\r\n") if line.endswith(b"\n") else line
                    key = None
                    if sep is not None:
                        key, found, value = line.partition(sep)
                        if not found:
                            raise UserError(f"line {n} has no key separator "
                                            f"{args.key_separator!r}")
                    else:
                        value = line
                    producer.send(args.topic, value, key=key, partition=args.partition,
                                  headers=headers, on_delivery=on_delivery)
                    count += 1
                    progress.update(done, count)
                    if failures:
                        break
                producer.flush()
            except KeyboardInterrupt:  # what was sent gets a moment to be acknowledged
                producer.close(_INTERRUPTED_FLUSH_S)
                sent = max(count, settled[0])
                raise Interrupted(f"minilog produce: interrupted: {acked[0]:,} of {sent:,} "
                                  f"records acknowledged") from None
    finally:
        if args.file:
            source.close()
    progress.update(done, count, final=True)
    if failures:
        raise failures[0]


def _say_unreachable(settings):
    """The producer's error_cb: one line, at once, when a broker cannot be reached (the
    records are retried meanwhile, as kcat does); the expiry, if it comes, is the error."""
    def say(err):
        print(f"minilog produce: {err.detail}; "
              f"retrying until delivery.timeout.ms "
              f"({settings.get('delivery.timeout.ms', 120000)} ms)", file=sys.stderr, flush=True)
    return say


# ---- consume -----------------------------------------------------------------------------------
_FIELDS = {"t": lambda r: r.topic.encode(), "p": lambda r: b"%d" % r.partition,
           "o": lambda r: b"%d" % r.offset, "k": lambda r: r.key or b"",
           "s": lambda r: r.value or b"", "T": lambda r: b"%d" % r.timestamp,
           "K": lambda r: b"%d" % len(r.key or b""), "S": lambda r: b"%d" % len(r.value or b""),
           "h": lambda r: b",".join(k.encode() + b"=" + (v or b"") for k, v in r.headers)}
_ESCAPES = {"n": b"\n", "t": b"\t", "r": b"\r", "\\": b"\\", "0": b"\0"}


def compile_format(fmt):
    """A kcat-style format string as a function record -> bytes."""
    parts, i = [], 0
    while i < len(fmt):
        c = fmt[i]
        if c in "%\\" and i + 1 < len(fmt):
            nxt = fmt[i + 1]
            if c == "%" and nxt == "%":
                parts.append(b"%")
            elif c == "%" and nxt in _FIELDS:
                parts.append(_FIELDS[nxt])
            elif c == "\\" and nxt in _ESCAPES:
                parts.append(_ESCAPES[nxt])
            else:
                raise UserError(f"unknown format sequence {c + nxt!r} in --format")
            i += 2
        else:
            parts.append(c.encode())
            i += 1
    return lambda r: b"".join(p if isinstance(p, bytes) else p(r) for p in parts)


def _consume(args, out):
    fmt = compile_format(args.format)
    conf = _settings(args)
    conf.setdefault("auto.offset.reset", "earliest")
    if args.isolation_level is not None:
        conf["isolation.level"] = args.isolation_level
    if args.group is not None:
        return _consume_group(args, conf, fmt, out)
    with Consumer(conf) as consumer:
        tps = [TopicPartition(args.topic, p)
               for p in _partitions(consumer, args.topic, args.partition)]
        consumer.assign(tps)
        ends = consumer.end_offsets(tps)
        if args.from_beginning:
            consumer.seek_to_beginning(tps)
        elif args.timestamp is not None:
            found = consumer.offsets_for_times({tp: args.timestamp for tp in tps})
            for tp in tps:
                consumer.seek(tp, found[tp].offset if found.get(tp) else ends[tp])
        elif args.offset is not None and args.offset >= 0:
            for tp in tps:
                consumer.seek(tp, args.offset)
        else:
            back = -(args.offset or 0)
            starts = consumer.beginning_offsets(tps) if back else {}
            for tp in tps:
                consumer.seek(tp, max(ends[tp] - back, starts.get(tp, 0)))
        left = args.max_messages
        sink = out.buffer if hasattr(out, "buffer") else out
        while left is None or left > 0:
            if args.exit and all(consumer.position(tp) >= ends[tp] for tp in tps):
                break
            records = consumer.poll(0.5, max_records=left)
            if records:
                left = _print_records(sink, fmt, records, left)


def _print_records(sink, fmt, records, left):
    """Print `records` as `fmt` formats them; how many are still to print (None: no limit)."""
    sink.write(b"".join(fmt(r) for r in records))
    sink.flush()
    return None if left is None else left - len(records)


def _consume_group(args, conf, fmt, out):
    """`consume --group`: subscribe, print, auto-commit; close commits and leaves."""
    given = [flag for flag, v in (("--offset", args.offset), ("--timestamp", args.timestamp),
                                  ("--partition", args.partition)) if v is not None]
    if given:
        raise UserError(f"minilog consume: {given[0]} cannot be combined with --group "
                        "(the group decides partitions and positions; see groups reset-offsets)")
    if args.from_beginning:  # only where the group has no committed offset, as Kafka's tool
        if conf["auto.offset.reset"] not in ("earliest", "smallest", "beginning"):
            raise UserError("minilog consume: --from-beginning contradicts "
                            f"-X auto.offset.reset={conf['auto.offset.reset']}")
        conf["auto.offset.reset"] = "earliest"
    conf["group.id"] = args.group
    with Consumer(conf) as consumer:
        _partitions(consumer, args.topic)  # an unknown topic fails here, at once
        consumer.subscribe([args.topic])
        ends, left = {}, args.max_messages
        sink = out.buffer if hasattr(out, "buffer") else out
        while left is None or left > 0:
            records = consumer.poll(0.5, max_records=left)
            if records:
                left = _print_records(sink, fmt, records, left)
            elif args.exit:
                mine = consumer.assignment()
                missing = [tp for tp in mine if tp not in ends]
                if missing:
                    ends.update(consumer.end_offsets(missing))
                if mine and all(consumer.position(tp) >= ends[tp] for tp in mine):
                    break


# ---- offsets -----------------------------------------------------------------------------------
def _offsets(args, out):
    with AdminClient(_settings(args)) as admin:
        parts = admin.describe_topics([args.topic])[args.topic].partitions
        tps = [TopicPartition(args.topic, p.partition) for p in parts
               if not args.partition or p.partition in args.partition]
        if args.partition and len(tps) != len(set(args.partition)):
            raise UserError(f"topic {args.topic!r} has no partition "
                            f"{min(set(args.partition) - {tp.partition for tp in tps})}")
        spec = "earliest" if args.earliest else "latest" if args.latest else args.timestamp
        if spec is not None:
            found = admin.list_offsets({tp: spec for tp in tps})
            for tp in tps:
                o = found.get(tp)
                out.write(f"{tp.topic}:{tp.partition}:{o.offset if o else -1}\n")
            return
        first = admin.list_offsets({tp: "earliest" for tp in tps})
        last = admin.list_offsets({tp: "latest" for tp in tps})
        out.write("TOPIC\tPARTITION\tEARLIEST\tLATEST\n")
        for tp in tps:
            out.write(f"{tp.topic}\t{tp.partition}\t{first[tp].offset}\t{last[tp].offset}\n")


def _groups(args, out):
    cli_groups.run(args, out, sys.stderr, _settings(args))


def _users(args, out):
    cli_users.run(args, out, _settings(args))


def _configs(args, out):
    cli_configs.run(args, out, _settings(args))


def _tool(module, name, refuses=False):
    """`minilog NAME`, done by `module.run(args, out, settings, error[, refused])`: a mistake
    in the command is `error(message)` (exit 2), what the cluster refused `refused(message)`
    (exit 1); each one line, prefixed with the command."""
    def command(args, out):
        said = f"minilog {name}: "
        more = (lambda message: Refused(said + message),) if refuses else ()
        module.run(args, out, _settings(args), lambda message: UserError(said + message), *more)
    return command


def _connect(args, out):
    from minilog.connect.errors import WorkerConfigError
    from minilog.connect.worker import run
    try:
        run(args.worker_properties, out)
    except (WorkerConfigError, PropertiesError, OSError) as e:
        raise UserError(f"minilog connect: {e}") from None


# The commands with parsers of their own: their modules are imported only when run.
_ENTRY_POINTS = {"broker": ("minilog.broker.server.main", {"prog": "minilog broker"}),
                 "cluster": ("minilog.connector.cli_cluster", {"prog": "minilog cluster"}),
                 "certs": ("minilog.connector.cli_certs", {}),
                 "mirror": ("minilog.mirror.cli", {})}
DELEGATED = ("demo", *_ENTRY_POINTS)
_OWN_BROKERS = {"broker": "a broker listens where --listen or its properties say",
                "cluster": "a local cluster's brokers are found through its --data-dir",
                "certs": "it only writes files", "mirror": "mm2.properties names the clusters"}
COMMANDS = {"topics": _topics, "produce": _produce, "consume": _consume, "offsets": _offsets,
            "groups": _groups, "transactions": _tool(cli_transactions, "transactions"),
            "users": _users, "acls": _tool(cli_acls, "acls"), "configs": _configs,
            "leader-election": _tool(cli_leaders, "leader-election", refuses=True),
            "reassign-partitions": _tool(cli_reassign, "reassign-partitions", refuses=True),
            "console": _tool(cli_console, "console"), "connect": _connect}


def _global_flags_end(argv):
    """Where the global flags in front of the command word end (`-b HOST:PORT`,
    `--bootstrap-server=HOST:PORT`, `-X key=value`, `-Xkey=value`)."""
    i = 0
    while i < len(argv):
        if argv[i] in ("-b", "--bootstrap-server", "-X"):
            i += 2
        elif argv[i].startswith("--bootstrap-server=") or (argv[i][:2] in ("-b", "-X")
                                                            and len(argv[i]) > 2):
            i += 1
        else:
            return i
    return i


def _run_delegated(command, flags, rest):
    """`broker`, `cluster`, `demo`, `certs` and `mirror` have parsers of their own. The global flags in front of
    them: `demo` takes `-b` as its own `--bootstrap-server` (run on that cluster); the others
    start their own brokers, so a global flag there is refused in one line."""
    given = vars(global_flags().parse_args(flags))
    if "settings" in given:
        raise UserError(f"minilog {command}: -X does not apply: it sets up its own clients "
                        f"and brokers (see minilog {command} --help)")
    if command == "demo":
        if "bootstrap_server" in given:
            rest = ["--bootstrap-server", given["bootstrap_server"], *rest]
        from minilog.jobs.bank_demo import main as demo_main
        return demo_main(rest)
    if given:
        raise UserError(f"minilog {command}: --bootstrap-server does not apply: "
                        f"{_OWN_BROKERS[command]} (see minilog {command} --help)")
    module, kwargs = _ENTRY_POINTS[command]
    return importlib.import_module(module).main(rest, **kwargs)

def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    end = _global_flags_end(argv)
    try:
        if end < len(argv) and argv[end] in DELEGATED:
            return _run_delegated(argv[end], argv[:end], argv[end + 1:])
        args = build_parser().parse_args(argv)
        COMMANDS[args.command](args, sys.stdout)
        return 0
    except UserError as e:
        print(str(e), file=sys.stderr)
        return 2
    except Refused as e:
        print(str(e), file=sys.stderr)
        return 1
    except Interrupted as e:
        print(str(e), file=sys.stderr)
        return 130
    except ConfigError as e:
        print(f"minilog: bad client setting: {e}", file=sys.stderr)
        return 2
    except KafkaConnectionError as e:
        print(f"minilog: cannot reach the cluster: {e.detail}", file=sys.stderr)
        return 1
    except (KafkaError, SerializationError) as e:
        print(f"minilog: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        if isinstance(e, BrokenPipeError):  # `minilog consume ... | head`
            sys.stderr.close()
            return 0
        print(f"minilog: {e.strerror or e}" + (f": {e.filename}" if e.filename else ""),
              file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
