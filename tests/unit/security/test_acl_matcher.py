"""security/acl.py: Kafka's AclAuthorizer decision rule, filters and validation, cases
taken from Kafka's AuthorizerTest / AclAuthorizerTest."""

from __future__ import annotations

import pytest

from gregor_broker.security.acl import (
    MATCH_ALL,
    AclBinding,
    AclBindingFilter,
    AclCache,
    AclEntry,
    AclEntryFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    parse_super_users,
    validate_binding,
)

ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
READ, WRITE, DESCRIBE = AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE
TOPIC, GROUP = ResourceType.TOPIC, ResourceType.GROUP
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
ALICE, BOB = "User:alice", "User:bob"
HOST = "192.168.0.1"


def entry(principal: str, op: AclOperation, perm: AclPermissionType = ALLOW, host: str = "*"):
    return AclEntry(principal, host, op, perm)


def cache_with(*acls: tuple[ResourcePattern, AclEntry], **options: object) -> AclCache:
    cache = AclCache(**options)  # type: ignore[arg-type]
    by_pattern: dict[ResourcePattern, set[AclEntry]] = {}
    for pattern, acl in acls:
        by_pattern.setdefault(pattern, set()).add(acl)
    for pattern, entries in by_pattern.items():
        cache.update(pattern, entries)
    return cache


def topic(name: str, pattern_type: PatternType = LITERAL) -> ResourcePattern:
    return ResourcePattern(TOPIC, name, pattern_type)


def test_no_acl_denies_unless_allow_everyone() -> None:
    assert not AclCache().authorize(ALICE, HOST, READ, TOPIC, "t")
    assert AclCache(allow_everyone_if_no_acl_found=True).authorize(ALICE, HOST, READ, TOPIC, "t")
    # Any ACL on the resource, even for someone else, ends "allow everyone".
    cache = cache_with((topic("t"), entry(BOB, READ)), allow_everyone_if_no_acl_found=True)
    assert not cache.authorize(ALICE, HOST, READ, TOPIC, "t")
    assert cache.authorize(ALICE, HOST, READ, TOPIC, "other")


def test_literal_allow_is_per_principal_operation_and_resource() -> None:
    cache = cache_with((topic("t"), entry(ALICE, READ)))
    assert cache.authorize(ALICE, HOST, READ, TOPIC, "t")
    assert not cache.authorize(ALICE, HOST, WRITE, TOPIC, "t")
    assert not cache.authorize(BOB, HOST, READ, TOPIC, "t")
    assert not cache.authorize(ALICE, HOST, READ, TOPIC, "t2")
    assert not cache.authorize(ALICE, HOST, READ, GROUP, "t")


@pytest.mark.parametrize("implying", [READ, WRITE, AclOperation.DELETE, AclOperation.ALTER])
def test_describe_is_implied(implying: AclOperation) -> None:
    cache = cache_with((topic("t"), entry(ALICE, implying)))
    assert cache.authorize(ALICE, HOST, DESCRIBE, TOPIC, "t")
    # Implication goes one way only.
    assert not cache_with((topic("t"), entry(ALICE, DESCRIBE))).authorize(
        ALICE, HOST, implying, TOPIC, "t"
    )


def test_describe_configs_implied_by_alter_configs_and_all_covers_everything() -> None:
    cache = cache_with((topic("t"), entry(ALICE, AclOperation.ALTER_CONFIGS)))
    assert cache.authorize(ALICE, HOST, AclOperation.DESCRIBE_CONFIGS, TOPIC, "t")
    assert not cache.authorize(ALICE, HOST, DESCRIBE, TOPIC, "t")
    everything = cache_with((topic("t"), entry(ALICE, AclOperation.ALL)))
    for op in (READ, WRITE, AclOperation.CREATE, AclOperation.DELETE, DESCRIBE):
        assert everything.authorize(ALICE, HOST, op, TOPIC, "t")


