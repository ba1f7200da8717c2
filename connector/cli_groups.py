"""`minilog groups ...`: consumer groups from the command line, like `kafka-consumer-groups`.

    minilog groups list [--state] [--include-internal]
    minilog groups describe GROUP...      the protocol and assignor; per partition: offsets, lag
                                          and owner, as --describe; members' epochs (KIP-848)
    minilog groups delete GROUP...
    minilog groups reset-offsets GROUP --topic T[:P,P...] (--to-earliest | --to-latest |
        --to-offset N | --to-datetime ISO | --shift-by N) [--execute]

`reset-offsets` is a dry run unless `--execute` is given, as Kafka's tool; both print the
offsets the group would get. `list` leaves out the exactly-once Spark sink's replay-marker
groups (internal_groups.py) unless `--include-internal`, which marks them. `cli.py` builds the
parser and reports errors.
"""
import argparse
import datetime

from minilog.connector.client import AdminClient, KafkaError
from minilog.connector.internal_groups import sink_marker_groups
from minilog.connector.protocol import ErrorCode
from minilog.connector.tables import table

MEMBER_COLUMNS = ("MEMBER-ID", "PROTOCOL", "EPOCH", "ASSIGNMENT")
DESCRIBE_COLUMNS = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                    "CONSUMER-ID", "HOST", "CLIENT-ID")


def add_parser(sub, common):
    groups = sub.add_parser("groups", help="list, describe, delete consumer groups; reset offsets")
    gsub = groups.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = gsub.add_parser("list", parents=[common], help="list group ids")
    p.add_argument("--state", action="store_true", help="also show each group's state")
    p.add_argument("--include-internal", action="store_true",
                   help="also list the exactly-once Spark sink's replay-marker groups, marked "
                        "internal (left out by default: they are not consumers)")
    p = gsub.add_parser("describe", parents=[common],
                        help="offsets, log end offsets, lag and owner of each partition")
    p.add_argument("groups", nargs="+", metavar="GROUP")
    p = gsub.add_parser("delete", parents=[common], help="delete empty groups and their offsets")
    p.add_argument("groups", nargs="+", metavar="GROUP")
    p = gsub.add_parser("reset-offsets", parents=[common],
                        help="move an inactive group's offsets (dry run without --execute)")
    p.add_argument("group")
    p.add_argument("--topic", required=True, metavar="TOPIC[:P,P...]", type=parse_topic,
                   help="topic, optionally with partitions, e.g. orders:0,2")
    to = p.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true")
    to.add_argument("--to-latest", action="store_true")
    to.add_argument("--to-offset", type=int, metavar="N")
    to.add_argument("--to-datetime", metavar="ISO", type=parse_datetime,
                    help="first offset at or after this time, e.g. 2024-05-01T12:00:00Z "
                         "(local time when no zone is given)")
    to.add_argument("--shift-by", type=int, metavar="N", help="add N (may be negative)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--execute", action="store_true", help="commit the new offsets")
    mode.add_argument("--dry-run", action="store_true", help="only show them (the default)")


def run(args, out, err, conf):
    with AdminClient(conf) as admin:
        if args.action == "list":
            _list(admin, args, out)
        elif args.action == "describe":
            for i, gid in enumerate(args.groups):
                if i:
                    out.write("\n")
                describe(admin, gid, out, err)
        elif args.action == "delete":
            for gid in args.groups:
                _existing(admin, gid)
                admin.delete_groups([gid])
                out.write(f"Deleted consumer group {gid}.\n")
        else:
            _reset(admin, args, out, err)


def _list(admin, args, out):
    listed = admin.list_groups()
    internal = sink_marker_groups(admin, listed)
    for g in listed:
        if g.group_id in internal and not args.include_internal:
            continue
        columns = [g.group_id, *([str(g.state)] if args.state else []),
                   *(["internal (exactly-once sink marker)"] if g.group_id in internal else [])]
        out.write("\t".join(columns) + "\n")


def _existing(admin, gid):
    desc = admin.describe_groups([gid])[gid]
    if desc.state == "Dead":
        raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"consumer group {gid!r} does not exist")
    return desc


