"""What every ``gregor`` command that talks to brokers (like Kafka's tools with
``--bootstrap-server``) shares: the option, an admin client whose librdkafka logs go to
Python logging instead of the terminal, waiting for a result with an error a person can
act on, and output as a table or as JSON for scripts.

Exit codes, the same for every command: 0 done, 1 the cluster refused or a check failed
(the message names the object and the reason), 2 bad usage or no cluster reachable.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Sequence
from typing import Any

from .command_config import CommandConfig, CommandConfigError, load

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
TIMEOUT_S = 30.0

log = logging.getLogger("gregor.cli")
# librdkafka's own log lines ("PARTCNT", connection refusals, ...) land here: silent unless
# the user asks for -v.
librdkafka_log = logging.getLogger("gregor.librdkafka")
# Silent by default in every process that imports this (the CLI, the bench and its client
# processes); ``gregor -v`` lowers the level again.
librdkafka_log.setLevel(logging.CRITICAL)


class ToolError(Exception):
    """A refusal or failure to report: ``exit_code`` 1 (refused) or 2 (unreachable)."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


# The --command-config of this process's command (one command per process, as in Kafka's
# tools): every client the command makes uses it. PLAINTEXT until ``use`` is called.
_security: list[CommandConfig] = [CommandConfig()]


def add_bootstrap_argument(parser: argparse.ArgumentParser) -> None:
    """``--bootstrap-server`` and ``--command-config``: every command that talks to brokers
    takes both (``main`` loads the file before the command runs)."""
    parser.add_argument(
        "--bootstrap-server",
        "-b",
        default=DEFAULT_BOOTSTRAP,
        metavar="HOST:PORT",
        help=f"any broker of the cluster (default: {DEFAULT_BOOTSTRAP})",
    )
    parser.add_argument(
        "--command-config",
        metavar="FILE",
        help="client properties as Kafka's tools take them: security.protocol, "
        "sasl.mechanism, sasl.jaas.config (or sasl.username/sasl.password), "
        "ssl.truststore.location (PEM), ssl.keystore.location, ... (docs/security.md)",
    )


def use_command_config(path: str | None) -> None:
    """Load ``--command-config`` for the rest of the process; ToolError (exit 2) when the
    file cannot be used."""
    try:
        _security[0] = load(path) if path else CommandConfig()
    except CommandConfigError as error:
        raise ToolError(str(error), exit_code=2) from error


def security() -> CommandConfig:
    """The loaded ``--command-config`` (PLAINTEXT when none was given)."""
    return _security[0]


def add_output_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--output",
        "-o",
        choices=("table", "json"),
        default="table",
        help="a table for people (default) or JSON for scripts",
    )


def command_group(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    help: str,
    description: str,
) -> argparse._SubParsersAction[argparse.ArgumentParser]:
    """A command whose subcommands do the work (``gregor NAME COMMAND``); alone it prints
    its help. Returns where its subcommands are added."""
    parser = subparsers.add_parser(name, help=help, description=description)
    parser.set_defaults(func=lambda _args: (parser.print_help(), 0)[1])
    return parser.add_subparsers(title="commands", metavar="COMMAND")


# Login and TLS failures librdkafka reported (through error_cb): a request that then
# times out says why instead of "no answer".
_login_errors: list[str] = []
# Admin clients made by ``admin``: ``result`` polls them so that error_cb runs.
_admins: list[Any] = []


def _on_error(error: Any) -> None:
    from confluent_kafka import KafkaError

    if error.code() in (KafkaError._AUTHENTICATION, KafkaError._SSL):
        _login_errors.append(error.str())


def client_config(bootstrap: str, **extra: Any) -> dict[str, Any]:
    """librdkafka settings every command uses: its logs go to ``gregor.librdkafka``,
    login failures are remembered, and ``--command-config``'s security settings apply."""
    return {
        "bootstrap.servers": bootstrap,
        "logger": librdkafka_log,
        "error_cb": _on_error,
        **_security[0].librdkafka(),
        **extra,
    }


def login_error() -> str | None:
    """The last login or TLS failure librdkafka reported, if any."""
    return _login_errors[-1] if _login_errors else None


def admin(bootstrap: str) -> Any:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    try:
        client = AdminClient(client_config(bootstrap))
    except (KafkaException, ValueError) as error:
        raise ToolError(f"client settings (--command-config): {error}", exit_code=2) from error
    _admins.append(client)
    return client


def result(future: Any, what: str) -> Any:
    """Wait for an admin future; a refusal becomes a :class:`ToolError` naming ``what``."""
    from concurrent.futures import TimeoutError as FutureTimeout

    from confluent_kafka import KafkaException

    deadline = time.monotonic() + TIMEOUT_S
    try:
        while True:
            try:
                return future.result(0.2)
            except (TimeoutError, FutureTimeout):
                for client in _admins:
                    client.poll(0)
                failed = login_error()
                if failed is not None:
                    raise ToolError(
                        f"{what}: cannot log in to the brokers: {failed} (check --command-config)",
                        exit_code=2,
                    ) from None
                if time.monotonic() >= deadline:
                    raise
    except KafkaException as error:
        detail = error.args[0].str() if error.args else str(error)
        raise ToolError(f"{what}: {detail}") from error
    except (TimeoutError, FutureTimeout) as error:
        raise ToolError(
            f"{what}: no answer from the brokers within {TIMEOUT_S:.0f} s "
            "(is the cluster up? check --bootstrap-server)",
            exit_code=2,
        ) from error


def brokers(bootstrap: str) -> list[Any]:
    """The cluster's brokers (DescribeCluster's nodes: id, host, port), by id."""
    client = admin(bootstrap)  # kept alive until the future is done
    cluster = result(client.describe_cluster(), "cannot list the brokers")
    return sorted(cluster.nodes, key=lambda node: node.id)


def parse_configs(pairs: Sequence[str] | None, option: str) -> dict[str, str]:
    """``k=v`` arguments (repeatable, or comma-separated like kafka-configs) to a dict."""
    configs: dict[str, str] = {}
    for pair in pairs or ():
        for item in _split_config_list(pair):
            key, sep, value = item.partition("=")
            if not sep or not key:
                raise ToolError(f"{option} {item!r}: expected KEY=VALUE", exit_code=2)
            configs[key.strip()] = value.strip()
    return configs


def _split_config_list(text: str) -> list[str]:
    """Split on commas that start a new ``key=``; values may hold commas ("a,b" lists
    such as cleanup.policy=compact,delete)."""
    items: list[str] = []
    for piece in text.split(","):
        if items and "=" not in piece:
            items[-1] += "," + piece
        else:
            items.append(piece)
    return [item for item in items if item]


def print_rows(rows: list[dict[str, Any]], columns: Sequence[str], output: str) -> None:
    """Rows as an aligned table (columns in order) or as one JSON array."""
    if output == "json":
        json.dump(rows, sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
        return
    if not rows:
        return
    shown = [[_cell(row.get(column)) for column in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in shown)) for i, c in enumerate(columns)]
    header = [column.upper().replace("_", "-") for column in columns]
    for line in [header, *shown]:
        print(
            "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        )


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    return str(value)


def run(func: Any, args: argparse.Namespace, prog: str) -> int:
    """Call ``func(args)``; report a :class:`ToolError` as ``prog: message`` with its code."""
    try:
        return func(args)
    except ToolError as error:
        print(f"{prog}: {error}", file=sys.stderr)
        return error.exit_code