def test_deny_wins_over_allow_including_deny_all_and_implied() -> None:
    cache = cache_with((topic("t"), entry(ALICE, READ)), (topic("t"), entry(ALICE, READ, DENY)))
    assert not cache.authorize(ALICE, HOST, READ, TOPIC, "t")
    cache = cache_with(
        (topic("t"), entry(ALICE, AclOperation.ALL)), (topic("t"), entry(ALICE, WRITE, DENY))
    )
    assert cache.authorize(ALICE, HOST, READ, TOPIC, "t")
    assert not cache.authorize(ALICE, HOST, WRITE, TOPIC, "t")
    # A DENY of Read does not deny Describe (no implication for DENY but ALL).
    cache = cache_with((topic("t"), entry(ALICE, READ)), (topic("t"), entry(ALICE, DESCRIBE)))
    cache.update(topic("t"), {entry(ALICE, DESCRIBE), entry(ALICE, READ, DENY)})
    assert cache.authorize(ALICE, HOST, DESCRIBE, TOPIC, "t")
    # DENY ALL for everyone on every topic: nobody but super users.
    cache = cache_with(
        (topic("t"), entry(ALICE, READ)),
        (topic("*"), entry("User:*", AclOperation.ALL, DENY)),
        super_users={"User:admin"},
    )
    assert not cache.authorize(ALICE, HOST, READ, TOPIC, "t")
    assert cache.authorize("User:admin", HOST, READ, TOPIC, "t")


def test_wildcards_principal_host_and_resource() -> None:
    cache = cache_with((topic("*"), entry("User:*", READ)))
    assert cache.authorize(ALICE, HOST, READ, TOPIC, "anything")
    cache = cache_with((topic("t"), entry(ALICE, READ, host=HOST)))
    assert cache.authorize(ALICE, HOST, READ, TOPIC, "t")
    assert not cache.authorize(ALICE, "10.0.0.9", READ, TOPIC, "t")
    cache = cache_with(
        (topic("t"), entry(ALICE, READ)), (topic("t"), entry(ALICE, READ, DENY, host="10.0.0.9"))
    )
    assert cache.authorize(ALICE, HOST, READ, TOPIC, "t")
    assert not cache.authorize(ALICE, "10.0.0.9", READ, TOPIC, "t")


def test_prefixed_patterns_match_names_they_start() -> None:
    cache = cache_with((topic("orders-", PREFIXED), entry(ALICE, WRITE)))
    assert cache.authorize(ALICE, HOST, WRITE, TOPIC, "orders-eu")
    assert cache.authorize(ALICE, HOST, WRITE, TOPIC, "orders-")
    assert not cache.authorize(ALICE, HOST, WRITE, TOPIC, "orders")
    assert not cache.authorize(ALICE, HOST, WRITE, TOPIC, "xorders-eu")
    # A longer prefixed DENY carves out part of the allowed space.
    cache.update(topic("orders-secret", PREFIXED), {entry(ALICE, WRITE, DENY)})
    assert cache.authorize(ALICE, HOST, WRITE, TOPIC, "orders-eu")
    assert not cache.authorize(ALICE, HOST, WRITE, TOPIC, "orders-secret-1")
    # Removing a pattern's last ACL removes the pattern.
    cache.update(topic("orders-secret", PREFIXED), set())
    assert cache.authorize(ALICE, HOST, WRITE, TOPIC, "orders-secret-1")
    assert topic("orders-secret", PREFIXED) not in cache.patterns()


def test_super_users() -> None:
    assert parse_super_users(" User:admin ; User:broker;") == {"User:admin", "User:broker"}
    cache = AclCache(super_users={"User:admin"})
    assert cache.authorize(
        "User:admin", HOST, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, "kafka-cluster"
    )
    assert not cache.authorize(ALICE, HOST, READ, TOPIC, "t")
    with pytest.raises(ValueError):
        parse_super_users("admin")


