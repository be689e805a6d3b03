"""Kafka's ACL model and ``AclAuthorizer``'s decision rule, pure (no ZooKeeper, no sockets).

The vocabulary is Kafka's (``org.apache.kafka.common.acl`` / ``.resource``): a
``ResourcePattern`` (resource type, name, LITERAL or PREFIXED; the literal name ``*``
matches every resource of its type), an ``AclEntry`` (principal, host, operation, ALLOW
or DENY), filters with ANY and MATCH for DescribeAcls and DeleteAcls, and the wire codes
of every enum. ``AclCache`` holds one broker's ACLs by pattern and decides as Kafka's
``AclAuthorizer.authorizeAction`` does:

- super users may do everything;
- no ACL on the resource (literal, prefixed or wildcard): ``allow.everyone.if.no.acl.found``;
- otherwise a matching DENY wins; else a matching ALLOW is needed. An ALLOW of Read,
  Write, Delete or Alter implies Describe; AlterConfigs implies DescribeConfigs; ALL
  matches every operation; principal ``User:*`` and host ``*`` match everyone.

The ZooKeeper store is ``cluster/acls.py``; the broker's authorizer (loading, live
updates, audit log, metrics) is ``server/authorizer.py``. See docs/security.md.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from enum import IntEnum

from ..protocol.acl_operations import (
    SUPPORTED_OPERATIONS,
    AclOperation,
    AclPermissionType,
    AclResourceType,
    PatternType,
)

ResourceType = AclResourceType

WILDCARD_RESOURCE = "*"
WILDCARD_HOST = "*"
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"

# The concrete resource types an ACL can name (Kafka's AclEntry.RESOURCE_TYPES).
RESOURCE_TYPES = tuple(SUPPORTED_OPERATIONS)

# What an ALLOW of each operation also allows (AclOperation's javadoc; authorizeAction).
_IMPLIED_BY: dict[AclOperation, tuple[AclOperation, ...]] = {
    AclOperation.DESCRIBE: (
        AclOperation.DESCRIBE,
        AclOperation.READ,
        AclOperation.WRITE,
        AclOperation.DELETE,
        AclOperation.ALTER,
    ),
    AclOperation.DESCRIBE_CONFIGS: (AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS),
}


def _by_name(enum: type[IntEnum], text: str) -> IntEnum:
    """Kafka's ``fromString``: case-insensitive, ``_`` optional (``TransactionalId``)."""
    wanted = text.replace("_", "").replace("-", "").upper()
    for member in enum:
        if member.name.replace("_", "") == wanted:
            return member
    return enum(0)  # UNKNOWN


def resource_type_named(text: str) -> ResourceType:
    return ResourceType(_by_name(ResourceType, text))


def operation_named(text: str) -> AclOperation:
    return AclOperation(_by_name(AclOperation, text))


def permission_named(text: str) -> AclPermissionType:
    return AclPermissionType(_by_name(AclPermissionType, text))


def pattern_type_named(text: str) -> PatternType:
    return PatternType(_by_name(PatternType, text))


def parse_principal(text: str) -> str:
    """``SecurityUtils.parseKafkaPrincipal``: ``Type:name``; ValueError otherwise."""
    kind, separator, name = text.partition(":")
    if not text or not separator or not kind:
        raise ValueError(
            f"expected a string in format principalType:principalName but got {text!r}"
        )
    return f"{kind}:{name}"


