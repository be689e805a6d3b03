"""``gregor configs``: describe and alter configs of topics, brokers, users and clients
(like kafka-configs).

Topics and brokers go through the Kafka API (DescribeConfigs, IncrementalAlterConfigs) with
``--bootstrap-server``, so the brokers validate every change as they do any client's; a
broker resource takes only the dynamic broker configs (docs/configuration.md), per broker
(``--entity-name <id>``) or for every broker (``--entity-default``). Users and clients hold
quotas, written to ZooKeeper (``--zookeeper``) as Kafka's tools wrote them; ``gregor
quotas`` is the same with named options.
"""

from __future__ import annotations

import argparse
from typing import Any

from gregor_broker.cli import kafka_api, zk_target
from gregor_broker.cli.kafka_api import ToolError
from gregor_broker.cluster.client_quotas import (
    QUOTA_KEYS,
    InvalidQuotaRequest,
    alter_quota_config,
    read_all_quota_configs,
    validate_quota_value,
)
from gregor_broker.cluster.zk_paths import DEFAULT_ENTITY
from gregor_broker.config import InvalidConfig, validate_dynamic_broker_configs

EXAMPLES = """\
examples:
  gregor configs describe --entity-type topics --entity-name orders
  gregor configs alter --entity-type topics --entity-name orders \\
      --add-config retention.ms=86400000,cleanup.policy=compact,delete
  gregor configs alter --entity-type topics --entity-name orders --delete-config retention.ms
  gregor configs alter --entity-type brokers --entity-default \\
      --add-config leader.replication.throttled.rate=10485760
  gregor configs describe --entity-type brokers --entity-name 1 --all
  gregor configs alter --entity-type clients --entity-name bulk \\
      --add-config producer_byte_rate=1048576
"""

