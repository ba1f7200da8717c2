"""CreateAcls, DescribeAcls and DeleteAcls (Kafka's admin ACL APIs).

CreateAcls and DeleteAcls need ALTER on the cluster and are forwarded to the active controller
(the refusal is made where the client came in, `access.py`); the controller decides against its
working view and writes `acl` records (`acl_metadata.py`). DescribeAcls needs DESCRIBE on the
cluster and is answered by any broker from its committed ACLs. Without an authorizer the APIs
answer SECURITY_DISABLED, as Kafka does.
"""
from minilog.connector.protocol import ApiKey, ErrorCode, response

from ...security.access import CLUSTER, DESCRIBE, allowed
from ...security.acls import AclFilter, InvalidAcl, PatternType, new_binding
from . import handles

_CREATE = response(ApiKey.CREATE_ACLS)
_DESCRIBE = response(ApiKey.DESCRIBE_ACLS)
_DELETE = response(ApiKey.DELETE_ACLS)
_DISABLED = "No Authorizer is configured on the broker"


def _pattern(req_item, version: int, field: str) -> int:
    """Version 0 has no pattern type: it knew only LITERAL."""
    return getattr(req_item, field) if version >= 1 else PatternType.LITERAL


@handles(ApiKey.CREATE_ACLS, 0, 3)
async def create_acls(broker, header, req):
    if broker.authorizer is None:
        return _CREATE.cls(throttle_time_ms=0, results=[
            _CREATE.make("results", error_code=ErrorCode.SECURITY_DISABLED,
                         error_message=_DISABLED) for _ in req.creations])
    results, added = [], []
    existing = broker.acls.working()
    for c in req.creations:
        try:
            acl = new_binding(c.resource_type, c.resource_name,
                              _pattern(c, header.api_version, "resource_pattern_type"),
                              c.principal, c.host, c.operation, c.permission_type)
        except InvalidAcl as e:
            results.append(_CREATE.make("results", error_code=ErrorCode.INVALID_REQUEST,
                                        error_message=str(e)))
            continue
        if acl not in existing and acl not in added:  # creating an existing ACL is a no-op
            added.append(acl)
        results.append(_CREATE.make("results", error_code=0, error_message=None))
    if added:
        broker.acls.write(added, [])
    return _CREATE.cls(throttle_time_ms=0, results=results)


def _filter(f, version: int) -> AclFilter:
    return AclFilter.parse(f.resource_type_filter, f.resource_name_filter,
                           _pattern(f, version, "pattern_type_filter"), f.principal_filter,
                           f.host_filter, f.operation, f.permission_type)


@handles(ApiKey.DESCRIBE_ACLS, 0, 3)
async def describe_acls(broker, header, req):
    def failed(code, message):
        return _DESCRIBE.cls(throttle_time_ms=0, error_code=code, error_message=message,
                             resources=[])
    if broker.authorizer is None:
        return failed(ErrorCode.SECURITY_DISABLED, _DISABLED)
    if not allowed(broker, header, DESCRIBE, CLUSTER):
        return failed(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
    try:
        acl_filter = _filter(req, header.api_version)
    except InvalidAcl as e:
        return failed(ErrorCode.INVALID_REQUEST, str(e))
    resources: dict = {}
    for acl in broker.acls.current().matching(acl_filter):
        key = (acl.resource_type, acl.resource_name, acl.pattern_type)
        resources.setdefault(key, []).append(_DESCRIBE.make(
            "resources", "acls", principal=acl.principal, host=acl.host,
            operation=acl.operation, permission_type=acl.permission))
    return _DESCRIBE.cls(throttle_time_ms=0, error_code=0, error_message=None, resources=[
        _DESCRIBE.make("resources", resource_type=rt, resource_name=name, pattern_type=pt,
                       acls=acls) for (rt, name, pt), acls in resources.items()])


@handles(ApiKey.DELETE_ACLS, 0, 3)
async def delete_acls(broker, header, req):
    if broker.authorizer is None:
        return _DELETE.cls(throttle_time_ms=0, filter_results=[
            _DELETE.make("filter_results", error_code=ErrorCode.SECURITY_DISABLED,
                         error_message=_DISABLED, matching_acls=[]) for _ in req.filters])
    results, removed = [], []
    existing = broker.acls.working()
    for f in req.filters:
        try:
            acl_filter = _filter(f, header.api_version)
        except InvalidAcl as e:
            results.append(_DELETE.make("filter_results", error_code=ErrorCode.INVALID_REQUEST,
                                        error_message=str(e), matching_acls=[]))
            continue
        matched = existing.matching(acl_filter)
        removed.extend(a for a in matched if a not in removed)
        results.append(_DELETE.make("filter_results", error_code=0, error_message=None,
                                    matching_acls=[_DELETE.make(
                                        "filter_results", "matching_acls", error_code=0,
                                        error_message=None, resource_type=a.resource_type,
                                        resource_name=a.resource_name,
                                        pattern_type=a.pattern_type, principal=a.principal,
                                        host=a.host, operation=a.operation,
                                        permission_type=a.permission) for a in matched]))
    if removed:
        broker.acls.write([], removed)
    return _DELETE.cls(throttle_time_ms=0, filter_results=results)
