"""``gregor acls``: add, remove and list ACLs (like kafka-acls).

An ACL allows or denies a principal (User:alice) an operation (Read, Write, Create,
Delete, Alter, Describe, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite,
All) on a resource (a topic, group, transactional id, delegation token, or the cluster),
from a host (* for any). Resource names are LITERAL (the name itself, or * for every
resource of the type) or PREFIXED (every name starting with it). Brokers with
authorizer.class.name=kafka.security.authorizer.AclAuthorizer enforce them; a change takes
effect on every broker within moments.

By default the command writes ZooKeeper directly (/kafka-acl, /kafka-acl-extended and their
change notifications, exactly as Kafka's tools did with --authorizer-properties
zookeeper.connect=...); with --bootstrap-server it goes through a broker's CreateAcls,
DeleteAcls and DescribeAcls APIs instead (log in with --command-config, a file of
librdkafka properties such as security.protocol, sasl.mechanism, sasl.username).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from gregor_broker.cli import kafka_api, zk_target
from gregor_broker.cluster import acls as store
from gregor_broker.security.acl import (
    CLUSTER_NAME,
    WILDCARD_HOST,
    AclBinding,
    AclBindingFilter,
    AclEntry,
    AclEntryFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    operation_named,
    parse_principal,
)

EXAMPLES = """\
examples:
  gregor acls add --allow-principal User:alice --operation Read --operation Describe --topic orders
  gregor acls add --allow-principal User:app --producer --topic o- --resource-pattern-type prefixed
  gregor acls add --allow-principal User:app --consumer --topic orders --group app
  gregor acls add --deny-principal User:mallory --operation All --topic '*'
  gregor acls add --allow-principal User:ops --operation Describe --cluster
  gregor acls list --topic orders --resource-pattern-type match
  gregor acls list --principal User:alice
  gregor acls remove --allow-principal User:alice --operation Read --topic orders
  gregor acls list -b broker:9092 --command-config admin.properties
