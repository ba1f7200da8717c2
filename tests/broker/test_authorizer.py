"""The StandardAuthorizer's rules, from tables: Kafka's implied operations, DENY over ALLOW,
LITERAL / wildcard / PREFIXED patterns, principals and hosts, super users and
allow.everyone.if.no.acl.found; the filters DescribeAcls and DeleteAcls take; what CreateAcls
refuses. No broker: the rules are pure."""
import pytest

from minilog.broker.security.acls import (
    AclBinding,
    AclFilter,
    AclOperation,
    AclSet,
    InvalidAcl,
    PatternType,
    PermissionType,
    ResourceType,
    new_binding,
)
from minilog.broker.security.authorizer import StandardAuthorizer, parse_super_users
from minilog.broker.server.config import ConfigError

Op, RT, PT, Perm = AclOperation, ResourceType, PatternType, PermissionType
ALICE, BOB = "User:alice", "User:bob"


def acl(op, name="orders", perm=Perm.ALLOW, principal=ALICE, pattern=PT.LITERAL,
        rtype=RT.TOPIC, host="*"):
    return AclBinding(rtype, name, pattern, principal, host, op, perm)


def authorizer(*acls, super_users=(), allow_if_no_acl=False):
    found = AclSet()
    for a in acls:
        found.add(a)
    return StandardAuthorizer(lambda: found, frozenset(super_users), allow_if_no_acl)


@pytest.mark.parametrize("granted, asked, expected", [
    (Op.READ, Op.READ, True),
    (Op.READ, Op.WRITE, False),
    (Op.READ, Op.DESCRIBE, True),
    (Op.WRITE, Op.DESCRIBE, True),
    (Op.DELETE, Op.DESCRIBE, True),
    (Op.ALTER, Op.DESCRIBE, True),
    (Op.CREATE, Op.DESCRIBE, False),
    (Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS, True),
    (Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS, False),
    (Op.DESCRIBE, Op.READ, False),
    (Op.ALL, Op.ALTER_CONFIGS, True),
])
def test_an_allow_grants_its_operation_and_kafkas_implied_ones(granted, asked, expected):
    assert authorizer(acl(granted)).authorize(ALICE, "127.0.0.1", asked, RT.TOPIC,
                                              "orders") is expected


def test_a_deny_wins_over_any_allow_but_implies_nothing_else():
    a = authorizer(acl(Op.ALL), acl(Op.WRITE, perm=Perm.DENY))
    assert not a.authorize(ALICE, "h", Op.WRITE, RT.TOPIC, "orders")
    assert a.authorize(ALICE, "h", Op.READ, RT.TOPIC, "orders")
    assert a.authorize(ALICE, "h", Op.DESCRIBE, RT.TOPIC, "orders")  # deny WRITE only


def test_a_prefixed_deny_overrides_a_literal_allow():
    a = authorizer(acl(Op.READ), acl(Op.READ, name="ord", pattern=PT.PREFIXED, perm=Perm.DENY))
    assert not a.authorize(ALICE, "h", Op.READ, RT.TOPIC, "orders")


@pytest.mark.parametrize("topic, expected", [
    ("orders-eu", True), ("orders", True), ("order", False), ("payments", False)])
def test_a_prefixed_acl_applies_to_names_starting_with_it(topic, expected):
    a = authorizer(acl(Op.READ, name="orders", pattern=PT.PREFIXED))
    assert a.authorize(ALICE, "h", Op.READ, RT.TOPIC, topic) is expected


def test_the_literal_wildcard_applies_to_every_resource_of_its_type_only():
    a = authorizer(acl(Op.READ, name="*"))
    assert a.authorize(ALICE, "h", Op.READ, RT.TOPIC, "anything")
    assert not a.authorize(ALICE, "h", Op.READ, RT.GROUP, "anything")


def test_principals_and_hosts_match_exactly_or_by_wildcard():
    a = authorizer(acl(Op.READ, host="10.0.0.1"), acl(Op.WRITE, principal="User:*"))
    assert a.authorize(ALICE, "10.0.0.1", Op.READ, RT.TOPIC, "orders")
    assert not a.authorize(ALICE, "10.0.0.2", Op.READ, RT.TOPIC, "orders")
    assert not a.authorize(BOB, "10.0.0.1", Op.READ, RT.TOPIC, "orders")
    assert a.authorize(BOB, "10.0.0.2", Op.WRITE, RT.TOPIC, "orders")


def test_super_users_may_do_anything_even_against_a_deny():
    a = authorizer(acl(Op.ALL, perm=Perm.DENY, principal="User:admin"),
                   super_users={"User:admin"})
    assert a.authorize("User:admin", "h", Op.DELETE, RT.TOPIC, "orders")


@pytest.mark.parametrize("allow_if_no_acl", [False, True])
def test_a_resource_no_acl_names_is_decided_by_allow_everyone_if_no_acl_found(allow_if_no_acl):
    a = authorizer(acl(Op.READ, principal=BOB), allow_if_no_acl=allow_if_no_acl)
    assert a.authorize(ALICE, "h", Op.READ, RT.TOPIC, "other") is allow_if_no_acl
    assert a.authorize(ALICE, "h", Op.READ, RT.CLUSTER, "kafka-cluster") is allow_if_no_acl
    # an ACL on the resource, even for someone else, means no default applies
    assert not a.authorize(ALICE, "h", Op.READ, RT.TOPIC, "orders")


