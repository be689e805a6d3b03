"""``python -m tests.fuzz``: fuzz a live broker (``make fuzz INPUTS=... SEED=...``).

Example: ``python -m tests.fuzz --seed 3 --inputs 50000 --json fuzz-3.json``. Exits 1 on
any crash, hang, damaged control topic, RSS over the limit or stored invalid batch (2
when the run itself could not start).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..seeded_run import could_not_run, finish, new_seed, stamped_log
from .campaign import Settings, run_fuzz, summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.fuzz",
        description="Seeded network fuzzer against a live Gregor broker.",
        epilog="example: python -m tests.fuzz --seed 3 --inputs 50000 --json fuzz.json",
    )
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: new)")
    parser.add_argument("--inputs", type=int, default=50_000, help="how many inputs")
    parser.add_argument("--first", type=int, default=0, help="index of the first input")
    parser.add_argument("--batch", type=int, default=500, help="inputs between health checks")
    parser.add_argument("--rss-limit-mb", type=float, default=1024)
    parser.add_argument("--latency-limit-s", type=float, default=1.0)
    parser.add_argument("--dir", type=Path, default=None, help="broker files go here")
    parser.add_argument("--json", type=Path, default=None, help="write the result here")
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else new_seed()

    settings = Settings(
        seed=seed,
        inputs=args.inputs,
        first=args.first,
        batch=args.batch,
        rss_limit_mb=args.rss_limit_mb,
        latency_limit_s=args.latency_limit_s,
        directory=args.dir,
    )
    try:
        result = run_fuzz(settings, log=stamped_log)
    except Exception as error:
        return could_not_run("fuzzing", seed, error)
    return finish(result, summary(result), args.json)


if __name__ == "__main__":
    sys.exit(main())