"""
PROG = "gregor acls"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "acls",
        help="ACLs for the authorizer: add, remove, list (like kafka-acls)",
        description=__doc__.replace("``", ""),
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.set_defaults(func=lambda args: parser.print_help() or 2)
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")
    for name, text, func in (
        ("add", "add ACLs (each principal x host x operation x resource)", add_command),
        (
            "remove",
            "remove the ACLs the options name (all of a resource's by default)",
            remove_command,
        ),
        ("list", "list ACLs, optionally of one resource or principal", list_command),
    ):
        sub = commands.add_parser(
            name,
            help=text,
            description=text,
            epilog=EXAMPLES,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        _arguments(sub, name)
        sub.set_defaults(func=lambda args, func=func: kafka_api.run(func, args, PROG))


def _arguments(parser: argparse.ArgumentParser, command: str) -> None:
    zk_target.add_arguments(parser)
    parser.add_argument(
        "--bootstrap-server",
        "-b",
        metavar="HOST:PORT",
        help="go through a broker's ACL APIs instead of ZooKeeper",
    )
    parser.add_argument(
        "--command-config",
        type=Path,
        metavar="FILE",
        help="client properties for --bootstrap-server as Kafka's tools take them "
        "(security.protocol, sasl.jaas.config, ssl.truststore.location, ...; docs/security.md)",
    )
    resources = parser.add_argument_group("resources")
    resources.add_argument(
        "--topic", action="append", default=[], help="a topic (or * or a prefix)"
    )
    resources.add_argument("--group", action="append", default=[], help="a consumer group")
    resources.add_argument("--cluster", action="store_true", help="the cluster")
    resources.add_argument(
        "--transactional-id", action="append", default=[], help="a transactional id"
    )
    resources.add_argument(
        "--delegation-token", action="append", default=[], help="a delegation token id"
    )
    resources.add_argument(
        "--resource-pattern-type",
        default="literal",
        choices=("literal", "prefixed", "any", "match")
        if command != "add"
        else ("literal", "prefixed"),
        help="how resource names match (default literal; list/remove also take any and match)",
    )
    if command == "list":
        parser.add_argument(
            "--principal", action="append", default=[], help="only ACLs of this principal"
        )
    else:
        entries = parser.add_argument_group("entries")
        entries.add_argument(
            "--allow-principal", action="append", default=[], metavar="PRINCIPAL", help="User:name"
        )
        entries.add_argument(
            "--deny-principal", action="append", default=[], metavar="PRINCIPAL", help="User:name"
        )
        entries.add_argument(
            "--allow-host", action="append", default=[], help="allowed host address (default *)"
        )
        entries.add_argument(
            "--deny-host", action="append", default=[], help="denied host address (default *)"
        )
        entries.add_argument(
            "--operation",
            action="append",
            default=[],
            help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, "
            "AlterConfigs, IdempotentWrite, All (repeatable; default All)",
        )
        entries.add_argument(
            "--producer",
            action="store_true",
            help="the producer's ACLs: Write, Describe, Create on the topics "
            "(and Write, Describe on --transactional-id)",
        )
        entries.add_argument(
            "--consumer",
            action="store_true",
            help="the consumer's ACLs: Read, Describe on the topics, Read on the groups",
        )
        entries.add_argument(
            "--force", action="store_true", help="accepted for kafka-acls compatibility"
        )


# -- building bindings -----------------------------------------------------------------------


def _patterns(args: argparse.Namespace, pattern_type: PatternType) -> list[ResourcePattern]:
    found = [ResourcePattern(ResourceType.TOPIC, n, pattern_type) for n in args.topic]
    found += [ResourcePattern(ResourceType.GROUP, n, pattern_type) for n in args.group]
    found += [
        ResourcePattern(ResourceType.TRANSACTIONAL_ID, n, pattern_type)
        for n in args.transactional_id
    ]
    found += [
        ResourcePattern(ResourceType.DELEGATION_TOKEN, n, pattern_type)
        for n in args.delegation_token
    ]
    if args.cluster:
        found.append(ResourcePattern(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL))
    return found


def _operations(args: argparse.Namespace, pattern: ResourcePattern) -> list[AclOperation]:
    """Explicit --operation values, or the --producer/--consumer sets, or All."""
    wanted: list[AclOperation] = []
    for text in args.operation:
        operation = operation_named(text)
        if operation in (AclOperation.UNKNOWN, AclOperation.ANY):
            raise kafka_api.ToolError(f"unknown --operation {text!r}", exit_code=2)
        wanted.append(operation)
    kind = pattern.resource_type
    if args.producer:
        if kind == ResourceType.TOPIC:
            wanted += [AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE]
        elif kind == ResourceType.TRANSACTIONAL_ID:
            wanted += [AclOperation.WRITE, AclOperation.DESCRIBE]
    if args.consumer:
        if kind == ResourceType.TOPIC:
            wanted += [AclOperation.READ, AclOperation.DESCRIBE]
        elif kind == ResourceType.GROUP:
            wanted += [AclOperation.READ]
    if not wanted and not (args.producer or args.consumer):
        wanted = [AclOperation.ALL]
    return list(dict.fromkeys(wanted))


def _entries(args: argparse.Namespace, pattern: ResourcePattern) -> list[AclEntry]:
    entries = []
    for principals, hosts, permission in (
        (args.allow_principal, args.allow_host, AclPermissionType.ALLOW),
        (args.deny_principal, args.deny_host, AclPermissionType.DENY),
    ):
        for principal in principals:
            try:
                principal = parse_principal(principal)
            except ValueError as error:
                raise kafka_api.ToolError(str(error), exit_code=2) from error
            for host in hosts or [WILDCARD_HOST]:
                for operation in _operations(args, pattern):
                    entries.append(AclEntry(principal, host, operation, permission))
    return entries


def _bindings(args: argparse.Namespace) -> list[AclBinding]:
    pattern_type = PatternType[args.resource_pattern_type.upper()]
    patterns = _patterns(args, pattern_type)
    if not patterns:
        raise kafka_api.ToolError(
            "name a resource: --topic, --group, --cluster, --transactional-id or "
            "--delegation-token",
            exit_code=2,
        )
    if args.producer and not args.topic:
        raise kafka_api.ToolError("--producer needs --topic", exit_code=2)
    if args.consumer and not (args.topic and args.group):
        raise kafka_api.ToolError("--consumer needs --topic and --group", exit_code=2)
    bindings = [AclBinding(p, e) for p in patterns for e in _entries(args, p)]
    if not bindings:
        raise kafka_api.ToolError("name who: --allow-principal or --deny-principal", exit_code=2)
    return bindings


def _filters(args: argparse.Namespace, principals: list[str]) -> list[AclBindingFilter]:
    """One filter per resource (or every resource), per principal (or anyone)."""
    pattern_type = PatternType[args.resource_pattern_type.upper()]
    patterns = _patterns(args, pattern_type)
    pattern_filters = [
        ResourcePatternFilter(p.resource_type, p.name, p.pattern_type) for p in patterns
    ] or [ResourcePatternFilter(ResourceType.ANY, None, PatternType.ANY)]
    entry_filters = [
        AclEntryFilter(parse_principal(p), None, AclOperation.ANY, AclPermissionType.ANY)
        for p in principals
    ] or [AclEntryFilter(None, None, AclOperation.ANY, AclPermissionType.ANY)]
    return [AclBindingFilter(p, e) for p in pattern_filters for e in entry_filters]


# -- commands ----------------------------------------------------------------------------------


def add_command(args: argparse.Namespace) -> int:
    bindings = _bindings(args)
    if args.bootstrap_server:
        _via_broker_create(args, bindings)
    else:
        with _zookeeper(args) as zk:
            results = store.add_acls(zk.client, bindings)
        failed = [(b, r) for b, r in zip(bindings, results, strict=True) if r is not None]
        if failed:
            for binding, error in failed:
                print(f"{PROG}: {_describe(binding)}: {error}", file=sys.stderr)
            return 1
    _print(bindings, "Adding ACLs for")
    return 0


def remove_command(args: argparse.Namespace) -> int:
    """With --allow/--deny-principal: exactly the entries they name; without: every ACL of
    the named resources."""
    if not _patterns(args, PatternType.LITERAL):
        raise kafka_api.ToolError("name the resources whose ACLs to remove", exit_code=2)
    if args.allow_principal or args.deny_principal:
        filters = [_exact(binding) for binding in _bindings(args)]
    else:
        filters = _filters(args, [])
    if args.bootstrap_server:
        removed = _via_broker_delete(args, filters)
    else:
        with _zookeeper(args) as zk:
            outcome = store.remove_acls(zk.client, filters, store.load_all_acls(zk.client))
        removed = []
        for found in outcome:
            for binding, error in found:
                if error is not None:
                    raise kafka_api.ToolError(f"{_describe(binding)}: {error}")
                removed.append(binding)
    _print(removed, "Removed ACLs for")
    return 0


def list_command(args: argparse.Namespace) -> int:
    filters = _filters(args, args.principal)
    if args.bootstrap_server:
        found = _via_broker_describe(args, filters)
    else:
        with _zookeeper(args) as zk:
            everything = store.list_acls(zk.client)
        found = [b for b in everything if any(f.matches(b) for f in filters)]
    _print(found, "Current ACLs for")
    return 0


def _exact(binding: AclBinding) -> AclBindingFilter:
    pattern, entry = binding.pattern, binding.entry
    return AclBindingFilter(
        ResourcePatternFilter(pattern.resource_type, pattern.name, pattern.pattern_type),
        AclEntryFilter(entry.principal, entry.host, entry.operation, entry.permission),
    )


def _zookeeper(args: argparse.Namespace) -> Any:
    try:
        zk_target.resolve(args)
    except zk_target.NoZooKeeper as error:
        raise kafka_api.ToolError(str(error), exit_code=2) from error
    return zk_target.connect(args)


def _print(bindings: list[AclBinding], heading: str) -> None:
    """kafka-acls' layout: each resource pattern, then its entries."""
    by_pattern: dict[ResourcePattern, list[AclEntry]] = {}
    for binding in bindings:
        by_pattern.setdefault(binding.pattern, []).append(binding.entry)
    for pattern, entries in sorted(by_pattern.items()):
        print(
            f"{heading} resource `ResourcePattern(resourceType={pattern.resource_type.name}, "
            f"name={pattern.name}, patternType={pattern.pattern_type.name})`: "
        )
        for entry in entries:
            print(f" \t{_entry_text(entry)}")
        print()