def _log_end_offsets(admin, tps):
    """{tp: log end offset}; partitions of deleted topics are left out."""
    out = {}
    for topic in sorted({tp.topic for tp in tps}):
        mine = [tp for tp in tps if tp.topic == topic]
        try:
            found = admin.list_offsets({tp: "latest" for tp in mine})
        except KafkaError:
            continue
        out.update({tp: o.offset for tp, o in found.items() if o is not None})
    return out


def describe(admin, gid, out, err):
    """Rows as `kafka-consumer-groups --describe`: every partition with a committed offset or
    an owner; '-' where there is none."""
    desc = _existing(admin, gid)
    committed = admin.list_group_offsets(gid)
    owners = {tp: m for m in desc.members for tp in m.assignment}
    tps = sorted(set(committed) | set(owners))
    ends = _log_end_offsets(admin, tps)
    if desc.state in ("PreparingRebalance", "CompletingRebalance"):
        err.write(f"Warning: consumer group '{gid}' is rebalancing.\n")
    out.write(f"Consumer group '{gid}': protocol {desc.group_type}, assignor "
              f"{desc.protocol or '-'}, state {desc.state}"
              + (f", group epoch {desc.group_epoch}" if desc.group_epoch is not None else "")
              + "\n\n")
    if desc.group_type == "consumer" and desc.members:
        table([MEMBER_COLUMNS] + [(m.member_id, m.member_type or "-", m.member_epoch,
                                   _partitions(m.assignment)) for m in desc.members], out)
        out.write("\n")
    if not desc.members:
        out.write(f"Consumer group '{gid}' has no active members.\n\n")
    rows = [DESCRIBE_COLUMNS]
    for tp in tps:
        om, end, m = committed.get(tp), ends.get(tp), owners.get(tp)
        current = om.offset if om is not None else "-"
        lag = end - om.offset if om is not None and end is not None else "-"
        rows.append((gid, tp.topic, tp.partition, current, "-" if end is None else end, lag,
                     m.member_id if m else "-", m.host if m else "-", m.client_id if m else "-"))
    for m in desc.members:
        if not m.assignment:  # an idle member: shown without partitions, as Kafka does
            rows.append((gid, "-", "-", "-", "-", "-", m.member_id, m.host, m.client_id))
    table(rows, out)


def _partitions(tps):
    """topic:0,1,2;topic2:0 (or '-'): a member's assignment as one column."""
    by_topic = {}
    for tp in sorted(tps):
        by_topic.setdefault(tp.topic, []).append(str(tp.partition))
    return ";".join(f"{t}:{','.join(ps)}" for t, ps in by_topic.items()) or "-"


def parse_topic(spec):
    """TOPIC or TOPIC:P,P... (Kafka's tool's syntax) as (topic, [partitions] or None)."""
    topic, sep, parts = spec.partition(":")
    if not topic:
        raise argparse.ArgumentTypeError(f"{spec!r} names no topic")
    if not sep:
        return topic, None
    try:
        return topic, sorted({int(p) for p in parts.split(",") if p.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{spec!r}: partitions must be numbers, e.g. {topic}:0,1") from None


def parse_datetime(text):
    """ISO 8601 to ms since the epoch; local time when the text has no zone (as Kafka)."""
    try:
        dt = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an ISO 8601 time (e.g. 2024-05-01T12:00:00Z)") from None
    if dt.tzinfo is None:
        dt = dt.astimezone()
    return int(dt.timestamp() * 1000)


def _reset(admin, args, out, err):
    topic, partitions = args.topic
    if args.to_earliest or args.to_latest:
        to, value = ("earliest" if args.to_earliest else "latest"), None
    elif args.to_offset is not None:
        to, value = "offset", args.to_offset
    elif args.to_datetime is not None:
        to, value = "timestamp", args.to_datetime
    else:
        to, value = "shift", args.shift_by
    new = admin.reset_group_offsets(args.group, topic, to, value, partitions,
                                    dry_run=not args.execute)
    rows = [("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")]
    rows += [(args.group, tp.topic, tp.partition, o) for tp, o in new.items()]
    table(rows, out)
    if not args.execute:
        err.write("Dry run: nothing changed (add --execute to reset the offsets).\n")
