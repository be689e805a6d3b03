"""``gregor quotas``: list, set and delete client quotas (like kafka-configs for users/clients).

A quota limits what a group of clients may use on each broker: ``producer_byte_rate``
and ``consumer_byte_rate`` in bytes per second, ``request_percentage`` in percent of one
request-handling thread. A group is a user, a client id, or both; ``<default>`` stands
for "every user" or "every client id" that has no quota of its own. Clients without
authentication are the user ANONYMOUS. The most specific quota wins (docs/quotas.md).

Quotas are written to ZooKeeper with a change notification, as Kafka's tools did; every
broker applies them within moments, without a restart.
"""

from __future__ import annotations

import argparse
import sys

from gregor_broker.cli import zk_target
from gregor_broker.cluster.client_quotas import (
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    QUOTA_KEYS,
    REQUEST_PERCENTAGE,
    Entity,
    InvalidQuotaRequest,
    alter_quota_config,
    describe_entity,
    read_all_quota_configs,
    validate_quota_value,
)
from gregor_broker.cluster.zk_paths import DEFAULT_ENTITY

EXAMPLES = """\
examples:
  gregor quotas set --client-id bulk --producer-byte-rate 1048576
  gregor quotas set --user alice --client-id '<default>' --consumer-byte-rate 5242880
  gregor quotas set --default-client-id --request-percentage 50
  gregor quotas list
  gregor quotas delete --client-id bulk --keys producer_byte_rate
  gregor quotas delete --user alice --client-id '<default>'
"""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "quotas",
        help="client quotas: list, set, delete (byte rates, request percentage)",
        description=__doc__.replace("``", ""),
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.set_defaults(func=lambda args: parser.print_help() or 2)
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")

    list_parser = commands.add_parser(
        "list",
        help="show configured quotas",
        description="Show every configured quota, or those of the given user/client id.",
    )
    zk_target.add_arguments(list_parser)
    _entity_arguments(list_parser, required=False)
    list_parser.set_defaults(func=list_command)

    set_parser = commands.add_parser(
        "set",
        help="set quotas of a user, a client id, or both",
        description="Set quota values of one entity; values not given are kept.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    zk_target.add_arguments(set_parser)
    _entity_arguments(set_parser, required=True)
    set_parser.add_argument(
        "--producer-byte-rate", type=int, metavar="BYTES_PER_S", help="produce bytes per second"
    )
    set_parser.add_argument(
        "--consumer-byte-rate", type=int, metavar="BYTES_PER_S", help="fetch bytes per second"
    )
    set_parser.add_argument(
        "--request-percentage",
        type=float,
        metavar="PERCENT",
        help="time handling the group's requests, in percent of one thread (e.g. 50)",
    )
    set_parser.set_defaults(func=set_command)

    delete_parser = commands.add_parser(
        "delete",
        help="remove quotas of a user, a client id, or both",
        description="Remove some (--keys) or all quota values of one entity.",
    )
    zk_target.add_arguments(delete_parser)
    _entity_arguments(delete_parser, required=True)
    delete_parser.add_argument(
        "--keys",
        metavar="KEY,...",
        help=f"comma-separated quota keys to remove (default: all of {', '.join(QUOTA_KEYS)})",
    )
    delete_parser.set_defaults(func=delete_command)


def _entity_arguments(parser: argparse.ArgumentParser, *, required: bool) -> None:
    group = parser.add_argument_group(
        "entity", "who the quota is for" + (" (at least one of these)" if required else "")
    )
    user = group.add_mutually_exclusive_group()
    user.add_argument("--user", help="a user principal (unauthenticated clients: ANONYMOUS)")
    user.add_argument(
        "--default-user", action="store_true", help="every user without a quota of its own"
    )
    client = group.add_mutually_exclusive_group()
    client.add_argument("--client-id", help="a client id (the clients' client.id setting)")
    client.add_argument(
        "--default-client-id",
        action="store_true",
        help="every client id without a quota of its own",
    )


def _entity(args: argparse.Namespace) -> tuple[str | None, str | None]:
    user = DEFAULT_ENTITY if args.default_user else args.user
    client_id = DEFAULT_ENTITY if args.default_client_id else args.client_id
    return user, client_id


def _fail(message: str) -> int:
    print(f"gregor quotas: {message}", file=sys.stderr)
    return 1


def list_command(args: argparse.Namespace) -> int:
    user, client_id = _entity(args)
    try:
        with zk_target.connect(args) as admin:
            configs = read_all_quota_configs(admin)
    except zk_target.NoZooKeeper as error:
        return _fail(str(error))
    rows = [
        (entity, values)
        for entity, values in sorted(configs.items(), key=lambda i: (i[0][0] or "", i[0][1] or ""))
        if (user is None or entity[0] == user) and (client_id is None or entity[1] == client_id)
    ]
    if not rows:
        print("no quotas configured")
        return 0
    width = max(len(describe_entity(entity)) for entity, _ in rows)
    header = (
        f"{'ENTITY':<{width}}  {PRODUCER_BYTE_RATE:>18}  {CONSUMER_BYTE_RATE:>18}  "
        f"{REQUEST_PERCENTAGE:>18}"
    )
    print(header)
    for entity, values in rows:
        cells = [_cell(values.get(key)) for key in QUOTA_KEYS]
        print(f"{describe_entity(entity):<{width}}  " + "  ".join(f"{c:>18}" for c in cells))
    return 0


def _cell(value: float | None) -> str:
    if value is None:
        return "-"
    return str(int(value)) if value == int(value) else str(value)


def set_command(args: argparse.Namespace) -> int:
    entity = _entity(args)
    if entity == (None, None):
        return _fail("name a --user/--default-user, a --client-id/--default-client-id, or both")
    changes: dict[str, float | None] = {}
    for key, value in (
        (PRODUCER_BYTE_RATE, args.producer_byte_rate),
        (CONSUMER_BYTE_RATE, args.consumer_byte_rate),
        (REQUEST_PERCENTAGE, args.request_percentage),
    ):
        if value is not None:
            try:
                validate_quota_value(key, float(value))
            except InvalidQuotaRequest as error:
                return _fail(str(error))
            changes[key] = float(value)
    if not changes:
        return _fail(
            "nothing to set: give --producer-byte-rate, --consumer-byte-rate and/or "
            "--request-percentage"
        )
    return _alter(args, entity, changes)


def delete_command(args: argparse.Namespace) -> int:
    entity = _entity(args)
    if entity == (None, None):
        return _fail("name a --user/--default-user, a --client-id/--default-client-id, or both")
    keys = args.keys.split(",") if args.keys else list(QUOTA_KEYS)
    unknown = [key for key in keys if key not in QUOTA_KEYS]
    if unknown:
        return _fail(f"unknown quota key(s) {', '.join(unknown)}; known: {', '.join(QUOTA_KEYS)}")
    return _alter(args, entity, dict.fromkeys(keys))


def _alter(args: argparse.Namespace, entity: Entity, changes: dict[str, float | None]) -> int:
    try:
        with zk_target.connect(args) as admin:
            config = alter_quota_config(admin, entity, changes)
    except zk_target.NoZooKeeper as error:
        return _fail(str(error))
    shown = ", ".join(f"{k}={v}" for k, v in sorted(config.items())) or "no quotas"
    print(f"{describe_entity(entity)}: {shown}")
    return 0
