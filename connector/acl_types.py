"""Kafka's ACL vocabulary (`org.apache.kafka.common.acl` / `resource`): the wire codes of
resource types, pattern types, operations and permission types, and one ACL (`AclBinding`),
for the broker's authorizer and the admin client alike."""
import enum
from dataclasses import dataclass


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class PermissionType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


@dataclass(frozen=True)
class AclBinding:
    """One ACL: who (principal, host) may or may not do what (operation) to which resources
    (type, name, pattern type)."""
    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission: PermissionType

    def to_json(self) -> list:
        return [int(self.resource_type), self.resource_name, int(self.pattern_type),
                self.principal, self.host, int(self.operation), int(self.permission)]

    @classmethod
    def from_json(cls, d: list) -> "AclBinding":
        rt, name, pt, principal, host, op, perm = d
        return cls(ResourceType(rt), name, PatternType(pt), principal, host, AclOperation(op),
                   PermissionType(perm))


def code_named(kind: type[enum.IntEnum], text: str | int) -> enum.IntEnum:
    """The member of `kind` named `text` the way Kafka's tools write it (`Read`, `READ`,
    `IdempotentWrite`, `idempotent_write`, `prefixed`); raises ValueError naming the choices."""
    if isinstance(text, int):
        return kind(text)
    wanted = text.replace("_", "").replace("-", "").upper()
    for member in kind:
        if member.name.replace("_", "") == wanted and member.name != "UNKNOWN":
            return member
    choices = ", ".join(m.name for m in kind if m.name != "UNKNOWN")
    raise ValueError(f"{kind.__name__} must be one of {choices}, got {text!r}")
