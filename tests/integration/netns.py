"""Several hosts on one machine: network namespaces on a bridge, for partition tests.

``Network`` builds a small LAN out of Linux network namespaces: a "switch" namespace
holding a bridge, one namespace per host, each joined to the bridge by a veth pair and
given the address ``10.200.<run>.<n>/24``, and an uplink veth from the namespace the
tests run in (the root namespace) so that clients in the test process reach every host
at ``10.200.<run>.254``. ``<run>`` is claimed per network (an ``ip netns add`` of the
switch namespace is exclusive), so parallel test runs never share a subnet.

Faults:
- ``partition(host)`` / ``heal(host)``: the host's port on the switch goes down, cutting
  it off from every other host and from the test process (both directions);
- ``isolate_inbound(host)``: a one-way partition, the host can send but receives nothing
  (blackhole routes to its address everywhere else); ``heal`` undoes it too.

It owns only what it creates: namespaces named ``gregor-net<run>-*``, the uplink
``gregor<run>`` and routes to its own addresses. ``close()`` deletes all of it and is
safe to call after any failure, any number of times; ``close_all()`` closes every
network this process still has open (the session-scoped cleanup). Starting processes
inside a host (``command_prefix``/``run_in``) is the caller's business, and so is
stopping them: a namespace with processes still in it outlives ``ip netns del``.

Needs root and iproute2. ``unavailable_reason()`` says why namespaces cannot be made.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import random
import shutil
import subprocess
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

SUBNET_PREFIX = "10.200"
UPLINK_HOST_NUMBER = 254
MAX_HOSTS = 200

_open_networks: list[Network] = []
_open_lock = threading.Lock()


class NetnsError(RuntimeError):
    """An ``ip`` command failed."""


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30, check=False)
    if check and result.returncode != 0:
        raise NetnsError(f"ip {' '.join(args)} failed: {result.stderr.strip()}")
    return result


def unavailable_reason() -> str | None:
    """Why this machine cannot run namespace tests, or None when it can."""
    if os.geteuid() != 0:
        return f"network namespaces need root (tests run as uid {os.geteuid()})"
    if shutil.which("ip") is None:
        return "iproute2's 'ip' command is not installed"
    probe = f"gregor-probe-{os.getpid()}-{random.randrange(1 << 30)}"
    result = _ip("netns", "add", probe, check=False)
    if result.returncode != 0:
        return f"'ip netns add' fails here: {result.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    return None


@dataclass
class Host:
    """One namespace on the network: ``address`` is reachable from every other host."""

    name: str
    namespace: str
    address: str
    switch_port: str  # its veth end in the switch namespace, attached to the bridge


@dataclass
class Network:
    """A bridge in a switch namespace, hosts around it, and an uplink to this process."""

    run: int = -1
    hosts: dict[str, Host] = field(default_factory=dict)
    _blackholes: list[tuple[str | None, str]] = field(default_factory=list, repr=False)
    _closed: bool = False

    def __post_init__(self) -> None:
        with _open_lock:
            _open_networks.append(self)
        try:
            self._claim_subnet()
            self._build_switch()
        except BaseException:
            self.close()
            raise

    # names ---------------------------------------------------------------------------
    @property
    def switch(self) -> str:
        return f"gregor-net{self.run}-switch"

    @property
    def uplink(self) -> str:
        return f"gregor{self.run}"

    @property
    def uplink_address(self) -> str:
        return self.address(UPLINK_HOST_NUMBER)

    def address(self, number: int) -> str:
        return f"{SUBNET_PREFIX}.{self.run}.{number}"

    # construction --------------------------------------------------------------------
    def _claim_subnet(self) -> None:
        """Take the first free ``10.200.<run>.0/24``, starting at a random ``run``.

        The switch namespace is the claim: ``ip netns add`` refuses an existing name, so
        two runs racing for the same subnet cannot both win it.
        """
        start = random.randrange(1, 255)
        for step in range(254):
            run = (start + step) % 254 + 1
            routed = _ip("-4", "route", "show", "root", f"{SUBNET_PREFIX}.{run}.0/24", check=False)
            if routed.stdout.strip():
                continue  # someone else's network (or one a crashed run left behind)
            if _ip("netns", "add", f"gregor-net{run}-switch", check=False).returncode == 0:
                self.run = run
                return
        raise NetnsError(f"no free {SUBNET_PREFIX}.x.0/24 subnet for a test network")

    def _build_switch(self) -> None:
        switch = self.switch
        _ip("-n", switch, "link", "set", "lo", "up")
        _ip("-n", switch, "link", "add", "br0", "type", "bridge")
        _ip("-n", switch, "link", "set", "br0", "up")
        # Uplink: this process's end stays in the root namespace.
        _ip("link", "add", self.uplink, "type", "veth", "peer", "name", "uplink", "netns", switch)
        _ip("-n", switch, "link", "set", "uplink", "master", "br0", "up")
        _ip("addr", "add", f"{self.uplink_address}/24", "dev", self.uplink)
        _ip("link", "set", self.uplink, "up")

    def add_host(self, name: str) -> Host:
        """A new namespace with the next address (``.1``, ``.2``, ...) on the bridge."""
        if self._closed:
            raise NetnsError("the network is closed")
        if name in self.hosts:
            raise ValueError(f"host {name} already exists")
        number = len(self.hosts) + 1
        if number > MAX_HOSTS:
            raise NetnsError(f"at most {MAX_HOSTS} hosts per network")
        host = Host(
            name=name,
            namespace=f"gregor-net{self.run}-{name}",
            address=self.address(number),
            switch_port=f"port{number}",
        )
        _ip("netns", "add", host.namespace)
        self.hosts[name] = host
        _ip("-n", host.namespace, "link", "set", "lo", "up")
        _ip(
            "-n", host.namespace, "link", "add", "eth0", "type", "veth",
            "peer", "name", host.switch_port, "netns", self.switch,
        )  # fmt: skip
        _ip("-n", self.switch, "link", "set", host.switch_port, "master", "br0", "up")
        _ip("-n", host.namespace, "addr", "add", f"{host.address}/24", "dev", "eth0")
        _ip("-n", host.namespace, "link", "set", "eth0", "up")
        return host

    # processes -----------------------------------------------------------------------
    def command_prefix(self, host: Host | str) -> list[str]:
        """``ip netns exec <namespace>``: prepend it to run a command inside ``host``.

        ``ip netns exec`` execs the command, so the child keeps the pid Popen reports.
        """
        return ["ip", "netns", "exec", self._host(host).namespace]

    def run_in(self, host: Host | str, argv: Sequence[str], **popen: Any) -> subprocess.Popen[Any]:
        """Start ``argv`` inside ``host`` (``subprocess.Popen`` keyword arguments apply)."""
        return subprocess.Popen([*self.command_prefix(host), *argv], **popen)

    # faults --------------------------------------------------------------------------
    def partition(self, host: Host | str) -> None:
        """Cut ``host`` off from every other host and from this process, both ways."""
        _ip("-n", self.switch, "link", "set", self._host(host).switch_port, "down")

    def isolate_inbound(self, host: Host | str) -> None:
        """One-way partition: ``host`` still sends, but nothing reaches it.

        Every other namespace (and this process's) drops what it would send to the
        host's address, through a blackhole route.
        """
        target = self._host(host)
        for other in self.hosts.values():
            if other is not target:
                self._blackhole(other.namespace, target.address)
        self._blackhole(None, target.address)

    def heal(self, host: Host | str) -> None:
        """Undo ``partition`` and ``isolate_inbound`` for ``host``."""
        target = self._host(host)
        _ip("-n", self.switch, "link", "set", target.switch_port, "up")
        for namespace, address in list(self._blackholes):
            if address == target.address:
                self._unblackhole(namespace, address)

    def _blackhole(self, namespace: str | None, address: str) -> None:
        if (namespace, address) in self._blackholes:
            return
        _ip(*self._in(namespace), "route", "add", "blackhole", f"{address}/32")
        self._blackholes.append((namespace, address))

    def _unblackhole(self, namespace: str | None, address: str) -> None:
        _ip(*self._in(namespace), "route", "del", "blackhole", f"{address}/32", check=False)
        with contextlib.suppress(ValueError):
            self._blackholes.remove((namespace, address))

    @staticmethod
    def _in(namespace: str | None) -> list[str]:
        return ["-n", namespace] if namespace is not None else []

    def _host(self, host: Host | str) -> Host:
        return self.hosts[host] if isinstance(host, str) else host

    # teardown ------------------------------------------------------------------------
    def close(self) -> None:
        """Delete every route, link and namespace this network created (idempotent)."""
        if self._closed:
            return
        self._closed = True
        try:
            for namespace, address in list(self._blackholes):
                self._unblackhole(namespace, address)
            for host in self.hosts.values():
                _ip("netns", "del", host.namespace, check=False)
            if self.run > 0:
                # Deleting the uplink deletes its peer; the switch namespace then goes.
                _ip("link", "del", self.uplink, check=False)
                _ip("netns", "del", self.switch, check=False)
        finally:
            with _open_lock, contextlib.suppress(ValueError):
                _open_networks.remove(self)

    def __enter__(self) -> Network:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def close_all() -> None:
    """Close every network this process has not closed yet (session teardown)."""
    with _open_lock:
        networks = list(_open_networks)
    for network in networks:
        network.close()


# A run interrupted between tests still leaves nothing behind.
atexit.register(close_all)