def test_the_index_follows_changes_of_the_set():
    found = AclSet()
    a = StandardAuthorizer(lambda: found, frozenset())
    assert not a.authorize(ALICE, "h", Op.READ, RT.TOPIC, "orders")
    found.add(acl(Op.READ))
    assert a.authorize(ALICE, "h", Op.READ, RT.TOPIC, "orders")
    found.remove(acl(Op.READ))
    assert not a.authorize(ALICE, "h", Op.READ, RT.TOPIC, "orders")


@pytest.mark.parametrize("acls, expected", [
    ([acl(Op.WRITE, name="x")], True),
    ([acl(Op.WRITE, name="x", pattern=PT.PREFIXED)], True),
    ([acl(Op.READ, name="x")], False),
    ([acl(Op.WRITE, name="x"), acl(Op.WRITE, name="*", perm=Perm.DENY)], False),
    ([acl(Op.WRITE, name="xy"), acl(Op.WRITE, name="x", pattern=PT.PREFIXED, perm=Perm.DENY)],
     False),
    ([acl(Op.WRITE, name="x"), acl(Op.WRITE, name="y", perm=Perm.DENY)], True),
])
def test_authorize_any_is_true_when_some_resource_of_the_type_is_allowed(acls, expected):
    assert authorizer(*acls).authorize_any(ALICE, "h", Op.WRITE, RT.TOPIC) is expected


LITERAL_ORDERS = acl(Op.READ)
PREFIXED_ORD = acl(Op.WRITE, name="ord", pattern=PT.PREFIXED)
WILDCARD = acl(Op.DESCRIBE, name="*")
GROUP = acl(Op.READ, name="orders", rtype=RT.GROUP, principal=BOB)
EVERY = [LITERAL_ORDERS, PREFIXED_ORD, WILDCARD, GROUP]


@pytest.mark.parametrize("rtype, name, pattern, principal, expected", [
    (RT.ANY, None, PT.ANY, None, EVERY),
    (RT.TOPIC, None, PT.ANY, None, [LITERAL_ORDERS, PREFIXED_ORD, WILDCARD]),
    (RT.ANY, "orders", PT.ANY, None, [LITERAL_ORDERS, GROUP]),
    (RT.TOPIC, "orders", PT.LITERAL, None, [LITERAL_ORDERS]),
    (RT.TOPIC, "ord", PT.PREFIXED, None, [PREFIXED_ORD]),
    (RT.TOPIC, "orders", PT.MATCH, None, [LITERAL_ORDERS, PREFIXED_ORD, WILDCARD]),
    (RT.TOPIC, "payments", PT.MATCH, None, [WILDCARD]),
    (RT.ANY, None, PT.ANY, BOB, [GROUP]),
])
def test_filters_select_as_kafkas_do(rtype, name, pattern, principal, expected):
    f = AclFilter(rtype, name, pattern, principal, None, Op.ANY, Perm.ANY)
    assert {a for a in EVERY if f.matches(a)} == set(expected)


def test_filters_on_operation_and_permission():
    deny = acl(Op.READ, perm=Perm.DENY)
    f = AclFilter(RT.ANY, None, PT.ANY, None, None, Op.READ, Perm.DENY)
    assert [a for a in [LITERAL_ORDERS, deny, PREFIXED_ORD] if f.matches(a)] == [deny]


@pytest.mark.parametrize("fields, message", [
    ((RT.ANY, "t", PT.LITERAL, ALICE, "*", Op.READ, Perm.ALLOW), "Invalid resourceType"),
    ((RT.TOPIC, "t", PT.MATCH, ALICE, "*", Op.READ, Perm.ALLOW), "Invalid patternType"),
    ((RT.TOPIC, "t", PT.LITERAL, ALICE, "*", Op.ANY, Perm.ALLOW), "Invalid operation"),
    ((RT.TOPIC, "t", PT.LITERAL, ALICE, "*", Op.READ, Perm.ANY), "Invalid permissionType"),
    ((RT.TOPIC, "", PT.LITERAL, ALICE, "*", Op.READ, Perm.ALLOW), "should not be empty"),
    ((RT.CLUSTER, "c", PT.LITERAL, ALICE, "*", Op.ALTER, Perm.ALLOW), "kafka-cluster"),
    ((RT.TOPIC, "t", PT.LITERAL, "alice", "*", Op.READ, Perm.ALLOW), "Could not parse principal"),
    ((RT.TOPIC, "t", 99, ALICE, "*", Op.READ, Perm.ALLOW), "Invalid patternType"),
])
def test_create_acls_refuses_what_kafka_refuses(fields, message):
    with pytest.raises(InvalidAcl, match=message):
        new_binding(*fields)


def test_super_users_are_principals_separated_by_semicolons():
    assert parse_super_users(" User:admin;User:broker ;") == {"User:admin", "User:broker"}
    with pytest.raises(ConfigError, match="super.users"):
        parse_super_users("admin")
