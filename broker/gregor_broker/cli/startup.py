"""What a process started as one of Gregor's commands does before its first import of kio."""

from __future__ import annotations

import sys


def without_hypothesis() -> None:
    """Make ``hypothesis`` unimportable in this process; call it before kio is imported.

    kio registers a hypothesis strategy for each of its types whenever hypothesis can be
    imported, as it can wherever the tests' extras are installed (``make run`` and
    ``make test`` use that environment). The first registration builds hypothesis's
    Unicode tables and caches them in ``.hypothesis/`` under the working directory: a
    broker's own directory, new at every ``gregor local up``, or wherever a user runs
    ``gregor``: each broker start and each ``gregor`` command spent about 3 s of CPU there
    (more than half of a broker's start) and left the cache behind. Neither ever draws a
    strategy. Only a process's entry point calls this: a test that imports a command's
    module keeps its hypothesis.
    """
    sys.modules.setdefault("hypothesis", None)


def gregor() -> int:
    """The ``gregor`` command (pyproject's scripts): ``cli.main`` imports every command
    group, and with them kio, so hypothesis is made unimportable first."""
    without_hypothesis()
    from .main import main

    return main()