def _entry_text(entry: AclEntry) -> str:
    return (
        f"(principal={entry.principal}, host={entry.host}, operation={entry.operation.name}, "
        f"permissionType={entry.permission.name})"
    )


def _describe(binding: AclBinding) -> str:
    return f"{binding.pattern} {_entry_text(binding.entry)}"


# -- through a broker ----------------------------------------------------------------------


def _admin(args: argparse.Namespace) -> Any:
    """The shared admin client: ``main`` has loaded ``--command-config`` (Kafka's client
    properties, translated for librdkafka by ``cli/command_config.py``)."""
    return kafka_api.admin(args.bootstrap_server)


def _to_client(binding: AclBinding) -> Any:
    from confluent_kafka import admin as ck

    pattern, entry = binding.pattern, binding.entry
    return ck.AclBinding(
        ck.ResourceType(int(pattern.resource_type)),
        pattern.name,
        ck.ResourcePatternType(int(pattern.pattern_type)),
        entry.principal,
        entry.host,
        ck.AclOperation(int(entry.operation)),
        ck.AclPermissionType(int(entry.permission)),
    )


def _filter_to_client(binding_filter: AclBindingFilter) -> Any:
    from confluent_kafka import admin as ck

    pattern, entry = binding_filter.pattern, binding_filter.entry
    return ck.AclBindingFilter(
        ck.ResourceType(int(pattern.resource_type)),
        pattern.name,
        ck.ResourcePatternType(int(pattern.pattern_type)),
        entry.principal,
        entry.host,
        ck.AclOperation(int(entry.operation)),
        ck.AclPermissionType(int(entry.permission)),
    )


