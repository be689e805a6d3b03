"""Two variants of one workload measured in turns, and their figures.

Each repetition measures both variants, the order alternating (the first variant first
in even repetitions) so that neither always runs on a warmer machine; figures are
summarised as median, min and max, and compared as the ratio of the two measured in the
same repetition. Used by the compaction (cleaner on/off), transactions (idempotent
and transactional) and security (PLAINTEXT and SASL_SSL) benchmarks; the harness's
rows alternate their targets the same way.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

Figure = TypeVar("Figure")


def alternate(
    reps: int,
    measure: Callable[[bool, int], Figure],
    before_each: Callable[[int], None] | None = None,
) -> tuple[list[Figure], list[Figure]]:
    """``measure(first, rep)`` for both variants in every repetition (``before_each(rep)``
    first): the first variant's figures and the second's, in repetition order."""
    first: list[Figure] = []
    second: list[Figure] = []
    for rep in range(reps):
        if before_each is not None:
            before_each(rep)
        for is_first in (True, False) if rep % 2 == 0 else (False, True):
            (first if is_first else second).append(measure(is_first, rep))
    return first, second


def spread(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def ratio_spread(numerators: list[float], denominators: list[float]) -> dict[str, float]:
    """The spread of the ratios of figures measured in the same repetition."""
    return spread([n / d for n, d in zip(numerators, denominators, strict=True)])


def run_main(
    parser: argparse.ArgumentParser, argv: list[str] | None, run: Callable[..., dict[str, Any]]
) -> int:
    """A benchmark module's ``main``: ``--reps`` and ``--work-dir`` join the parser's own
    options, each option is passed to ``run`` by name (with the new temporary directory
    below ``--work-dir`` first), and the result is printed as JSON."""
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--work-dir", type=Path, default=None)
    options = vars(parser.parse_args(argv))
    with tempfile.TemporaryDirectory(dir=options.pop("work_dir")) as directory:
        result = run(Path(directory), **options)
    print(json.dumps(result, indent=2))
    return 0
