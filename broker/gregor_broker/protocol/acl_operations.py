"""Kafka's ACL operations and the ``authorized_operations`` bit fields responses carry.

Metadata (v8+), DescribeCluster and DescribeGroups (v3+) answer, when the client asks, with
the operations it may perform on each resource as a 32-bit field (bit ``n`` set for
operation code ``n``), and with ``-2**31`` when it did not ask. Matches Kafka's
``AuthHelper.authorizedOperations``: without an authorizer every operation the resource
type supports (``AclEntry.supportedOperations``) is authorized; with one
(``server/authorizer.py``) the operations the principal may perform. This module is the one
home of the ACL codes (operations, resource types, pattern and permission types) and of
their names as Kafka writes them in ZooKeeper (``SecurityUtils``: ``DescribeConfigs``).
"""

from __future__ import annotations

from enum import IntEnum


class _Named(IntEnum):
    @property
    def zk_name(self) -> str:
        """Kafka's ``SecurityUtils`` name: ``TransactionalId``, ``DescribeConfigs``, as in
        znode paths and ACL JSON."""
        return "".join(part.capitalize() for part in self.name.split("_"))


class AclOperation(_Named):
    """Kafka's ``AclOperation`` codes, as sent on the wire (ANY only in filters)."""

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


class AclResourceType(_Named):
    """Kafka's ``ResourceType`` codes (ANY only in filters)."""

    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(_Named):
    """Kafka's ``PatternType``: LITERAL and PREFIXED patterns; ANY and MATCH in filters."""

    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclPermissionType(_Named):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


SUPPORTED_OPERATIONS: dict[AclResourceType, frozenset[AclOperation]] = {
    AclResourceType.TOPIC: frozenset(
        {
            AclOperation.READ,
            AclOperation.WRITE,
            AclOperation.CREATE,
            AclOperation.DESCRIBE,
            AclOperation.DELETE,
            AclOperation.ALTER,
            AclOperation.DESCRIBE_CONFIGS,
            AclOperation.ALTER_CONFIGS,
        }
    ),
    AclResourceType.GROUP: frozenset(
        {AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE}
    ),
    AclResourceType.CLUSTER: frozenset(
        {
            AclOperation.CREATE,
            AclOperation.CLUSTER_ACTION,
            AclOperation.DESCRIBE_CONFIGS,
            AclOperation.ALTER_CONFIGS,
            AclOperation.IDEMPOTENT_WRITE,
            AclOperation.ALTER,
            AclOperation.DESCRIBE,
        }
    ),
    AclResourceType.TRANSACTIONAL_ID: frozenset({AclOperation.DESCRIBE, AclOperation.WRITE}),
    AclResourceType.DELEGATION_TOKEN: frozenset({AclOperation.DESCRIBE}),
    AclResourceType.USER: frozenset({AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS}),
}

# What a response carries when the client did not ask (Kafka: Int.MinValue).
NOT_REQUESTED = -(2**31)


def operations_field(operations: frozenset[AclOperation] | set[AclOperation]) -> int:
    """The 32-bit field for a set of operations (Kafka's ``Utils.to32BitField``)."""
    field = 0
    for operation in operations:
        field |= 1 << operation
    return field


def authorized_operations(resource_type: AclResourceType, requested: bool) -> int:
    """The field for one resource: every supported operation (no authorizer runs)."""
    if not requested:
        return NOT_REQUESTED
    return operations_field(SUPPORTED_OPERATIONS[resource_type])
