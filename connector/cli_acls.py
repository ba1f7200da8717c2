"""`minilog acls add|list|remove`: ACLs with `kafka-acls.sh`'s option names (`--allow-principal
User:alice --operation Read --topic orders --resource-pattern-type prefixed`, `--producer`,
`--consumer`, `--cluster`, `--group`, `--transactional-id`), through the admin client, printed
as kafka-acls.sh prints them."""
import argparse
from itertools import product

from minilog.connector.acl_types import (
    AclBinding,
    AclOperation,
    PatternType,
    PermissionType,
    ResourceType,
    code_named,
)
from minilog.connector.client import AdminClient

CLUSTER_NAME = "kafka-cluster"
_OPERATIONS = [o for o in AclOperation if o not in (AclOperation.UNKNOWN, AclOperation.ANY)]


def _named(kind, allowed=None):
    def parse(text):
        try:
            found = code_named(kind, text)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
        if allowed is not None and found not in allowed:
            raise argparse.ArgumentTypeError(
                f"must be one of {', '.join(m.name.lower() for m in allowed)}, got {text!r}")
        return found
    return parse


def add_parser(sub, common):
    acls = sub.add_parser("acls", help="ACLs: add, list, remove (kafka-acls.sh's options)")
    asub = acls.add_subparsers(dest="action", metavar="ACTION", required=True)
    for action, text in (("add", "create ACLs"), ("remove", "delete ACLs"),
                         ("list", "list ACLs (every ACL without a resource)")):
        p = asub.add_parser(action, parents=[common], help=text)
        p.add_argument("--topic", action="append", default=[], metavar="TOPIC")
        p.add_argument("--group", action="append", default=[], metavar="GROUP")
        p.add_argument("--transactional-id", action="append", default=[], metavar="ID")
        p.add_argument("--cluster", action="store_true", help="the cluster resource")
        patterns = [PatternType.LITERAL, PatternType.PREFIXED] if action == "add" else \
            [PatternType.ANY, PatternType.MATCH, PatternType.LITERAL, PatternType.PREFIXED]
        default = "literal; any without a resource" if action == "list" else "literal"
        p.add_argument("--resource-pattern-type", type=_named(PatternType, patterns),
                       metavar="TYPE", help=f"{', '.join(t.name.lower() for t in patterns)} "
                                            f"(default {default})")
        if action == "list":
            p.add_argument("--principal", action="append", default=[],
                           help="only the ACLs of this principal (repeatable)")
            continue
        p.add_argument("--allow-principal", action="append", default=[], metavar="PRINCIPAL",
                       help="e.g. User:alice (repeatable)")
        p.add_argument("--deny-principal", action="append", default=[], metavar="PRINCIPAL")
        p.add_argument("--allow-host", action="append", default=[], metavar="HOST",
                       help="default * (any host)")
        p.add_argument("--deny-host", action="append", default=[], metavar="HOST")
        p.add_argument("--operation", action="append", default=[],
                       type=_named(AclOperation, _OPERATIONS), metavar="OPERATION",
                       help=f"one of {', '.join(o.name.title().replace('_', '') for o in _OPERATIONS)} "
                            f"(repeatable; default All)")
        p.add_argument("--producer", action="store_true",
                       help="what a producer needs: Write, Describe, Create on the topics "
                            "(and Write, Describe on the transactional ids)")
        p.add_argument("--consumer", action="store_true",
                       help="what a consumer needs: Read, Describe on the topics, Read on the groups")
        p.add_argument("--force", action="store_true", help="accepted for kafka-acls.sh's habit")


def _resources(args, default_pattern):
    """[(resource type, name, pattern type)] the command names."""
    pattern = args.resource_pattern_type or default_pattern
    found = [(ResourceType.TOPIC, t, pattern) for t in args.topic]
    found += [(ResourceType.GROUP, g, pattern) for g in args.group]
    found += [(ResourceType.TRANSACTIONAL_ID, t, pattern) for t in args.transactional_id]
    if args.cluster:
        found.append((ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL))
    return found


