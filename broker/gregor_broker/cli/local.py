"""``gregor local``: run a Gregor cluster (ZooKeeper + N brokers) on this machine.

``up`` starts it (in the foreground, or detached with ``--detach``), ``status`` reports on
it and ``down`` stops it. ``up`` records pids and ports in ``<data-dir>/cluster.json`` so
that ``status`` and ``down`` work from another shell. The processes themselves are
managed by ``gregor_broker.devtools.local_cluster``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Any

from gregor_broker.devtools.local_cluster import (
    BROKER_CMDLINE_MARKER,
    ZOOKEEPER_CMDLINE_MARKER,
    BrokerStartError,
    LocalCluster,
    parse_racks,
    pid_matches,
    registered_brokers,
    terminate_pids,
    zookeeper_client,
)
from gregor_broker.devtools.zookeeper_server import ZooKeeperNotInstalled, four_letter_word

DEFAULT_DATA_DIR = Path(".gregor")
STATE_FILE = "cluster.json"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    local = subparsers.add_parser(
        "local",
        help="run a Gregor cluster on this machine (up, status, down)",
        description=(
            "Run a Gregor cluster on this machine: a ZooKeeper server and N brokers on "
            "127.0.0.1, with their data, logs and pids under one data directory."
        ),
    )
    local.set_defaults(func=lambda _args: _print_help(local))
    commands = local.add_subparsers(title="commands", metavar="COMMAND")

    data_dir = argparse.ArgumentParser(add_help=False)
    data_dir.add_argument(
        "--data-dir",
        type=Path,
        default=DEFAULT_DATA_DIR,
        metavar="DIR",
        help="where the cluster keeps its data, logs and cluster.json (default: ./.gregor)",
    )

    up = commands.add_parser(
        "up",
        parents=[data_dir],
        help="start ZooKeeper and the brokers",
        description=(
            "Start a ZooKeeper server and N brokers, wait until every broker has registered "
            "in ZooKeeper, and print the bootstrap servers. Without --detach it stays in the "
            "foreground and stops everything on Ctrl-C. Data is kept between runs."
        ),
        epilog="example: gregor local up --brokers 3 --racks a,b,c --detach",
    )
    # The default is the shape users deploy: three brokers, one per rack (zone), so
    # replication factor 3 with rack-aware placement works out of the box.
    up.add_argument(
        "--brokers", type=int, default=3, metavar="N", help="how many brokers (default: 3)"
    )
    up.add_argument(
        "--racks",
        default="a,b,c",
        metavar="A,B,...",
        help="comma-separated racks; broker i gets racks[i %% len(racks)] "
        "(default: a,b,c; '' for none)",
    )
    up.add_argument(
        "--metrics-port",
        type=int,
        default=9404,
        metavar="PORT",
        help="metrics.port of broker 1 (/metrics, /healthz, /readyz); broker i uses "
        "PORT+i-1 (default: 9404; 0: free ports; -1: metrics off)",
    )
    up.add_argument(
        "--port",
        type=int,
        default=9092,
        help="port of broker 1; broker i listens on PORT+i-1 (default: 9092; 0: free ports)",
    )
    up.add_argument(
        "--zookeeper-port",
        type=int,
        default=2181,
        metavar="PORT",
        help="port of the ZooKeeper server (default: 2181; 0: a free port)",
    )
    up.add_argument(
        "--zookeeper",
        metavar="HOST:PORT[/CHROOT]",
        help="use this existing ZooKeeper instead of starting one",
    )
    up.add_argument(
        "--config",
        action="extend",
        nargs="+",
        default=[],
        metavar="KEY=VALUE",
        help="extra broker property for every broker, Kafka's names "
        "(e.g. --config num.partitions=3 auto.create.topics.enable=false)",
    )
    up.add_argument(
        "--detach",
        action="store_true",
        help="start in the background and return; stop with 'gregor local down'",
    )
    up.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="how long to wait for the brokers to register (default: 60)",
    )
    up.set_defaults(func=cmd_up)

    status = commands.add_parser(
        "status",
        parents=[data_dir],
        help="show ZooKeeper and the brokers: running? registered? address, rack",
        description=(
            "Show ZooKeeper and each broker of the local cluster: whether the process runs, "
            "whether the broker is registered in ZooKeeper, its address and rack. "
            "Exits with 0 when everything is up, 1 otherwise."
        ),
    )
    status.set_defaults(func=cmd_status)

    down = commands.add_parser(
        "down",
        parents=[data_dir],
        help="stop the brokers, then ZooKeeper (data is kept)",
        description=(
            "Stop the local cluster: SIGTERM to every broker (they flush their logs), "
            "SIGKILL after --timeout, then ZooKeeper. Data stays in the data directory; "
            "delete it to start from scratch."
        ),
    )
    down.add_argument(
        "--timeout",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="how long to wait for a clean exit before SIGKILL (default: 30)",
    )
    down.set_defaults(func=cmd_down)


def _print_help(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2


def _error(message: str) -> int:
    print(f"gregor local: {message}", file=sys.stderr)
    return 1


# --- cluster.json ---------------------------------------------------------------------


def state_path(data_dir: Path) -> Path:
    return data_dir / STATE_FILE


def load_state(data_dir: Path) -> dict[str, Any] | None:
    try:
        return json.loads(state_path(data_dir).read_text())
    except FileNotFoundError:
        return None
    except ValueError:
        return None


def save_state(data_dir: Path, state: dict[str, Any]) -> None:
    path = state_path(data_dir)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(state, indent=2) + "\n")
    tmp.replace(path)


def zookeeper_markers(zookeeper: dict[str, Any]) -> tuple[str, ...]:
    """What ZooKeeper's command line contains: its main class and its zoo.cfg path."""
    return (ZOOKEEPER_CMDLINE_MARKER, *([zookeeper["config"]] if "config" in zookeeper else []))


