"""The ``gregor`` command: one entry point, one subcommand group per module.

Each group module has ``register(subparsers)``, which adds its subparser and sets
``func`` (called with the parsed arguments, returns the exit code) on the group (to print
its help when no subcommand is given) and on every subcommand.
To add a group (topics, groups, reassign, quotas, ...), write ``cli/<group>.py`` with a
``register`` function and add it to ``COMMAND_GROUPS``.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence

from gregor_broker.cli.startup import without_hypothesis

if __name__ == "__main__":  # python -m gregor_broker.cli.main; the script: startup.gregor
    without_hypothesis()  # before the command groups import kio

from gregor_broker.cli import (  # after the guard above
    acls,
    bench,
    completion,
    configs,
    groups,
    kafka_api,
    leaders,
    local,
    log_dirs,
    offsets,
    perf,
    quotas,
    reassign,
    records,
    topics,
    transactions,
    users,
)

Register = Callable[["argparse._SubParsersAction[argparse.ArgumentParser]"], None]

COMMAND_GROUPS: list[Register] = [
    local.register,
    topics.register,
    configs.register,
    offsets.register,
    records.register,
    log_dirs.register,
    reassign.register,
    leaders.register,
    groups.register,
    transactions.register,
    quotas.register,
    users.register,
    acls.register,
    perf.register,
    bench.register,
    # The one group that needs the whole tree (to describe it): build_parser is looked up
    # when the parser is built, so completion.py need not import this module.
    lambda subparsers: completion.register(subparsers, build_parser),
]

DESCRIPTION = """\
Gregor is a Kafka-compatible broker: Kafka clients and tools (kcat, confluent-kafka,
kafka-python, ...) talk to it unchanged.

Start a cluster on this machine with 'gregor local up', check it with
'gregor local status' and stop it with 'gregor local down'.
Run 'gregor COMMAND --help' for the options of a command.
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gregor",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug details to stderr")
    subparsers = parser.add_subparsers(
        title="commands", metavar="COMMAND", dest="command", required=True
    )
    for register in COMMAND_GROUPS:
        register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # librdkafka's own log lines (kafka_api.client_config routes them to this logger,
    # silent unless asked for).
    logging.getLogger("gregor.librdkafka").setLevel(
        logging.DEBUG if args.verbose else logging.CRITICAL
    )
    if not args.verbose:
        # kazoo logs every refused connection attempt; the commands report failures themselves.
        logging.getLogger("kazoo").setLevel(logging.CRITICAL)
    if getattr(args, "command_config", None):
        try:
            kafka_api.use_command_config(args.command_config)
        except kafka_api.ToolError as error:
            print(f"gregor: {error}", file=sys.stderr)
            return error.exit_code
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