ENTITY_TYPES = ("topics", "brokers", "users", "clients")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "configs",
        help="describe and alter topic, broker, user and client configs (kafka-configs)",
        description=__doc__.replace("``", ""),
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.set_defaults(func=lambda args: parser.print_help() or 2)
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")

    describe = commands.add_parser(
        "describe",
        help="show an entity's configs",
        description="Topics and brokers: the overrides (with --all, every config with its "
        "source). Users and clients: their quotas.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _entity_arguments(describe)
    describe.add_argument(
        "--all", action="store_true", help="every config, not only those set explicitly"
    )
    kafka_api.add_output_argument(describe)
    describe.set_defaults(func=lambda args: kafka_api.run(describe_command, args, "gregor configs"))

    alter = commands.add_parser(
        "alter",
        help="set and delete an entity's configs",
        description="Set (--add-config) and remove (--delete-config) configs in one change.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _entity_arguments(alter)
    alter.add_argument(
        "--add-config",
        action="append",
        metavar="K=V[,K=V]",
        help="configs to set (repeatable; commas separate pairs, a value may hold commas)",
    )
    alter.add_argument(
        "--delete-config", action="append", metavar="K[,K]", help="configs to remove (repeatable)"
    )
    alter.set_defaults(func=lambda args: kafka_api.run(alter_command, args, "gregor configs"))


def _entity_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--entity-type", required=True, choices=ENTITY_TYPES)
    name = parser.add_mutually_exclusive_group(required=True)
    name.add_argument("--entity-name", help="topic name, broker id, user principal or client id")
    name.add_argument(
        "--entity-default",
        action="store_true",
        help="the default for every broker, user or client id",
    )
    kafka_api.add_bootstrap_argument(parser)
    zk_target.add_arguments(parser)


def describe_command(args: argparse.Namespace) -> int:
    if args.entity_type in ("users", "clients"):
        rows = [
            {"name": key, "value": value, "source": "QUOTA"}
            for key, value in sorted(_quota_config(args).items())
        ]
    else:
        rows = _describe_resource(args)
    kafka_api.print_rows(rows, ["name", "value", "source", "read_only"], args.output)
    return 0


def alter_command(args: argparse.Namespace) -> int:
    additions = kafka_api.parse_configs(args.add_config, "--add-config")
    deletions = [key for item in args.delete_config or () for key in item.split(",") if key]
    if not additions and not deletions:
        raise ToolError("nothing to change: give --add-config and/or --delete-config", 2)
    if args.entity_type in ("users", "clients"):
        return _alter_quotas(args, additions, deletions)
    return _alter_resource(args, additions, deletions)


# -- topics and brokers: the Kafka API ----------------------------------------------------------


def _resource(args: argparse.Namespace, **kwargs: Any) -> Any:
    from confluent_kafka.admin import ConfigResource, ResourceType

    if args.entity_type == "topics":
        if args.entity_default:
            raise ToolError("topics have no --entity-default; name the topic", 2)
        return ConfigResource(ResourceType.TOPIC, args.entity_name, **kwargs)
    if args.entity_default:
        # librdkafka refuses the empty resource name that means "every broker".
        raise ToolError(
            "use 'gregor configs alter --entity-type brokers --entity-default' through "
            "ZooKeeper (--zookeeper): the Kafka client library cannot address every broker",
            2,
        )
    return ConfigResource(ResourceType.BROKER, args.entity_name, **kwargs)


def _describe_resource(args: argparse.Namespace) -> list[dict[str, Any]]:
    from confluent_kafka.admin import ConfigSource

    if args.entity_type == "brokers" and args.entity_default:
        return [
            {"name": key, "value": value, "source": "DYNAMIC_DEFAULT_BROKER_CONFIG"}
            for key, value in sorted(_zk_broker_default(args).items())
        ]
    client = kafka_api.admin(args.bootstrap_server)
    resource = _resource(args)
    entries = kafka_api.result(
        client.describe_configs([resource], request_timeout=kafka_api.TIMEOUT_S)[resource],
        f"{args.entity_type[:-1].capitalize()} {args.entity_name}",
    )
    rows = []
    for name, entry in sorted(entries.items()):
        source_name = ConfigSource(entry.source).name
        if not args.all and source_name in ("DEFAULT_CONFIG", "STATIC_BROKER_CONFIG"):
            continue
        rows.append(
            {
                "name": name,
                "value": None if entry.is_sensitive else entry.value,
                "source": source_name,
                "read_only": entry.is_read_only,
            }
        )
    return rows


def _alter_resource(
    args: argparse.Namespace, additions: dict[str, str], deletions: list[str]
) -> int:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry

    if args.entity_type == "brokers" and args.entity_default:
        return _alter_broker_default(args, additions, deletions)
    entries = [
        ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)
        for key, value in additions.items()
    ] + [
        ConfigEntry(key, None, incremental_operation=AlterConfigOpType.DELETE) for key in deletions
    ]
    client = kafka_api.admin(args.bootstrap_server)
    resource = _resource(args, incremental_configs=entries)
    future = client.incremental_alter_configs([resource])[resource]
    kafka_api.result(future, f"{args.entity_type[:-1].capitalize()} {args.entity_name}")
    print(f"Completed updating configs for {args.entity_type[:-1]} {args.entity_name}.")
    return 0


def _zk_broker_default(args: argparse.Namespace) -> dict[str, str]:
    try:
        with zk_target.connect(args) as admin:
            return admin.get_entity_config(f"brokers/{DEFAULT_ENTITY}")
    except zk_target.NoZooKeeper as error:
        raise ToolError(str(error), 2) from error


def _alter_broker_default(
    args: argparse.Namespace, additions: dict[str, str], deletions: list[str]
) -> int:
    try:
        with zk_target.connect(args) as admin:
            path = f"brokers/{DEFAULT_ENTITY}"
            config = admin.get_entity_config(path)
            config.update(additions)
            for key in deletions:
                config.pop(key, None)
            try:
                validate_dynamic_broker_configs(config)
            except InvalidConfig as error:
                raise ToolError(f"Broker default: {error}") from error
            admin.set_entity_config(path, config)
    except zk_target.NoZooKeeper as error:
        raise ToolError(str(error), 2) from error
    print("Completed updating default config for brokers in the cluster.")
    return 0


# -- users and clients: quotas in ZooKeeper -----------------------------------------------------


def _quota_entity(args: argparse.Namespace) -> tuple[str | None, str | None]:
    name = DEFAULT_ENTITY if args.entity_default else args.entity_name
    return (name, None) if args.entity_type == "users" else (None, name)


def _quota_config(args: argparse.Namespace) -> dict[str, float]:
    try:
        with zk_target.connect(args) as admin:
            return read_all_quota_configs(admin).get(_quota_entity(args), {})
    except zk_target.NoZooKeeper as error:
        raise ToolError(str(error), 2) from error


def _alter_quotas(args: argparse.Namespace, additions: dict[str, str], deletions: list[str]) -> int:
    changes: dict[str, float | None] = dict.fromkeys(deletions)
    for key, text in additions.items():
        if key not in QUOTA_KEYS:
            raise ToolError(
                f"{key} is not a quota; {args.entity_type} take {', '.join(QUOTA_KEYS)}", 2
            )
        try:
            value = float(text)
            validate_quota_value(key, value)
        except (ValueError, InvalidQuotaRequest) as error:
            raise ToolError(f"{key}={text}: {error}") from error
        changes[key] = value
    try:
        with zk_target.connect(args) as admin:
            alter_quota_config(admin, _quota_entity(args), changes)
    except zk_target.NoZooKeeper as error:
        raise ToolError(str(error), 2) from error
    shown = "default" if args.entity_default else args.entity_name
    print(f"Completed updating config for {args.entity_type[:-1]} {shown}.")
    return 0