def broker_markers(broker: dict[str, Any]) -> tuple[str, ...]:
    """What a broker's command line contains: its module and its server.properties path."""
    return (BROKER_CMDLINE_MARKER, *([broker["config"]] if "config" in broker else []))


def live_pids(state: dict[str, Any]) -> list[int]:
    """Pids in ``state`` that still belong to this cluster's processes."""
    pids = []
    zookeeper = state.get("zookeeper", {})
    if zookeeper.get("pid") and pid_matches(zookeeper["pid"], *zookeeper_markers(zookeeper)):
        pids.append(zookeeper["pid"])
    for broker in state.get("brokers", []):
        if broker.get("pid") and pid_matches(broker["pid"], *broker_markers(broker)):
            pids.append(broker["pid"])
    return pids


# --- up -------------------------------------------------------------------------------


def port_in_use(port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def parse_properties(pairs: list[str]) -> dict[str, str]:
    properties = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--config {pair!r}: expected KEY=VALUE, e.g. num.partitions=3")
        properties[key.strip()] = value.strip()
    return properties


def _data_dir_option(data_dir: Path) -> str:
    """`` --data-dir DIR`` for the hints we print, unless DIR is the default from here."""
    if data_dir.resolve() == DEFAULT_DATA_DIR.resolve():
        return ""
    return f" --data-dir {data_dir}"


def _command() -> str:
    """How the user can run this command again: ``gregor`` if that is on PATH, else the
    path they used (``.venv/bin/gregor`` after ``make run``)."""
    script = Path(sys.argv[0])
    on_path = shutil.which("gregor")
    if script.name != "gregor" or (on_path and Path(on_path).resolve() == script.resolve()):
        return "gregor"
    return os.path.relpath(script)


def print_connection_info(state: dict[str, Any], data_dir: Path) -> None:
    bootstrap = state["bootstrap_servers"]
    first = bootstrap.split(",")[0]
    brokers = len(state["brokers"])
    option = _data_dir_option(data_dir)
    print(
        f"Gregor is running: {brokers} broker{'s' if brokers != 1 else ''}, "
        f"ZooKeeper at {state['zookeeper']['connect']}"
    )
    print(f"  bootstrap servers: {bootstrap}")
    metrics = [
        f"http://{broker['host']}:{broker['metrics_port']}/metrics"
        for broker in state["brokers"]
        if broker.get("metrics_port")
    ]
    if metrics:
        print(f"  metrics:           {' '.join(metrics)}")
    print(f"  list metadata:     kcat -b {first} -L")
    print(f"  produce:           echo hello | kcat -b {first} -t test -P")
    print(f"  consume:           kcat -b {first} -t test -C -o beginning -e")
    print(f"  broker logs:       {Path(state['brokers'][0]['log']).parent.parent}/broker-*/")
    print(f"  status:            {_command()} local status{option}")
    print(f"  stop:              {_command()} local down{option}")


def cmd_up(args: argparse.Namespace) -> int:
    data_dir: Path = args.data_dir
    if args.brokers < 1:
        return _error(f"--brokers {args.brokers}: a cluster needs at least one broker")
    try:
        properties = parse_properties(args.config)
    except ValueError as error:
        return _error(str(error))

    state = load_state(data_dir)
    if state is not None:
        if live_pids(state):
            if args.detach:
                print(f"A local cluster is already running in {data_dir}.")
                print_connection_info(state, data_dir)
                print("To start it with other settings, run 'gregor local down' first.")
                return 0
            return _error(
                f"a local cluster is already running in {data_dir}: stop it with "
                f"'{_command()} local down{_data_dir_option(data_dir)}' or use another --data-dir"
            )
        state_path(data_dir).unlink(missing_ok=True)  # left by a cluster that died

    ports = [] if args.port == 0 else [args.port + i for i in range(args.brokers)]
    if args.metrics_port > 0:
        ports += [args.metrics_port + i for i in range(args.brokers)]
    if args.zookeeper is None and args.zookeeper_port != 0:
        ports.append(args.zookeeper_port)
    busy = [port for port in ports if port_in_use(port)]
    if busy:
        return _error(
            f"port {', '.join(map(str, busy))} already in use on 127.0.0.1: stop what uses "
            "it, or pick other ports with --port / --metrics-port / --zookeeper-port "
            "(0 picks free ports)"
        )

    data_dir.mkdir(parents=True, exist_ok=True)
    cluster = LocalCluster(
        data_dir.resolve(),
        args.brokers,
        racks=parse_racks(args.racks),
        base_port=args.port,
        zookeeper_port=args.zookeeper_port,
        zookeeper_connect=args.zookeeper,
        properties=properties,
        metrics_base_port=None if args.metrics_port < 0 else args.metrics_port,
    )
    print(
        f"Starting ZooKeeper and {args.brokers} broker(s) in {data_dir} ...",
        file=sys.stderr,
        flush=True,
    )
    try:
        cluster.start(timeout=args.timeout)
    except (BrokerStartError, ZooKeeperNotInstalled, TimeoutError, RuntimeError) as error:
        return _error(f"could not start the cluster: {error}")

    state = cluster.state()
    state["detached"] = args.detach
    state["supervisor_pid"] = None if args.detach else os.getpid()
    save_state(data_dir, state)
    print_connection_info(state, data_dir)
    if args.detach:
        return 0
    return supervise(cluster, data_dir)


class _Stop(Exception):
    pass


def supervise(cluster: LocalCluster, data_dir: Path) -> int:
    """Foreground mode: wait for Ctrl-C/SIGTERM, report brokers that exit, then stop all."""

    def on_signal(signum: int, _frame: object) -> None:
        raise _Stop(signal.Signals(signum).name)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    print("Press Ctrl-C to stop.", flush=True)
    reported: set[int] = set()
    try:
        while True:
            time.sleep(0.5)
            for broker in cluster.brokers:
                if broker.process is None or broker.broker_id in reported:
                    continue
                code = broker.process.poll()
                if code is not None:
                    reported.add(broker.broker_id)
                    print(
                        f"broker {broker.broker_id} exited with code {code}; see {broker.log_path}",
                        file=sys.stderr,
                        flush=True,
                    )
            zookeeper = cluster.zookeeper
            zookeeper_gone = zookeeper is not None and (
                zookeeper.process is None or zookeeper.process.poll() is not None
            )
            if len(reported) == len(cluster.brokers) or zookeeper_gone:
                print("The cluster has stopped.", file=sys.stderr, flush=True)
                break
    except _Stop:
        pass
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print("Stopping brokers and ZooKeeper ...", file=sys.stderr, flush=True)
        cluster.stop()
        state_path(data_dir).unlink(missing_ok=True)
        print("Stopped.", file=sys.stderr, flush=True)
    return 0


# --- status ---------------------------------------------------------------------------


def _no_cluster(data_dir: Path) -> str:
    return (
        f"No local cluster in {data_dir} (no {STATE_FILE}). "
        f"Start one with: {_command()} local up{_data_dir_option(data_dir)}"
    )


def cmd_status(args: argparse.Namespace) -> int:
    data_dir: Path = args.data_dir
    state = load_state(data_dir)
    if state is None:
        print(_no_cluster(data_dir))
        return 1
    healthy = True
    zookeeper = state["zookeeper"]
    rows = []
    if zookeeper.get("pid"):
        running = pid_matches(zookeeper["pid"], *zookeeper_markers(zookeeper))
        serving = False
        if running:
            with contextlib.suppress(OSError):
                serving = "Mode:" in four_letter_word(zookeeper["port"], "srvr")
        healthy &= serving
        condition = "serving" if serving else ("running" if running else "stopped")
        rows.append(("ZooKeeper", zookeeper["connect"], "", f"pid {zookeeper['pid']}", condition))
    else:
        rows.append(("ZooKeeper", zookeeper["connect"], "", "external", ""))

    registered: dict[int, dict[str, Any]] | None = None
    try:
        client = zookeeper_client(zookeeper["connect"], timeout=3)
    except Exception:
        healthy = False
    else:
        try:
            registered = registered_brokers(client)
        finally:
            client.stop()
            client.close()

    for broker in state["brokers"]:
        running = bool(broker.get("pid")) and pid_matches(broker["pid"], *broker_markers(broker))
        if registered is None:
            registration = "registration unknown (ZooKeeper unreachable)"
        elif broker["id"] in registered:
            registration = "registered"
        else:
            registration = "not registered"
        healthy &= running and registration == "registered"
        rows.append(
            (
                f"broker {broker['id']}",
                f"{broker['host']}:{broker['port']}",
                f"rack {broker['rack']}" if broker.get("rack") else "no rack",
                f"pid {broker['pid']}",
                f"{'running' if running else 'stopped'}, {registration}",
            )
        )

    print(f"Local Gregor cluster in {data_dir}")
    widths = [max(len(row[column]) for row in rows) for column in range(4)]
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        print("  " + "  ".join([*cells, row[4]]).rstrip())
    print(f"Bootstrap servers: {state['bootstrap_servers']}")
    if not healthy:
        print(
            "Not everything is up: see the logs under "
            f"{data_dir}, or restart with 'gregor local down' then 'gregor local up'."
        )
    return 0 if healthy else 1


# --- down -----------------------------------------------------------------------------


def cmd_down(args: argparse.Namespace) -> int:
    data_dir: Path = args.data_dir
    state = load_state(data_dir)
    if state is None:
        print(f"No local cluster running in {data_dir}.")
        return 0
    broker_pids = {broker["id"]: broker.get("pid") for broker in state["brokers"]}
    killed = terminate_pids(
        [(broker["pid"], broker_markers(broker)) for broker in state["brokers"] if broker["pid"]],
        args.timeout,
    )
    for broker_id, pid in broker_pids.items():
        how = "killed (SIGKILL after timeout)" if pid in killed else "stopped"
        print(f"broker {broker_id} (pid {pid}) {how}")
    zookeeper_pid = state["zookeeper"].get("pid")
    if zookeeper_pid:
        terminate_pids([(zookeeper_pid, zookeeper_markers(state["zookeeper"]))], timeout=10)
        print(f"ZooKeeper (pid {zookeeper_pid}) stopped")
    supervisor = state.get("supervisor_pid")
    if supervisor:
        # A foreground 'gregor local up' notices its brokers are gone and exits by itself.
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and pid_matches(supervisor, "gregor"):
            time.sleep(0.1)
    state_path(data_dir).unlink(missing_ok=True)
    print(f"Data kept in {data_dir}; delete it to start from scratch.")
    return 0
