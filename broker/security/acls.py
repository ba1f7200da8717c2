"""Kafka's access control lists as values: the filters Describe/DeleteAcls take, the checks
CreateAcls makes, and a cluster's set of ACLs. Pure data and rules, no broker: `authorizer.py` decides with them,
`acl_metadata.py` stores them.

The codes and `AclBinding` (`connector/acl_types.py`) are Kafka's, shared with the admin
client.
"""
from dataclasses import dataclass

# the vocabulary is the admin client's too; the broker's modules import it from here
from minilog.connector.acl_types import (  # noqa: F401
    AclBinding,
    AclOperation,
    PatternType,
    PermissionType,
    ResourceType,
)

WILDCARD = "*"                  # a LITERAL resource name matching every resource of its type
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"  # the one name of the CLUSTER resource


# An ALLOW for any of these also allows the key (Kafka's implied operations); DENY implies
# nothing but itself (and ALL).
IMPLIED_BY = {
    AclOperation.DESCRIBE: frozenset({AclOperation.DESCRIBE, AclOperation.READ,
                                      AclOperation.WRITE, AclOperation.DELETE,
                                      AclOperation.ALTER}),
    AclOperation.DESCRIBE_CONFIGS: frozenset({AclOperation.DESCRIBE_CONFIGS,
                                              AclOperation.ALTER_CONFIGS}),
}


class InvalidAcl(ValueError):
    """An ACL or filter Kafka refuses with INVALID_REQUEST; the message says why."""


def _enum(kind, code):
    try:
        return kind(code)
    except ValueError:
        return kind.UNKNOWN


def new_binding(resource_type: int, resource_name: str, pattern_type: int, principal: str,
                host: str, operation: int, permission: int) -> AclBinding:
    """An ACL to create, checked as Kafka's CreateAcls checks it; raises InvalidAcl."""
    rt, pt = _enum(ResourceType, resource_type), _enum(PatternType, pattern_type)
    op, perm = _enum(AclOperation, operation), _enum(PermissionType, permission)
    if rt in (ResourceType.UNKNOWN, ResourceType.ANY):
        raise InvalidAcl(f"Invalid resourceType {resource_type}")
    if pt not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise InvalidAcl(f"Invalid patternType {pattern_type}")
    if op in (AclOperation.UNKNOWN, AclOperation.ANY):
        raise InvalidAcl(f"Invalid operation {operation}")
    if perm in (PermissionType.UNKNOWN, PermissionType.ANY):
        raise InvalidAcl(f"Invalid permissionType {permission}")
    if not resource_name:
        raise InvalidAcl("Resource name should not be empty")
    if rt == ResourceType.CLUSTER and resource_name != CLUSTER_NAME:
        raise InvalidAcl(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    check_principal(principal)
    if host is None or not host:
        raise InvalidAcl("Host should not be empty (use * for any host)")
    return AclBinding(rt, resource_name, pt, principal, host, op, perm)


def check_principal(principal: str | None) -> None:
    """Kafka's principals are `Type:name` (`User:alice`); raises InvalidAcl otherwise."""
    kind, sep, name = (principal or "").partition(":")
    if not sep or not kind or not name:
        raise InvalidAcl(f"Could not parse principal from `{principal}` "
                         f"(no colon is present separating the principal type from name)")


@dataclass(frozen=True)
class AclFilter:
    """What DescribeAcls and DeleteAcls select: None names match anything, ANY codes too;
    the MATCH pattern type selects the ACLs that would apply to the named resource."""
    resource_type: ResourceType
    resource_name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: AclOperation
    permission: PermissionType

    @classmethod
    def parse(cls, resource_type: int, resource_name: str | None, pattern_type: int,
              principal: str | None, host: str | None, operation: int,
              permission: int) -> "AclFilter":
        """A filter from the wire; raises InvalidAcl for UNKNOWN codes, as Kafka does."""
        f = cls(_enum(ResourceType, resource_type), resource_name,
                _enum(PatternType, pattern_type), principal, host,
                _enum(AclOperation, operation), _enum(PermissionType, permission))
        for name, value in (("resource type", f.resource_type), ("pattern type", f.pattern_type),
                            ("operation", f.operation), ("permission type", f.permission)):
            if value.name == "UNKNOWN":
                raise InvalidAcl(f"The filter's {name} is unknown")
        if principal is not None:
            check_principal(principal)
        return f

    def matches(self, acl: AclBinding) -> bool:
        if self.resource_type not in (ResourceType.ANY, acl.resource_type):
            return False
        if not self._matches_pattern(acl):
            return False
        return (self.principal in (None, acl.principal) and self.host in (None, acl.host)
                and self.operation in (AclOperation.ANY, acl.operation)
                and self.permission in (PermissionType.ANY, acl.permission))

    def _matches_pattern(self, acl: AclBinding) -> bool:
        name, pt = self.resource_name, self.pattern_type
        if pt == PatternType.MATCH:
            if name is None:
                return True
            if acl.pattern_type == PatternType.LITERAL:
                return acl.resource_name in (name, WILDCARD)
            return name.startswith(acl.resource_name)
        if pt != PatternType.ANY and pt != acl.pattern_type:
            return False
        return name is None or name == acl.resource_name


class AclSet:
    """The ACLs a cluster has; `version` moves on every change (the authorizer's index
    follows it)."""

    def __init__(self):
        self._acls: set = set()
        self.version = 0

    @classmethod
    def of(cls, acls) -> "AclSet":
        """A set holding `acls` (an image's)."""
        found = cls()
        found._acls = set(acls)
        return found

    def __iter__(self):
        return iter(self._acls)

    def __len__(self) -> int:
        return len(self._acls)

    def __contains__(self, acl: AclBinding) -> bool:
        return acl in self._acls

    def add(self, acl: AclBinding) -> None:
        if acl not in self._acls:
            self._acls.add(acl)
            self._bump()

    def remove(self, acl: AclBinding) -> None:
        if acl in self._acls:
            self._acls.discard(acl)
            self._bump()

    def matching(self, acl_filter: AclFilter) -> list:
        return sorted((a for a in self._acls if acl_filter.matches(a)), key=AclBinding.to_json)

    def _bump(self) -> None:
        self.version += 1

    def to_json(self) -> list:
        return sorted(a.to_json() for a in self._acls)

    def load_json(self, data: list) -> None:
        self._acls = {AclBinding.from_json(d) for d in data}
        self.version += 1
