"""``python -m tests.chaos``: run a chaos campaign (``make chaos SEED=... DURATION=...``).

Example: ``python -m tests.chaos --seed 7 --duration 600 --json chaos-7.json``. Prints the
fault log as it goes, then a summary table; writes the JSON result; exits 1 when any
acknowledged write was lost or acknowledged twice, replicas diverged or a committed
offset went back (2 when the campaign itself could not run).
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from ..seeded_run import could_not_run, finish, new_seed, stamped_log
from .campaign import Settings, run_campaign, summary
from .cluster import SESSION_TIMEOUT_MS
from .nemesis import FAULTS

CONCURRENCY = 20  # workers; more faults wait for claims than run (docs/testing.md)
PAUSE_ONE_AT_A_TIME = (0.5, 2.0)
PAUSE_OVERLAPPING = (0.1, 0.5)


def _pause(text: str | None, concurrency: int) -> tuple[float, float]:
    if text is None:
        return PAUSE_ONE_AT_A_TIME if concurrency == 1 else PAUSE_OVERLAPPING
    low, _, high = text.partition("-")
    return float(low), float(high or low)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.chaos",
        description="Seeded fault campaign against a real 3-broker Gregor cluster.",
        epilog="example: python -m tests.chaos --seed 7 --duration 600 --concurrency 6 "
        "--json chaos.json",
    )
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: new)")
    parser.add_argument("--duration", type=float, default=600, help="seconds of faults")
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--producers", type=int, default=3)
    parser.add_argument("--rate", type=float, default=150, help="messages/s per producer")
    parser.add_argument(
        "--kinds",
        default="",
        help=f"comma-separated fault kinds (default: all of {','.join(FAULTS)})",
    )
    parser.add_argument(
        "--concurrency",
        type=int,
        default=CONCURRENCY,
        help="nemesis workers: above 1, faults overlap, each holding claims on the brokers, "
        "ZooKeeper or partition it touches, with short pauses instead of a settle between "
        f"faults (default {CONCURRENCY}; 1: one fault at a time, settled in between)",
    )
    parser.add_argument(
        "--pause",
        default=None,
        help="LOW-HIGH seconds a worker pauses between its faults "
        f"(default {PAUSE_ONE_AT_A_TIME[0]}-{PAUSE_ONE_AT_A_TIME[1]} one at a time, "
        f"{PAUSE_OVERLAPPING[0]}-{PAUSE_OVERLAPPING[1]} overlapping)",
    )
    parser.add_argument(
        "--session-timeout-ms",
        type=int,
        default=SESSION_TIMEOUT_MS,
        help="the brokers' zookeeper.session.timeout.ms; zombie, ZooKeeper and network "
        f"fault spans scale with it (default {SESSION_TIMEOUT_MS})",
    )
    parser.add_argument("--no-netns", action="store_true", help="no network namespaces")
    parser.add_argument(
        "--no-zygote",
        action="store_true",
        help="start every broker as a new interpreter instead of forking it from a "
        "pre-imported zygote (slower restarts; for comparison)",
    )
    parser.add_argument("--dir", type=Path, default=None, help="keep the cluster files here")
    parser.add_argument("--keep", action="store_true", help="keep files even when clean")
    parser.add_argument("--json", type=Path, default=None, help="write the result here")
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else new_seed()
    # kazoo logs every reconnection attempt while the nemesis has ZooKeeper down.
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("kazoo").setLevel(logging.CRITICAL)

    settings = Settings(
        seed=seed,
        duration=args.duration,
        partitions=args.partitions,
        producers=args.producers,
        rate=args.rate,
        kinds=[kind for kind in args.kinds.split(",") if kind],
        concurrency=args.concurrency,
        pause_s=_pause(args.pause, args.concurrency),
        use_netns=not args.no_netns,
        use_zygote=not args.no_zygote,
        directory=args.dir,
        keep=args.keep,
        session_timeout_ms=args.session_timeout_ms,
    )
    try:
        result = run_campaign(settings, log=stamped_log)
    except Exception as error:
        return could_not_run("chaos campaign", seed, error)
    return finish(result, summary(result), args.json)


if __name__ == "__main__":
    sys.exit(main())
