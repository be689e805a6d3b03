"""Produce and consume over SASL_SSL next to PLAINTEXT (issue 17), in the same run on the
same broker.

One broker with two listeners: PLAINTEXT and SASL_SSL (SCRAM-SHA-512 login, TLS with a
throw-away certificate, ``devtools/certificates.py``). confluent-kafka produces ``mib`` MiB
of 1 KiB records (``linger.ms=5``, ``batch.size=64 KiB``, acks=1) to a fresh topic of
``partitions`` partitions, then a consumer reads them back from offset 0; each protocol in
turn, ``reps`` times, alternating the order so neither always runs on a warmer machine.
The ratios SASL_SSL / PLAINTEXT are the cost of encryption: a PLAINTEXT consumer is served
with ``sendfile(2)``, a TLS one from segment slices read and encrypted in the broker
(docs/security.md, "The cost of TLS"). The login happens before the clock starts.

Run: ``.venv/bin/python -m bench.security [--mib 128] [--reps 3]``; prints JSON with
medians, ranges and the load average. ``make bench`` has the same comparison as its
``security`` group (``python -m bench.security measure`` per measurement).
``tests/bench/test_security.py`` runs it small.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.alternating import alternate, ratio_spread, run_main, spread
from bench.clients import produce_when_room, wait_for_leaders

VALUE = 1024
PROTOCOLS = ("PLAINTEXT", "SASL_SSL")
USER, PASSWORD = "bench", "bench-secret"
MECHANISM = "SCRAM-SHA-512"


@dataclass
class SecureBroker:
    """One broker (its own ZooKeeper) with a PLAINTEXT and a SASL_SSL listener."""

    directory: Path

    def start(self) -> None:
        from gregor_broker.cluster.admin import ZkAdmin
        from gregor_broker.cluster.scram_credentials import alter_scram_credentials
        from gregor_broker.devtools.certificates import KEY_PASSWORD, make_certificates
        from gregor_broker.devtools.local_cluster import BrokerProcess, zookeeper_client
        from gregor_broker.devtools.zookeeper_server import ZooKeeperServer, free_port
        from gregor_broker.security.scram import credential_from_password

        self.certificates = make_certificates(self.directory / "certificates")
        self.zookeeper = ZooKeeperServer(self.directory / "zookeeper")
        self.zookeeper.start()
        connect = f"{self.zookeeper.connect_string}/gregor-bench"
        zk = zookeeper_client(connect)
        try:
            zk.ensure_path("/")
            alter_scram_credentials(
                ZkAdmin(zk), USER, {MECHANISM: credential_from_password(MECHANISM, PASSWORD)}
            )
        finally:
            zk.stop()
            zk.close()
        plain, secure = free_port(), free_port()
        listeners = f"PLAINTEXT://127.0.0.1:{plain},SASL_SSL://127.0.0.1:{secure}"
        self.broker = BrokerProcess(
            broker_id=1,
            directory=self.directory / "broker",
            zookeeper_connect=connect,
            port=plain,
            properties={
                "listeners": listeners,
                "advertised.listeners": listeners,
                "sasl.enabled.mechanisms": MECHANISM,
                "ssl.keystore.type": "PEM",
                "ssl.keystore.location": str(self.certificates.broker_keystore),
                "ssl.key.password": KEY_PASSWORD,
                "auto.create.topics.enable": "false",
                "log.segment.delete.delay.ms": "0",
            },
        )
        self.broker.start()
        self.broker.wait_registered(120)
        self.bootstrap = {"PLAINTEXT": f"127.0.0.1:{plain}", "SASL_SSL": f"127.0.0.1:{secure}"}

    def client_config(self, protocol: str) -> dict[str, str]:
        return client_config(protocol, str(self.certificates.ca))

    def stop(self) -> None:
        self.broker.stop()
        self.zookeeper.stop()

    def cpu_seconds(self) -> float:
        from bench.targets import process_cpu_seconds

        assert self.broker.pid is not None
        return process_cpu_seconds(self.broker.pid)

    def delete_topic(self, topic: str) -> None:
        import confluent_kafka.admin

        admin = confluent_kafka.admin.AdminClient(_common(self.bootstrap["PLAINTEXT"], {}))
        for future in admin.delete_topics([topic], operation_timeout=30).values():
            with contextlib.suppress(Exception):  # best effort: only frees space
                future.result(60)


def client_config(protocol: str, ca: str) -> dict[str, str]:
    if protocol == "PLAINTEXT":
        return {}
    return {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": MECHANISM,
        "sasl.username": USER,
        "sasl.password": PASSWORD,
        "ssl.ca.location": ca,
    }


def _common(bootstrap: str, security: dict[str, str]) -> dict[str, Any]:
    from gregor_broker.cli.kafka_api import librdkafka_log

    return {"bootstrap.servers": bootstrap, "logger": librdkafka_log, **security}


def produce_phase(
    bootstrap: str, security: dict[str, str], topic: str, *, mib: int, partitions: int
) -> dict[str, float]:
    """Create ``topic`` and produce ``mib`` MiB of 1 KiB records to it (acks=1)."""
    import confluent_kafka
    import confluent_kafka.admin

    common = _common(bootstrap, security)
    admin = confluent_kafka.admin.AdminClient(common)
    new = confluent_kafka.admin.NewTopic(topic, partitions, 1)
    for future in admin.create_topics([new]).values():
        future.result(60)
    producer = confluent_kafka.Producer(
        {**common, "linger.ms": 5, "batch.size": 64 * 1024, "acks": "1",
         "queue.buffering.max.kbytes": 512 * 1024}
    )  # fmt: skip
    wait_for_leaders(producer, topic, partitions)
    value = os.urandom(VALUE)
    count = mib * 1024
    started = time.perf_counter()
    for i in range(count):
        produce_when_room(producer, topic, value, partition=i % partitions)
    if producer.flush(300) != 0:
        raise RuntimeError("produce did not finish")
    return {"bytes": count * VALUE, "records": count, "seconds": time.perf_counter() - started}


def consume_phase(
    bootstrap: str, security: dict[str, str], topic: str, *, mib: int, partitions: int
) -> dict[str, float]:
    """Read the ``mib`` MiB ``produce_phase`` wrote, from offset 0 (the clock starts at the
    first record: the login and the first metadata are not timed)."""
    import confluent_kafka

    count = mib * 1024
    consumer = confluent_kafka.Consumer(
        {**_common(bootstrap, security), "group.id": "bench-security",
         "enable.auto.commit": False, "fetch.queue.backoff.ms": 1}
    )  # fmt: skip
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(partitions)])
        first = None
        deadline = time.monotonic() + 60
        while first is None and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                first = message
        if first is None:
            raise RuntimeError("the consumer received nothing")
        got, received = 1, len(first.value())
        started = time.perf_counter()
        deadline = time.monotonic() + 600
        while got < count and time.monotonic() < deadline:
            for message in consumer.consume(10_000, 0.5):
                if message.error() is None:
                    got += 1
                    received += len(message.value())
        seconds = time.perf_counter() - started
    finally:
        consumer.close()
    if got < count:
        raise RuntimeError(f"consumed {got} of {count} records")
    return {"bytes": received, "records": got, "seconds": seconds}


def measure(
    bootstrap: str, security: dict[str, str], topic: str, *, mib: int, partitions: int
) -> dict[str, float]:
    """Both phases on one new topic."""
    produced = produce_phase(bootstrap, security, topic, mib=mib, partitions=partitions)
    consumed = consume_phase(bootstrap, security, topic, mib=mib, partitions=partitions)
    return {
        "bytes": produced["bytes"],
        "records": produced["records"],
        "produce_seconds": produced["seconds"],
        "consume_seconds": consumed["seconds"],
        "consumed_bytes": consumed["bytes"],
    }


def run(work_dir: Path, *, mib: int = 128, partitions: int = 1, reps: int = 3) -> dict[str, Any]:
    broker = SecureBroker(work_dir)
    broker.start()
    try:

        def measure_protocol(plaintext: bool, rep: int) -> dict[str, float]:
            protocol = "PLAINTEXT" if plaintext else "SASL_SSL"
            result = measure(
                broker.bootstrap[protocol],
                broker.client_config(protocol),
                f"{protocol.lower()}-{rep}",
                mib=mib,
                partitions=partitions,
            )
            return {
                "produce": result["bytes"] / result["produce_seconds"] / 1e6,
                "consume": result["bytes"] / result["consume_seconds"] / 1e6,
            }

        plain, secure = alternate(reps, measure_protocol)
    finally:
        broker.stop()
    rates = {"PLAINTEXT": plain, "SASL_SSL": secure}
    return {
        "options": {"mib": mib, "partitions": partitions, "record_bytes": VALUE, "reps": reps},
        "load_average": os.getloadavg(),
        **{
            f"{phase}_mb_s": {p: spread([r[phase] for r in v]) for p, v in rates.items()}
            for phase in ("produce", "consume")
        },
        "sasl_ssl_vs_plaintext": {
            phase: ratio_spread([r[phase] for r in secure], [r[phase] for r in plain])
            for phase in ("produce", "consume")
        },
    }


def measure_main(argv: list[str]) -> int:
    """``measure``: one produce-and-consume measurement against a running broker (the
    harness's security group runs it in a process of its own); the last line is JSON."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.security measure",
        description="Produce then consume MiB of 1 KiB records on one listener; prints JSON.",
        epilog="example: python -m bench.security measure --bootstrap 127.0.0.1:9093 "
        "--protocol SASL_SSL --ca ca.pem --topic t1 --mib 64",
    )
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--protocol", choices=PROTOCOLS, default="PLAINTEXT")
    parser.add_argument("--ca", default="", help="CA file of the broker's certificate")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--mib", type=int, default=64)
    parser.add_argument("--partitions", type=int, default=1)
    parser.add_argument(
        "--phase", choices=("both", "produce", "consume"), default="both",
        help="produce to a new topic, consume what a produce phase wrote, or both",
    )  # fmt: skip
    args = parser.parse_args(argv)
    phase = {"both": measure, "produce": produce_phase, "consume": consume_phase}[args.phase]
    result = phase(
        args.bootstrap,
        client_config(args.protocol, args.ca),
        args.topic,
        mib=args.mib,
        partitions=args.partitions,
    )
    print(json.dumps(result))
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["measure"]:
        return measure_main(argv[1:])
    parser = argparse.ArgumentParser(
        description="Benchmark produce and consume over SASL_SSL against PLAINTEXT; prints JSON.",
        epilog="example: python -m bench.security --mib 128 --reps 3",
    )
    parser.add_argument("--mib", type=int, default=128, help="MiB produced per measurement")
    parser.add_argument("--partitions", type=int, default=1)
    return run_main(parser, argv, run)


if __name__ == "__main__":
    raise SystemExit(main())
