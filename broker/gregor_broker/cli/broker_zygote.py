"""``python -m gregor_broker.cli.broker_zygote``: a pre-forked broker launcher (a zygote).

Starting a broker is mostly importing it: ``gregor_broker.cli.broker.import_broker``
pulls in every request schema, the server and the log layer, 1-3 s of CPU before the
broker does anything (10-20 s of wall time on a loaded 2-core machine). A fault campaign
restarts brokers hundreds of times, so this process pays for the imports once and then
forks a broker on demand. Each child is a genuine fresh broker process: its own pid and session,
its own stdin/stdout/stderr, no thread or event loop inherited (the zygote starts none),
``random`` reseeded by the fork hook; ``kill -9`` of it is a real crash.

Protocol (one JSON object per line; ``gregor_broker.devtools.launcher`` is the client):
the supervisor writes ``{"argv": [...], "log": path, "cwd": dir, "env": {...}}`` on stdin;
the zygote answers ``{"pid": N}`` on stdout, and ``{"exit": N, "status": S}`` when child
N ends (S as ``subprocess.Popen.returncode``: negative for a signal). End of stdin stops
the zygote; its brokers run on (their own sessions).

Example: ``python -m gregor_broker.cli.broker_zygote`` (then a request line on stdin).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from typing import Any

from . import broker as broker_cli
from .startup import without_hypothesis


def _report(message: dict[str, Any]) -> None:
    # One write of one short line: atomic on a pipe, also from the SIGCHLD handler that
    # may run between two bytecodes of another report.
    os.write(1, (json.dumps(message) + "\n").encode())


def _reap(_signum: int, _frame: object) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        _report({"exit": pid, "status": os.waitstatus_to_exitcode(status)})


def _child(request: dict[str, Any]) -> None:
    """In the forked child: become what ``subprocess.Popen(..., start_new_session=True)``
    would have made, then run the broker; never returns."""
    code = 1
    try:
        os.setsid()
        for signum in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, signal.SIG_DFL)
        log = os.open(request["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.closerange(3, 1 << 16)
        sys.stdin = open(0, closefd=False)  # noqa: SIM115 - the process's own stdin
        sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.argv = [broker_cli.__file__, *request["argv"]]
        code = broker_cli.main(request["argv"])
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args:  # --help (it takes no options: requests come on stdin)
        print(__doc__)
        return 0 if args[0] in ("-h", "--help") else 2
    without_hypothesis()
    broker_cli.import_broker()
    signal.signal(signal.SIGCHLD, _reap)
    # Ctrl-C in a terminal reaches the supervisor; the zygote stops at end of stdin.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _report({"ready": os.getpid()})
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _child(request)
        _report({"pid": pid})
    return 0


if __name__ == "__main__":
    sys.exit(main())
