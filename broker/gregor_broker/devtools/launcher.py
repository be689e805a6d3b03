"""The supervisor's side of the broker zygote (``gregor_broker.cli.broker_zygote``).

``BrokerLauncher`` starts one zygote (under a command prefix such as ``ip netns exec``, so
its children live in the broker's network namespace) and hands out ``ForkedProcess``es:
the part of ``subprocess.Popen``'s interface ``BrokerProcess`` uses (``pid``, ``poll``,
``wait``, ``kill``, ``send_signal``, ``returncode``). Signals go through a pidfd, so a
broker that has exited and whose pid was reused is never signalled by mistake; exit
statuses come from the zygote, which is the brokers' parent and reaps them.

Opt-in (``BrokerProcess(launcher=...)``, ``LocalCluster(launcher=...)``): the chaos campaign
and the test fixtures (one zygote per pytest worker) use it to start brokers in
milliseconds instead of seconds; ``gregor local`` spawns brokers directly.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

ZYGOTE_MODULE = "gregor_broker.cli.broker_zygote"


class LauncherError(RuntimeError):
    """The zygote is gone or did not answer."""


class ForkedProcess:
    """A broker forked by a zygote, with ``subprocess.Popen``'s calls ``BrokerProcess``
    makes."""

    def __init__(self, launcher: BrokerLauncher, pid: int) -> None:
        self.launcher = launcher
        self.pid = pid
        self.returncode: int | None = None
        try:
            self._pidfd: int | None = os.pidfd_open(pid)
        except ProcessLookupError:  # exited (and reaped) already
            self._pidfd = None

    def _exited(self) -> bool:
        if self._pidfd is None:
            return True
        readable, _, _ = select.select([self._pidfd], [], [], 0)
        return bool(readable)

    def poll(self) -> int | None:
        if self.returncode is None and self._exited():
            # The zygote reports the status once it has reaped the child (at once).
            self.returncode = self.launcher.exit_status(self.pid, timeout=5.0)
            self._close()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if self._pidfd is not None:
                remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
                if remaining == 0.0:
                    raise subprocess.TimeoutExpired(["broker", str(self.pid)], timeout or 0.0)
                select.select([self._pidfd], [], [], remaining)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, signum: int) -> None:
        if self.poll() is not None or self._pidfd is None:
            return
        with contextlib.suppress(ProcessLookupError):
            signal.pidfd_send_signal(self._pidfd, signum)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def _close(self) -> None:
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None


class BrokerLauncher:
    """One zygote process; ``launch`` forks a broker from it (see the module docstring)."""

    def __init__(
        self,
        command_prefix: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        ready_timeout: float = 120.0,
    ) -> None:
        environment = dict(os.environ if env is None else env)
        environment.setdefault("PYTHONUNBUFFERED", "1")
        self.process = subprocess.Popen(
            [*command_prefix, sys.executable, "-m", ZYGOTE_MODULE],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=environment,
            start_new_session=True,
        )
        self._lock = threading.Lock()  # one launch at a time on the pipe
        self._condition = threading.Condition()
        self._pids: list[int] = []
        self._statuses: dict[int, int] = {}
        self._ready = threading.Event()
        self._closed = False
        self._reader = threading.Thread(target=self._read, name="zygote-reader", daemon=True)
        self._reader.start()
        self.ready_timeout = ready_timeout  # waited for at the first launch, not here

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            try:
                message = json.loads(line)
            except ValueError:
                continue
            with self._condition:
                if "ready" in message:
                    self._ready.set()
                elif "pid" in message:
                    self._pids.append(int(message["pid"]))
                elif "exit" in message:
                    self._statuses[int(message["exit"])] = int(message["status"])
                self._condition.notify_all()
        with self._condition:
            self._closed = True
            self._condition.notify_all()

    def launch(
        self, argv: Sequence[str], log: Path, cwd: Path, env: Mapping[str, str]
    ) -> ForkedProcess:
        """Fork a broker running ``gregor_broker.cli.broker.main(argv)`` with stdout and
        stderr appended to ``log``."""
        request = {"argv": list(argv), "log": str(log), "cwd": str(cwd), "env": dict(env)}
        if not self._ready.wait(self.ready_timeout):
            raise LauncherError(f"broker zygote not ready within {self.ready_timeout:.0f} s")
        with self._lock:
            if self.process.poll() is not None or self.process.stdin is None:
                raise LauncherError(f"broker zygote exited with {self.process.returncode}")
            self.process.stdin.write((json.dumps(request) + "\n").encode())
            self.process.stdin.flush()
            with self._condition:
                deadline = time.monotonic() + 60
                while not self._pids:
                    if self._closed or time.monotonic() > deadline:
                        raise LauncherError("broker zygote did not answer a launch")
                    self._condition.wait(1.0)
                pid = self._pids.pop(0)
        return ForkedProcess(self, pid)

    def exit_status(self, pid: int, timeout: float) -> int:
        """The status the zygote reported for ``pid`` (-9 when none came: zygote gone)."""
        deadline = time.monotonic() + timeout
        with self._condition:
            while pid not in self._statuses and not self._closed:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._condition.wait(remaining)
            return self._statuses.pop(pid, -signal.SIGKILL)

    def close(self) -> None:
        """End the zygote (end of its stdin); brokers it forked run on."""
        if self.process.stdin is not None:
            with contextlib.suppress(OSError):
                self.process.stdin.close()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
