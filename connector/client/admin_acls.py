"""ACLs through Kafka's admin APIs: CreateAcls, DescribeAcls and DeleteAcls, as
`kafka-acls.sh` uses them. ACLs are `AclBinding`s (`connector/acl_types.py`); a filter is the
same fields where None, or ANY, matches anything (MATCH: every ACL that applies to a name)."""
from minilog.connector.acl_types import (
    AclBinding,
    AclOperation,
    PatternType,
    PermissionType,
    ResourceType,
    code_named,
)
from typing import Any

from minilog.connector.protocol import ApiKey, KafkaError, request

from .connection import BrokerConnection

_CREATE = request(ApiKey.CREATE_ACLS)
_DELETE = request(ApiKey.DELETE_ACLS)


def acl_filter(resource_type: str | int = "ANY", resource_name: str | None = None,
               pattern_type: str | int = "ANY", principal: str | None = None,
               host: str | None = None, operation: str | int = "ANY",
               permission: str | int = "ANY") -> dict[str, Any]:
    """A filter's fields under DescribeAcls' names (codes from names like kafka-acls.sh's)."""
    return dict(resource_type_filter=code_named(ResourceType, resource_type),
                resource_name_filter=resource_name,
                pattern_type_filter=code_named(PatternType, pattern_type),
                principal_filter=principal, host_filter=host,
                operation=code_named(AclOperation, operation),
                permission_type=code_named(PermissionType, permission))


def _binding(rtype: int, name: str, pattern: int, principal: str, host: str, operation: int,
             permission: int) -> AclBinding:
    return AclBinding(ResourceType(rtype), name, PatternType(pattern), principal, host,
                      AclOperation(operation), PermissionType(permission))


async def create(conn: BrokerConnection, acls: list[AclBinding]) -> None:
    """Create the ACLs; raise the first one's error (Kafka's code and message)."""
    body = _CREATE.cls(creations=[_CREATE.make(
        "creations", resource_type=a.resource_type, resource_name=a.resource_name,
        resource_pattern_type=a.pattern_type, principal=a.principal, host=a.host,
        operation=a.operation, permission_type=a.permission) for a in acls])
    resp = await conn.send(ApiKey.CREATE_ACLS, body)
    for acl, r in zip(acls, resp.results):
        if r.error_code:
            raise KafkaError(r.error_code, f"{acl}: {r.error_message}")


async def describe(conn: BrokerConnection, fields: dict[str, Any]) -> list[AclBinding]:
    """The ACLs matching the filter `fields` (from `acl_filter`)."""
    resp = await conn.send(ApiKey.DESCRIBE_ACLS, request(ApiKey.DESCRIBE_ACLS).cls(**fields))
    if resp.error_code:
        raise KafkaError(resp.error_code, resp.error_message)
    return [_binding(r.resource_type, r.resource_name, r.pattern_type, a.principal, a.host,
                     a.operation, a.permission_type) for r in resp.resources for a in r.acls]


async def delete(conn: BrokerConnection, fields: dict[str, Any]) -> list[AclBinding]:
    """Delete the ACLs matching the filter `fields`; the ACLs deleted."""
    resp = await conn.send(ApiKey.DELETE_ACLS, _DELETE.cls(filters=[
        _DELETE.make("filters", **fields)]))
    deleted: list[AclBinding] = []
    for r in resp.filter_results:
        if r.error_code:
            raise KafkaError(r.error_code, r.error_message)
        deleted += [_binding(a.resource_type, a.resource_name, a.pattern_type, a.principal,
                             a.host, a.operation, a.permission_type) for a in r.matching_acls]
    return deleted