def _from_client(binding: Any) -> AclBinding:
    return AclBinding(
        ResourcePattern(
            ResourceType(binding.restype.value),
            binding.name,
            PatternType(binding.resource_pattern_type.value),
        ),
        AclEntry(
            binding.principal,
            binding.host,
            AclOperation(binding.operation.value),
            AclPermissionType(binding.permission_type.value),
        ),
    )


def _via_broker_create(args: argparse.Namespace, bindings: list[AclBinding]) -> None:
    if any(b.pattern.resource_type == ResourceType.DELEGATION_TOKEN for b in bindings):
        raise kafka_api.ToolError(
            "--delegation-token needs ZooKeeper mode (the admin client has no such type)",
            exit_code=2,
        )
    client = _admin(args)
    wanted = [_to_client(b) for b in bindings]
    futures = client.create_acls(wanted, request_timeout=kafka_api.TIMEOUT_S)
    for binding, future in zip(bindings, futures.values(), strict=True):
        kafka_api.result(future, _describe(binding))


def _via_broker_delete(
    args: argparse.Namespace, filters: list[AclBindingFilter]
) -> list[AclBinding]:
    client = _admin(args)
    futures = client.delete_acls(
        [_filter_to_client(f) for f in filters], request_timeout=kafka_api.TIMEOUT_S
    )
    removed = []
    for future in futures.values():
        removed += [_from_client(b) for b in kafka_api.result(future, "DeleteAcls")]
    return removed


def _via_broker_describe(
    args: argparse.Namespace, filters: list[AclBindingFilter]
) -> list[AclBinding]:
    client = _admin(args)
    found: dict[AclBinding, None] = {}
    for binding_filter in filters:
        future = client.describe_acls(
            _filter_to_client(binding_filter), request_timeout=kafka_api.TIMEOUT_S
        )
        for binding in kafka_api.result(future, "DescribeAcls"):
            found[_from_client(binding)] = None
    return list(found)