def _operations_for(args, rtype):
    """The operations to grant on a resource: --operation's, or --producer/--consumer's."""
    ops = list(args.operation)
    if args.producer and rtype == ResourceType.TOPIC:
        ops += [AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE]
    if args.producer and rtype == ResourceType.TRANSACTIONAL_ID:
        ops += [AclOperation.WRITE, AclOperation.DESCRIBE]
    if args.consumer and rtype == ResourceType.TOPIC:
        ops += [AclOperation.READ, AclOperation.DESCRIBE]
    if args.consumer and rtype == ResourceType.GROUP:
        ops += [AclOperation.READ]
    if not ops and not (args.producer or args.consumer):
        ops = [AclOperation.ALL]
    return list(dict.fromkeys(ops))


def _bindings(args, usage_error):
    """Every ACL add/remove names: resources x principals x hosts x operations."""
    resources = _resources(args, PatternType.LITERAL)
    if not resources:
        raise usage_error("name a resource: --topic, --group, --transactional-id or --cluster")
    if args.consumer and args.topic and not args.group:
        raise usage_error("--consumer needs --group as well")
    if not args.allow_principal and not args.deny_principal:
        raise usage_error("name who: --allow-principal or --deny-principal")
    who = [(p, h, PermissionType.ALLOW) for p in args.allow_principal
           for h in args.allow_host or ["*"]]
    who += [(p, h, PermissionType.DENY) for p in args.deny_principal
            for h in args.deny_host or ["*"]]
    return [AclBinding(rtype, name, pattern, principal, host, op, permission)
            for (rtype, name, pattern), (principal, host, permission) in product(resources, who)
            for op in _operations_for(args, rtype)]


def _removal_filters(args, usage_error):
    """Without principals, every ACL of the named resources (kafka-acls.sh's --remove)."""
    if args.allow_principal or args.deny_principal:
        return [dict(resource_type=a.resource_type, resource_name=a.resource_name,
                     pattern_type=a.pattern_type, principal=a.principal, host=a.host,
                     operation=a.operation, permission=a.permission)
                for a in _bindings(args, usage_error)]
    resources = _resources(args, PatternType.LITERAL)
    if not resources:
        raise usage_error("name a resource: --topic, --group, --transactional-id or --cluster")
    return [dict(resource_type=rtype, resource_name=name, pattern_type=pattern)
            for rtype, name, pattern in resources]


def _print(acls, out):
    """kafka-acls.sh's layout: each resource pattern, then its ACLs."""
    by_resource: dict = {}
    for a in acls:
        by_resource.setdefault((a.resource_type, a.resource_name, a.pattern_type), []).append(a)
    for (rtype, name, pattern), found in sorted(by_resource.items()):
        out.write(f"Current ACLs for resource `ResourcePattern(resourceType={rtype.name}, "
                  f"name={name}, patternType={pattern.name})`: \n")
        for a in sorted(found, key=lambda a: (a.principal, a.host, a.operation, a.permission)):
            out.write(f" \t(principal={a.principal}, host={a.host}, "
                      f"operation={a.operation.name}, permissionType={a.permission.name})\n")
        out.write("\n")


def run(args, out, conf, usage_error):
    with AdminClient(conf) as admin:
        if args.action == "list":
            resources = _resources(args, PatternType.LITERAL) or \
                [(ResourceType.ANY, None, args.resource_pattern_type or PatternType.ANY)]
            found = []
            for (rtype, name, pattern), principal in product(resources,
                                                             args.principal or [None]):
                found += admin.describe_acls(resource_type=rtype, resource_name=name,
                                             pattern_type=pattern, principal=principal)
            _print(list(dict.fromkeys(found)), out)
        elif args.action == "add":
            acls = _bindings(args, usage_error)
            admin.create_acls(acls)
            out.write(f"Added {len(acls)} ACL{'s' if len(acls) != 1 else ''}:\n")
            _print(acls, out)
        else:
            removed = []
            for fields in _removal_filters(args, usage_error):
                removed += admin.delete_acls(**fields)
            out.write(f"Removed {len(removed)} ACL{'s' if len(removed) != 1 else ''}:\n")
            _print(removed, out)