@dataclass(frozen=True, slots=True, order=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL

    def __str__(self) -> str:
        return f"{self.resource_type.zk_name}:{self.pattern_type.name}:{self.name}"


@dataclass(frozen=True, slots=True)
class AclEntry:
    """An access control entry: who (principal), from where (host), what, allow or deny."""

    principal: str
    host: str
    operation: AclOperation
    permission: AclPermissionType

    def to_json(self) -> dict[str, str]:
        """One element of the znode's ``acls`` list, with Kafka's names."""
        return {
            "principal": self.principal,
            "permissionType": self.permission.zk_name,
            "operation": self.operation.zk_name,
            "host": self.host,
        }

    @classmethod
    def from_json(cls, item: Mapping[str, object]) -> AclEntry:
        return cls(
            parse_principal(str(item["principal"])),
            str(item["host"]),
            operation_named(str(item["operation"])),
            permission_named(str(item["permissionType"])),
        )

    def __str__(self) -> str:
        return (
            f"{self.principal} has {self.permission.name} permission for operations: "
            f"{self.operation.name} from hosts: {self.host}"
        )


@dataclass(frozen=True, slots=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AclEntry


def validate_binding(binding: AclBinding) -> None:
    """What CreateAcls refuses (``AclAuthorizer.validateAclBinding`` and the request's own
    checks); ValueError with Kafka's message."""
    pattern, entry = binding.pattern, binding.entry
    if (
        pattern.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY)
        or pattern.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED)
        or entry.operation in (AclOperation.UNKNOWN, AclOperation.ANY)
        or entry.permission in (AclPermissionType.UNKNOWN, AclPermissionType.ANY)
    ):
        raise ValueError("ACL binding contains unknown elements")
    if "/" in pattern.name:
        raise ValueError(f"ACL binding contains invalid resource name: {pattern.name}")
    if not pattern.name:
        raise ValueError("Resource name must not be empty")
    if pattern.resource_type == ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
        raise ValueError("The only valid name for the CLUSTER resource is kafka-cluster")
    parse_principal(entry.principal)
    if (
        entry.operation != AclOperation.ALL
        and entry.operation not in SUPPORTED_OPERATIONS[pattern.resource_type]
    ):
        raise ValueError(
            f"Operation {entry.operation.name} is not supported by "
            f"resource type {pattern.resource_type.name}"
        )


@dataclass(frozen=True, slots=True)
class ResourcePatternFilter:
    """``ResourcePatternFilter``: ANY type, a None name or pattern type ANY match all;
    MATCH matches the patterns that would apply to the named resource."""

    resource_type: ResourceType
    name: str | None
    pattern_type: PatternType

    def matches(self, pattern: ResourcePattern) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != pattern.resource_type:
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH) and (
            self.pattern_type != pattern.pattern_type
        ):
            return False
        if self.name is None:
            return True
        if self.pattern_type in (PatternType.ANY, pattern.pattern_type):
            return self.name == pattern.name
        if pattern.pattern_type == PatternType.LITERAL:
            return self.name == pattern.name or pattern.name == WILDCARD_RESOURCE
        return self.name.startswith(pattern.name)

    def indefinite(self) -> str | None:
        """Kafka's ``findIndefiniteField``: why the filter may match more than one
        pattern (None: at most one, so it can name patterns not in the cache)."""
        if self.resource_type == ResourceType.ANY:
            return "Resource type is ANY."
        if self.resource_type == ResourceType.UNKNOWN:
            return "Resource type is UNKNOWN."
        if self.name is None:
            return "Resource name is NULL."
        if self.pattern_type == PatternType.MATCH:
            return "Resource pattern type is MATCH."
        if self.pattern_type == PatternType.UNKNOWN:
            return "Resource pattern type is UNKNOWN."
        return None

    def patterns(self) -> tuple[ResourcePattern, ...]:
        """The patterns a definite filter names (``filterToResources``)."""
        assert self.name is not None
        if self.pattern_type == PatternType.ANY:
            return (
                ResourcePattern(self.resource_type, self.name, PatternType.LITERAL),
                ResourcePattern(self.resource_type, self.name, PatternType.PREFIXED),
            )
        return (ResourcePattern(self.resource_type, self.name, self.pattern_type),)


