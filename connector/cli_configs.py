"""`minilog configs describe`: a broker's or a topic's settings, as `kafka-configs.sh --describe`
prints them (`name=value sensitive=...`).

A password-type setting is printed as `name=null sensitive=true` whatever the broker sent: the
broker never sends one (Kafka's rule), and the tool does not print one an older broker would.
`cli.py` builds the parser and reports errors.
"""
from typing import TextIO

from minilog.connector.client import AdminClient

ENTITY_TYPES = {"brokers": "broker", "topics": "topic"}
# Kafka's config_source values of settings set on the entity itself (not defaults)
_OWN_SOURCES = {"broker": (2, 3), "topic": (1,)}


def add_parser(sub, common) -> None:
    configs = sub.add_parser("configs", help="describe a broker's or a topic's settings")
    csub = configs.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = csub.add_parser("describe", parents=[common],
                        help="settings of a broker (its id, or '' for the cluster default) "
                             "or of a topic")
    p.add_argument("--entity-type", required=True, choices=sorted(ENTITY_TYPES))
    p.add_argument("--entity-name", required=True, metavar="NAME")
    p.add_argument("--all", action="store_true",
                   help="every setting, not only those set on the entity itself")


def run(args, out: TextIO, conf: dict) -> None:
    kind = ENTITY_TYPES[args.entity_type]
    with AdminClient(conf) as admin:
        entries = admin.describe_configs(kind, args.entity_name)
    which = "All" if args.all else "Dynamic" if kind == "broker" else "Configs"
    label = "the cluster default" if kind == "broker" and args.entity_name == "" \
        else f"{kind} {args.entity_name}"
    out.write(f"{which} configs for {label} are:\n")
    for name, entry in sorted(entries.items()):
        if not args.all and entry.source not in _OWN_SOURCES[kind]:
            continue
        value = "null" if entry.sensitive or entry.value is None else entry.value
        out.write(f"  {name}={value} sensitive={str(entry.sensitive).lower()}\n")
