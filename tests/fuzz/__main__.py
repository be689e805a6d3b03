"""``python -m tests.fuzz``: fuzz a live broker (``make fuzz INPUTS=... SEED=...``).

Example: ``python -m tests.fuzz --seed 3 --inputs 50000 --json fuzz-3.json``. Exits 1 on
any crash, hang, damaged control topic, RSS over the limit or stored invalid batch (2
when the run itself could not start).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

from .campaign import Settings, run_fuzz, summary, write_json


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
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 31)

    def log(line: str) -> None:
        print(time.strftime("%H:%M:%S ") + line, flush=True)

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
        result = run_fuzz(settings, log=log)
    except Exception as error:
        print(f"fuzzing with seed {seed} could not run: {error!r}", file=sys.stderr)
        return 2
    print(summary(result), flush=True)
    if args.json is not None:
        write_json(result, args.json)
        print(f"result written to {args.json}")
    return 0 if result["violations"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
