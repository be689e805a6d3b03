"""What the seeded long-running harnesses share (``tests.chaos``, ``tests.fuzz``): a new
seed when none is given, time-stamped progress lines, the JSON result and exit code, and
background threads that loop until stopped.
"""

from __future__ import annotations

import json
import random
import sys
import threading
import time
from pathlib import Path
from typing import Any, ClassVar


def new_seed() -> int:
    return random.SystemRandom().randrange(1 << 31)


def stamped_log(line: str) -> None:
    print(time.strftime("%H:%M:%S ") + line, flush=True)


def write_json(result: dict[str, Any], path: Path) -> None:
    path.write_text(json.dumps(result, indent=2, default=str) + "\n")


def finish(result: dict[str, Any], table: str, json_path: Path | None) -> int:
    """Print the summary, write the JSON; exit code 0 when there was no violation."""
    print(table, flush=True)
    if json_path is not None:
        write_json(result, json_path)
        print(f"result written to {json_path}")
    return 0 if result["violations"] == 0 else 1


def could_not_run(what: str, seed: int, error: Exception) -> int:
    print(f"{what} with seed {seed} could not run: {error!r}", file=sys.stderr)
    return 2


class BackgroundLoop:
    """``start()``/``stop()`` for a component whose ``_run()`` loops until
    ``self.stopping`` is set (it waits on that event between rounds)."""

    thread_name: ClassVar[str] = "background-loop"

    def _run(self) -> None:
        raise NotImplementedError

    def start(self) -> None:
        self.stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self.stopping.set()
        self._thread.join()
