"""Kafka's StandardAuthorizer: may this principal, from this host, do this operation on this
resource? Decided from the cluster's ACLs (`acls.AclSet`), `super.users` and
`allow.everyone.if.no.acl.found`, with Kafka's rules: super users may do anything; a matching
DENY wins over any ALLOW; an ALLOW of READ, WRITE, DELETE or ALTER allows DESCRIBE, and one of
ALTER_CONFIGS allows DESCRIBE_CONFIGS; a resource no ACL names at all is decided by
`allow.everyone.if.no.acl.found` (default false). ACLs apply through LITERAL names (or the `*`
wildcard) and PREFIXED names, to their principal (or `User:*`) and host (or `*`).

The ACLs of each resource type are indexed once per change of the set (literal names in a
dict), so a check costs a few lookups plus a scan of the prefixed ACLs of that type.
"""
from collections.abc import Callable

from ..config.broker_keys import ConfigError
from .acls import (
    IMPLIED_BY,
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AclBinding,
    AclOperation,
    AclSet,
    PatternType,
    PermissionType,
    ResourceType,
)

# Kafka's authorizer class names; either turns ACLs on (both behave as StandardAuthorizer).
AUTHORIZER_CLASSES = frozenset({"org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                                "kafka.security.authorizer.AclAuthorizer"})


class _Index:
    """One resource type's ACLs: literal ones by name, prefixed ones in a list."""

    def __init__(self):
        self.literal: dict = {}
        self.prefixed: list = []

    def applying_to(self, name: str):
        yield from self.literal.get(name, ())
        if name != WILDCARD:
            yield from self.literal.get(WILDCARD, ())
        for acl in self.prefixed:
            if name.startswith(acl.resource_name):
                yield acl


class StandardAuthorizer:
    def __init__(self, acls: Callable[[], AclSet], super_users: frozenset,
                 allow_if_no_acl: bool = False):
        self._acls = acls  # the current set (the image's, which a metadata reset replaces)
        self.super_users = super_users
        self.allow_if_no_acl = allow_if_no_acl
        self._indexed: tuple = (None, -1)  # (the set indexed, its version)
        self._index: dict = {}

    def _indexes(self) -> dict:
        acls = self._acls()
        if self._indexed[0] is not acls or self._indexed[1] != acls.version:
            index: dict = {}
            for acl in acls:
                found = index.setdefault(acl.resource_type, _Index())
                if acl.pattern_type == PatternType.PREFIXED:
                    found.prefixed.append(acl)
                else:
                    found.literal.setdefault(acl.resource_name, []).append(acl)
            self._index, self._indexed = index, (acls, acls.version)
        return self._index

    def authorize(self, principal: str, host: str | None, operation: AclOperation,
                  resource_type: ResourceType, name: str) -> bool:
        if principal in self.super_users:
            return True
        index = self._indexes().get(resource_type)
        if index is None:
            return self.allow_if_no_acl
        allowing = IMPLIED_BY.get(operation, (operation,))
        found = allowed = False
        for acl in index.applying_to(name):
            found = True
            if not _applies(acl, principal, host):
                continue
            if acl.permission == PermissionType.DENY:
                if acl.operation in (operation, AclOperation.ALL):
                    return False
            elif acl.operation == AclOperation.ALL or acl.operation in allowing:
                allowed = True
        return allowed if found else self.allow_if_no_acl

    def authorize_any(self, principal: str, host: str | None, operation: AclOperation,
                      resource_type: ResourceType) -> bool:
        """May the principal do `operation` on at least one resource of the type (Kafka's
        authorizeByResourceType: an idempotent producer needs WRITE on some topic)?"""
        if principal in self.super_users:
            return True
        index = self._indexes().get(resource_type)
        if index is None:
            return self.allow_if_no_acl
        acls = [a for a in (*[a for v in index.literal.values() for a in v], *index.prefixed)
                if _applies(a, principal, host) and a.operation in (operation, AclOperation.ALL)]
        denied = [a for a in acls if a.permission == PermissionType.DENY]
        if any(a.pattern_type == PatternType.LITERAL and a.resource_name == WILDCARD
               for a in denied):
            return False
        for a in acls:
            if a.permission == PermissionType.ALLOW and not any(_covers(d, a) for d in denied):
                return True
        return False


def _applies(acl: AclBinding, principal: str, host: str | None) -> bool:
    return acl.principal in (principal, WILDCARD_PRINCIPAL) and acl.host in (host, WILDCARD)


def _covers(deny: AclBinding, allow: AclBinding) -> bool:
    """Does the DENY apply to every resource the ALLOW names?"""
    if deny.pattern_type == PatternType.LITERAL:
        return allow.pattern_type == PatternType.LITERAL and \
            deny.resource_name == allow.resource_name
    return allow.resource_name.startswith(deny.resource_name)


def parse_super_users(spec: str | None) -> frozenset:
    """`super.users`: principals separated by `;` (Kafka's separator), e.g. `User:admin;User:bob`."""
    out = set()
    for item in (spec or "").split(";"):
        item = item.strip()
        if not item:
            continue
        if ":" not in item:
            raise ConfigError(f"super.users takes principals such as User:admin separated by "
                              f"';', got {item!r}")
        out.add(item)
    return frozenset(out)


def authorizer_from_config(config, acls: Callable[[], AclSet]) -> StandardAuthorizer | None:
    """The broker's authorizer, or None when `authorizer.class.name` is empty (no checks)."""
    name = (config["authorizer.class.name"] or "").strip()
    if not name:
        return None
    if name not in AUTHORIZER_CLASSES:
        raise ConfigError(f"authorizer.class.name must be "
                          f"org.apache.kafka.metadata.authorizer.StandardAuthorizer (or empty), "
                          f"got {name!r}")
    return StandardAuthorizer(acls, parse_super_users(config["super.users"]),
                              config["allow.everyone.if.no.acl.found"])
