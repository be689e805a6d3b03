"""``gregor-broker``: run one broker process (what a container runs)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ..config import ConfigError, load_broker_config
from .startup import without_hypothesis

if TYPE_CHECKING:
    from ..server.broker import Broker


def import_broker() -> type[Broker]:
    """Import the server: every request schema, the handlers and the log layer, most of
    what a broker's start costs (the zygote pays it once, before it forks)."""
    from ..server.broker import Broker

    return Broker


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="gregor-broker",
        description=(
            "Run one Gregor broker: a Kafka-compatible server that stores partitions in "
            "log.dirs and coordinates through ZooKeeper (zookeeper.connect). Settings use "
            "Kafka's own property names, from a properties file, environment variables "
            "GREGOR_<KEY> (dots as underscores, e.g. GREGOR_BROKER_ID=1), and --override."
        ),
    )
    parser.add_argument(
        "--config", type=Path, help="server.properties file with Kafka broker settings"
    )
    parser.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set one property, winning over the file and environment (repeatable)",
    )
    parser.add_argument(
        "--log-level", default="INFO", help="logging level: DEBUG, INFO, WARNING (default INFO)"
    )
    return parser.parse_args(argv)


async def run(broker: Broker) -> int:
    """Serve until SIGTERM/SIGINT or until the broker must stop by itself (every log dir
    failed); return the exit status."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()

    def on_signal(_signum: int, _frame: object) -> None:
        loop.call_soon_threadsafe(stop.set)

    # Python-level handlers, not ``loop.add_signal_handler``: asyncio learns of a signal
    # only from the byte its C handler writes to the loop's self-pipe, and while threads
    # post thousands of ZooKeeper watch events that pipe can be full: the write fails
    # ("Exception ignored when trying to write to the signal wakeup fd") and the SIGTERM
    # is lost, so the broker never shuts down. A Python handler always runs (in the main
    # thread, at the next bytecode), and ``stop`` is then set from within the loop.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)
    await broker.start()
    waits = [
        asyncio.ensure_future(stop.wait()),
        asyncio.ensure_future(broker.shutdown_requested.wait()),
    ]
    await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    for wait in waits:
        wait.cancel()
    await broker.stop()
    return broker.exit_status


def main(argv: list[str] | None = None) -> int:
    without_hypothesis()
    args = parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    overrides = {}
    for item in args.override:
        key, sep, value = item.partition("=")
        if not sep:
            print(f"gregor-broker: --override expects KEY=VALUE, got {item!r}", file=sys.stderr)
            return 2
        overrides[key.strip()] = value.strip()
    try:
        config = load_broker_config(args.config, overrides)
        # Builds the listeners' TLS contexts and SASL settings: bad ones stop it here.
        broker = import_broker()(config)
    except (ConfigError, OSError) as error:
        print(f"gregor-broker: {error}", file=sys.stderr)
        return 2
    return asyncio.run(run(broker))


if __name__ == "__main__":
    sys.exit(main())
