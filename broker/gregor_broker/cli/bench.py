"""``gregor bench``: run the benchmark harness (``bench/`` in the source tree).

The harness is not part of the installed package: it lives next to the broker in the
repository, with its results. This group finds it from the source checkout that
``gregor`` was installed from (``pip install -e``), or from the current directory, and
runs it in this process; every measurement still runs in processes of its own.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def find_checkout() -> Path | None:
    """The repository root holding ``bench/harness.py``, if there is one."""
    candidates = [Path(__file__).resolve().parents[3], Path.cwd(), *Path.cwd().parents]
    for root in candidates:
        if (root / "bench" / "harness.py").is_file():
            return root
    return None


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    bench = subparsers.add_parser(
        "bench",
        help="benchmark Gregor against a peer broker and this machine's limits",
        description=(
            "Benchmark Gregor against a peer broker (tansu) and this machine's physical "
            "limits, all measured in the same run; writes bench/results/<timestamp>.json "
            "and a markdown table. Needs the bench extra: pip install -e '.[bench]'. "
            "See docs/performance.md."
        ),
    )
    root = find_checkout()
    if root is None:
        bench.set_defaults(func=_no_checkout)
        return
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    from bench import harness

    harness.add_arguments(bench)
    bench.set_defaults(func=harness.run)


def _no_checkout(_args: argparse.Namespace) -> int:
    print(
        "gregor bench: the benchmark harness (bench/) is not here; run it from a source "
        "checkout of Gregor (git clone, then 'make bench').",
        file=sys.stderr,
    )
    return 2