@dataclass(frozen=True, slots=True)
class AclEntryFilter:
    """``AccessControlEntryFilter``: a None principal or host, ANY operation or
    permission match every entry."""

    principal: str | None
    host: str | None
    operation: AclOperation
    permission: AclPermissionType

    def matches(self, entry: AclEntry) -> bool:
        if self.principal is not None and self.principal != entry.principal:
            return False
        if self.host is not None and self.host != entry.host:
            return False
        if self.operation != AclOperation.ANY and self.operation != entry.operation:
            return False
        return self.permission == AclPermissionType.ANY or self.permission == entry.permission

    def indefinite(self) -> str | None:
        if self.operation == AclOperation.UNKNOWN:
            return "Operation is UNKNOWN."
        if self.permission == AclPermissionType.UNKNOWN:
            return "Permission type is UNKNOWN."
        return None


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    pattern: ResourcePatternFilter
    entry: AclEntryFilter

    def matches(self, binding: AclBinding) -> bool:
        return self.pattern.matches(binding.pattern) and self.entry.matches(binding.entry)

    def unknown(self) -> bool:
        """A filter with an UNKNOWN element matches nothing (Kafka refuses it)."""
        return (
            self.pattern.resource_type == ResourceType.UNKNOWN
            or self.pattern.pattern_type == PatternType.UNKNOWN
            or self.entry.indefinite() is not None
        )


MATCH_ALL = AclBindingFilter(
    ResourcePatternFilter(ResourceType.ANY, None, PatternType.ANY),
    AclEntryFilter(None, None, AclOperation.ANY, AclPermissionType.ANY),
)


def parse_super_users(text: str) -> frozenset[str]:
    """``super.users``: principals separated by ``;`` (``User:admin;User:broker``)."""
    return frozenset(parse_principal(part.strip()) for part in text.split(";") if part.strip())