def test_authorize_by_resource_type() -> None:
    """KIP-679, as Kafka's AuthorizerTest: any ALLOW not dominated by a DENY."""
    assert not AclCache().authorize_by_resource_type(ALICE, HOST, WRITE, TOPIC)
    cache = cache_with((topic("t"), entry(ALICE, WRITE)))
    assert cache.authorize_by_resource_type(ALICE, HOST, WRITE, TOPIC)
    assert not cache.authorize_by_resource_type(BOB, HOST, WRITE, TOPIC)
    cache.update(topic("t"), {entry(ALICE, WRITE), entry(ALICE, WRITE, DENY)})
    assert not cache.authorize_by_resource_type(ALICE, HOST, WRITE, TOPIC)
    cache = cache_with(
        (topic("a-", PREFIXED), entry(ALICE, WRITE)),
        (topic("a", PREFIXED), entry(ALICE, WRITE, DENY)),
    )
    assert not cache.authorize_by_resource_type(ALICE, HOST, WRITE, TOPIC)
    cache = cache_with((topic("x"), entry(ALICE, WRITE)), (topic("*"), entry(ALICE, WRITE, DENY)))
    assert not cache.authorize_by_resource_type(ALICE, HOST, WRITE, TOPIC)


def test_filters_any_and_match() -> None:
    acl = entry(ALICE, READ)
    literal = AclBinding(topic("orders"), acl)
    prefixed = AclBinding(topic("ord", PREFIXED), acl)
    wildcard = AclBinding(topic("*"), acl)
    any_entry = AclEntryFilter(None, None, AclOperation.ANY, AclPermissionType.ANY)

    def f(name: str | None, pattern_type: PatternType) -> AclBindingFilter:
        return AclBindingFilter(ResourcePatternFilter(TOPIC, name, pattern_type), any_entry)

    assert f("orders", PatternType.MATCH).matches(literal)
    assert f("orders", PatternType.MATCH).matches(prefixed)
    assert f("orders", PatternType.MATCH).matches(wildcard)
    assert not f("orders", PatternType.ANY).matches(prefixed)
    assert f("ord", PatternType.ANY).matches(prefixed)
    assert not f("orders", PatternType.LITERAL).matches(wildcard)
    assert f(None, PREFIXED).matches(prefixed) and not f(None, PREFIXED).matches(literal)
    assert MATCH_ALL.matches(literal)
    assert f("orders", PatternType.MATCH).pattern.indefinite() is not None
    assert f("orders", PatternType.ANY).pattern.patterns() == (
        topic("orders"),
        topic("orders", PREFIXED),
    )
    assert not AclBindingFilter(
        ResourcePatternFilter(ResourceType.ANY, None, PatternType.ANY),
        AclEntryFilter(BOB, None, AclOperation.ANY, AclPermissionType.ANY),
    ).matches(literal)


@pytest.mark.parametrize(
    "binding",
    [
        AclBinding(topic("a/b"), entry(ALICE, READ)),
        AclBinding(topic(""), entry(ALICE, READ)),
        AclBinding(ResourcePattern(ResourceType.CLUSTER, "c"), entry(ALICE, AclOperation.ALTER)),
        AclBinding(ResourcePattern(GROUP, "g"), entry(ALICE, WRITE)),
        AclBinding(topic("t"), entry("alice", READ)),
        AclBinding(topic("t", PatternType.MATCH), entry(ALICE, READ)),
        AclBinding(topic("t"), entry(ALICE, AclOperation.ANY)),
        AclBinding(ResourcePattern(ResourceType.ANY, "t"), entry(ALICE, READ)),
    ],
)
def test_invalid_bindings(binding: AclBinding) -> None:
    with pytest.raises(ValueError):
        validate_binding(binding)


def test_valid_bindings() -> None:
    validate_binding(
        AclBinding(
            ResourcePattern(ResourceType.CLUSTER, "kafka-cluster"), entry(ALICE, AclOperation.ALL)
        )
    )
    validate_binding(
        AclBinding(
            ResourcePattern(ResourceType.TRANSACTIONAL_ID, "tx-", PREFIXED), entry(ALICE, WRITE)
        )
    )
    validate_binding(
        AclBinding(ResourcePattern(ResourceType.DELEGATION_TOKEN, "t"), entry(ALICE, DESCRIBE))
    )
