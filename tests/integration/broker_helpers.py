"""Small helpers the broker integration tests share: metrics scraping, raw sockets."""

from __future__ import annotations

import re
import socket
import struct
import urllib.request


def scrape(port: int) -> dict[str, float]:
    """Read a broker's /metrics into {sample name with labels: value}."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    samples = {}
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        name, value = line.rsplit(" ", 1)
        samples[name] = float(value)
    return samples


def api_versions_request(correlation_id: int = 1, version: int = 0) -> bytes:
    body = struct.pack(">hhih", 18, version, correlation_id, 4) + b"test"
    return struct.pack(">i", len(body)) + body


def recv_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("closed by the broker")
        data += chunk
    return data


def read_response(sock: socket.socket) -> bytes:
    (size,) = struct.unpack(">i", recv_exactly(sock, 4))
    return recv_exactly(sock, size)


def closed_by_peer(sock: socket.socket, timeout: float = 5.0) -> bool:
    """True when the broker closed (or reset) this connection within ``timeout``."""
    sock.settimeout(timeout)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def host_port(bootstrap: str) -> tuple[str, int]:
    match = re.fullmatch(r"(.+):(\d+)", bootstrap)
    assert match is not None
    return match.group(1), int(match.group(2))


def wait_for(predicate, timeout: float, interval: float = 0.2) -> bool:
    """Poll ``predicate`` until it holds or ``timeout`` seconds pass."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if predicate():
                return True
        except Exception:  # transient client errors while a cluster settles
            pass
        time.sleep(interval)
    try:
        return bool(predicate())
    except Exception:  # still failing at the deadline: the caller's assertion says what
        return False


def controller_id(client) -> int | None:
    """The broker ``/controller`` names, or None while there is none."""
    from gregor_broker.cluster.admin import ZkAdmin

    registration = ZkAdmin(client).get_controller()
    return None if registration is None else registration.broker_id


def registered_again(client, broker_id: int, czxid: int, timeout: float = 60) -> bool:
    """Until ``/brokers/ids/<broker_id>`` exists with a czxid other than ``czxid`` (the
    registration of a run that started since)."""
    from gregor_broker.cluster import zk_paths

    path = zk_paths.broker_path(broker_id)
    return wait_for(
        lambda: (stat := client.exists(path)) is not None and stat.czxid != czxid, timeout
    )


def every_broker_knows_the_others(
    brokers, timeout: float = 60, client_config: dict[str, str] | None = None
) -> bool:
    """Whether each of ``brokers`` (processes with a ``bootstrap``) lists all of them in its
    metadata, within ``timeout`` seconds. Started brokers have registered in ZooKeeper; a
    broker learns of the others through its watch a moment later, and until then it
    refuses a replica assignment that names them (INVALID_REPLICA_ASSIGNMENT, "names
    unknown brokers"). ``client_config``: librdkafka settings of the admin clients
    (security)."""
    import confluent_kafka.admin

    brokers = list(brokers)
    admins = [
        confluent_kafka.admin.AdminClient(
            {"bootstrap.servers": broker.bootstrap, **(client_config or {})}
        )
        for broker in brokers
    ]
    return wait_for(
        lambda: all(len(a.list_topics(timeout=10).brokers) == len(brokers) for a in admins),
        timeout,
    )


def create_topic(
    bootstrap: str,
    name: str,
    *,
    partitions: int = 1,
    replication_factor: int = 1,
    config: dict[str, str] | None = None,
    client_config: dict[str, str] | None = None,
) -> None:
    """``client_config``: librdkafka settings of the admin client (security)."""
    import confluent_kafka.admin

    admin = confluent_kafka.admin.AdminClient(
        {"bootstrap.servers": bootstrap, **(client_config or {})}
    )
    topic = confluent_kafka.admin.NewTopic(
        name, partitions, replication_factor, config=config or {}
    )
    for future in admin.create_topics([topic], operation_timeout=30).values():
        future.result(60)


def produce_values(bootstrap: str, topic: str, values: list[bytes], *, acks="all") -> list[int]:
    """Produce and return the offsets the broker acknowledged (fails on any error)."""
    import confluent_kafka

    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "acks": str(acks), "linger.ms": 2}
    )
    offsets: list[int] = []
    errors = []

    def delivered(error, message) -> None:
        if error is not None:
            errors.append(error)
        else:
            offsets.append(message.offset())

    for value in values:
        producer.produce(topic, value, on_delivery=delivered)
    assert producer.flush(60) == 0
    assert errors == [], errors
    return offsets


def consume_values(
    bootstrap: str, topic: str, count: int, *, partitions: int = 1, timeout: float = 60
) -> list[bytes]:
    """Read ``count`` values from offset 0 of every partition (assign, no group)."""
    import time

    import confluent_kafka

    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            "fetch.queue.backoff.ms": 1,
        }
    )
    consumer.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(partitions)])
    values: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while len(values) < count and time.monotonic() < deadline:
            for message in consumer.consume(10_000, 0.5):
                if message.error() is None:
                    values.append(message.value())
    finally:
        consumer.close()
    return values


def register_broker_znode(admin, broker_id: int) -> None:
    """A broker registration (``/brokers/ids/<id>``) with no broker behind it: what a
    controller under test sees as a live broker, on the session of ``admin``'s client."""
    from gregor_broker.cluster.models import BrokerRegistration

    port = 9000 + broker_id
    admin.register_broker(
        BrokerRegistration("127.0.0.1", port, (f"PLAINTEXT://127.0.0.1:{port}",)), broker_id
    )


def lose_connection_once(client, method: str, path: str, when=lambda: True) -> list[str]:
    """Make ``client.<method>(path, ...)`` raise kazoo's ConnectionLoss the first time it is
    called while ``when()`` holds, as ZooKeeper's client answers a call whose connection
    dropped; every other call goes through. Returns the list the lost path is appended
    to, so a test can check the loss happened."""
    from kazoo.exceptions import ConnectionLoss

    lost: list[str] = []
    real = getattr(client, method)

    def call(called_path, *args, **kwargs):
        if called_path == path and not lost and when():
            lost.append(called_path)
            raise ConnectionLoss()
        return real(called_path, *args, **kwargs)

    setattr(client, method, call)
    return lost