class AclCache:
    """One broker's ACLs by resource pattern, and Kafka's decision over them.

    Written by one thread at a time (the loader, the change listener, the broker's own
    writes) and read by the event loop: each write replaces the whole mapping of one
    pattern, and readers take a snapshot reference first, as Kafka's ``aclCache`` is a
    volatile immutable map.
    """

    def __init__(
        self, super_users: Iterable[str] = (), allow_everyone_if_no_acl_found: bool = False
    ) -> None:
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._acls: dict[ResourcePattern, frozenset[AclEntry]] = {}
        self._literal: dict[ResourceType, dict[str, frozenset[AclEntry]]] = {}
        self._prefixed: dict[ResourceType, dict[str, frozenset[AclEntry]]] = {}
        self._lock = threading.Lock()

    # -- contents -------------------------------------------------------------------------

    def update(self, pattern: ResourcePattern, acls: Iterable[AclEntry]) -> None:
        """Replace one pattern's ACLs (none: the pattern goes)."""
        acls = frozenset(acls)
        with self._lock:
            new = dict(self._acls)
            if acls:
                new[pattern] = acls
            else:
                new.pop(pattern, None)
            # The decision path's view: per resource type, name -> ACLs, one mapping for
            # literal and one for prefixed patterns (string keys: no pattern objects to
            # build or hash per decision).
            index = dict(
                self._literal if pattern.pattern_type == PatternType.LITERAL else self._prefixed
            )
            by_name = dict(index.get(pattern.resource_type, {}))
            if acls:
                by_name[pattern.name] = acls
            else:
                by_name.pop(pattern.name, None)
            index[pattern.resource_type] = by_name
            if pattern.pattern_type == PatternType.LITERAL:
                self._literal = index
            else:
                self._prefixed = index
            self._acls = new

    def get(self, pattern: ResourcePattern) -> frozenset[AclEntry]:
        return self._acls.get(pattern, frozenset())

    def patterns(self) -> list[ResourcePattern]:
        return list(self._acls)

    def bindings(self, binding_filter: AclBindingFilter = MATCH_ALL) -> Iterator[AclBinding]:
        """Every cached binding the filter matches (DescribeAcls), in a stable order."""
        for pattern, acls in sorted(self._acls.items()):
            for entry in sorted(acls, key=_entry_order):
                binding = AclBinding(pattern, entry)
                if binding_filter.matches(binding):
                    yield binding

    def __len__(self) -> int:
        return sum(len(acls) for acls in self._acls.values())

    # -- decisions ------------------------------------------------------------------------

    def is_super_user(self, principal: str) -> bool:
        return principal in self.super_users

    def matching_acls(self, resource_type: ResourceType, name: str) -> list[AclEntry]:
        """The ACLs that apply to one resource: its literal pattern, the wildcard ``*``
        and every prefixed pattern its name starts with."""
        found: list[AclEntry] = []
        literal = self._literal.get(resource_type)
        if literal:
            found.extend(literal.get(name, ()))
            if name != WILDCARD_RESOURCE:
                found.extend(literal.get(WILDCARD_RESOURCE, ()))
        prefixed = self._prefixed.get(resource_type)
        if prefixed:
            for end in range(1, len(name) + 1):
                acls = prefixed.get(name[:end])
                if acls:
                    found.extend(acls)
        return found

    def authorize(
        self,
        principal: str,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        """Kafka's ``AclAuthorizer.authorizeAction`` for a literal resource."""
        if principal in self.super_users:
            return True
        acls = self.matching_acls(resource_type, name)
        if not acls:
            return self.allow_everyone_if_no_acl_found
        if _any_match(acls, principal, host, (operation,), AclPermissionType.DENY):
            return False
        allowing = _IMPLIED_BY.get(operation, (operation,))
        return _any_match(acls, principal, host, allowing, AclPermissionType.ALLOW)

    def authorize_by_resource_type(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        """Kafka's ``authorizeByResourceType`` (KIP-679): may the principal perform the
        operation on at least one resource of the type? Used by InitProducerId without a
        transactional id (Write on any topic in place of IdempotentWrite on the cluster).
        A literal or prefixed ALLOW not dominated by a DENY is enough; a DENY on the
        wildcard resource refuses all."""
        if principal in self.super_users:
            return True
        allow_literals: set[str] = set()
        allow_prefixes: set[str] = set()
        deny_literals: set[str] = set()
        deny_prefixes: set[str] = set()
        for pattern, acls in self._acls.items():
            if pattern.resource_type != resource_type:
                continue
            for entry in acls:
                if not _entry_matches(entry, principal, host, (operation,)):
                    continue
                allow = entry.permission == AclPermissionType.ALLOW
                prefixed = pattern.pattern_type == PatternType.PREFIXED
                target = (
                    (allow_prefixes if prefixed else allow_literals)
                    if allow
                    else (deny_prefixes if prefixed else deny_literals)
                )
                target.add(pattern.name)
        if WILDCARD_RESOURCE in deny_literals:
            return False
        if self.allow_everyone_if_no_acl_found:
            return True

        def dominated(name: str) -> bool:
            return any(name[:end] in deny_prefixes for end in range(1, len(name) + 1))

        if any(not dominated(prefix) for prefix in allow_prefixes):
            return True
        return any(
            literal == WILDCARD_RESOURCE
            or (literal not in deny_literals and not dominated(literal))
            for literal in allow_literals
        )


def _entry_matches(
    entry: AclEntry, principal: str, host: str, operations: tuple[AclOperation, ...]
) -> bool:
    return (
        (entry.principal == principal or entry.principal == WILDCARD_PRINCIPAL)
        and (entry.operation in operations or entry.operation == AclOperation.ALL)
        and (entry.host == host or entry.host == WILDCARD_HOST)
    )


def _any_match(
    acls: Iterable[AclEntry],
    principal: str,
    host: str,
    operations: tuple[AclOperation, ...],
    permission: AclPermissionType,
) -> bool:
    return any(
        entry.permission == permission and _entry_matches(entry, principal, host, operations)
        for entry in acls
    )


def _entry_order(entry: AclEntry) -> tuple[str, str, int, int]:
    return (entry.principal, entry.host, int(entry.operation), int(entry.permission))
