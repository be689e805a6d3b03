"""Produce-and-consume round trips and failed logins with each real client library.

Each function takes a bootstrap address and the client's security settings in Kafka's
names (``security.protocol``, ``sasl.mechanism``, ``sasl.username``/``password``, PEM
file paths for TLS) and translates them into the client's own options.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

import confluent_kafka
import kafka
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.helpers import create_ssl_context

KCAT = shutil.which("kcat")
TIMEOUT = 60
MESSAGES = 20


@dataclass(frozen=True)
class Security:
    protocol: str = "PLAINTEXT"
    mechanism: str | None = None
    username: str | None = None
    password: str | None = None
    ca: str | None = None  # PEM file of the CA that signed the broker's certificate
    cert: str | None = None  # client certificate and key (mTLS)
    key: str | None = None
    extra: dict[str, str] = field(default_factory=dict)

    def librdkafka(self) -> dict[str, str]:
        config = {"security.protocol": self.protocol}
        if self.mechanism:
            config |= {
                "sasl.mechanism": self.mechanism,
                "sasl.username": self.username or "",
                "sasl.password": self.password or "",
            }
        if self.ca:
            config["ssl.ca.location"] = self.ca
        if self.cert:
            config |= {"ssl.certificate.location": self.cert, "ssl.key.location": self.key or ""}
        return config | self.extra

    def kafka_python(self) -> dict[str, object]:
        config: dict[str, object] = {"security_protocol": self.protocol}
        if self.mechanism:
            config |= {
                "sasl_mechanism": self.mechanism,
                "sasl_plain_username": self.username,
                "sasl_plain_password": self.password,
            }
        if self.ca:
            config |= {"ssl_cafile": self.ca, "ssl_check_hostname": True}
        if self.cert:
            config |= {"ssl_certfile": self.cert, "ssl_keyfile": self.key}
        return config

    def aiokafka(self) -> dict[str, object]:
        config: dict[str, object] = {"security_protocol": self.protocol}
        if self.mechanism:
            config |= {
                "sasl_mechanism": self.mechanism,
                "sasl_plain_username": self.username,
                "sasl_plain_password": self.password,
            }
        if self.protocol.endswith("SSL"):
            config["ssl_context"] = create_ssl_context(
                cafile=self.ca, certfile=self.cert, keyfile=self.key
            )
        return config


def _values(client: str) -> list[bytes]:
    tag = uuid.uuid4().hex[:8]
    return [f"{client}-{tag}-{i}".encode() for i in range(MESSAGES)]


def round_trip_confluent(bootstrap: str, security: Security, topic: str) -> list[bytes]:
    values = _values("confluent")
    common = {"bootstrap.servers": bootstrap, **security.librdkafka()}
    producer = confluent_kafka.Producer({**common, "acks": "all", "message.timeout.ms": 30000})
    for value in values:
        producer.produce(topic, value)
    assert producer.flush(TIMEOUT) == 0
    consumer = confluent_kafka.Consumer(
        {**common, "group.id": f"g-{uuid.uuid4().hex}", "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT
    try:
        while time.monotonic() < deadline and not set(values) <= set(got):
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got.append(message.value())
    finally:
        consumer.close()
    return [v for v in got if v in values]


def login_error_confluent(bootstrap: str, security: Security) -> confluent_kafka.KafkaError:
    errors: list[confluent_kafka.KafkaError] = []
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, **security.librdkafka(), "error_cb": errors.append}
    )
    deadline = time.monotonic() + TIMEOUT
    while not errors and time.monotonic() < deadline:
        producer.poll(0.2)
    assert errors, "no error reported"
    return errors[0]


def round_trip_kafka_python(bootstrap: str, security: Security, topic: str) -> list[bytes]:
    values = _values("kafka-python")
    producer = kafka.KafkaProducer(
        bootstrap_servers=bootstrap, acks="all", **security.kafka_python()
    )
    for value in values:
        producer.send(topic, value)
    producer.flush(TIMEOUT)
    producer.close()
    consumer = kafka.KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=f"g-{uuid.uuid4().hex}",
        auto_offset_reset="earliest",
        consumer_timeout_ms=TIMEOUT * 1000,
        **security.kafka_python(),
    )
    got = []
    try:
        for message in consumer:
            got.append(message.value)
            if set(values) <= set(got):
                break
    finally:
        consumer.close()
    return [v for v in got if v in values]


class _Captured(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@contextlib.contextmanager
def _logs(name: str) -> Iterator[_Captured]:
    """What a client library logs: kafka-python and aiokafka retry a failed login until
    their bootstrap times out, and report the broker's error only in their logs."""
    captured = _Captured()
    logger = logging.getLogger(name)
    level = logger.level
    logger.addHandler(captured)
    logger.setLevel(logging.DEBUG)
    try:
        yield captured
    finally:
        logger.removeHandler(captured)
        logger.setLevel(level)


def login_error_kafka_python(bootstrap: str, security: Security) -> tuple[Exception, str]:
    with _logs("kafka") as captured:
        try:
            # 10 s, not its 30 s default: the broker's refusal comes on the first try.
            kafka.KafkaProducer(
                bootstrap_servers=bootstrap, bootstrap_timeout_ms=10_000, **security.kafka_python()
            ).close()
        except Exception as error:
            return error, "\n".join(captured.lines)
    raise AssertionError("kafka-python logged in with a wrong password")


def round_trip_aiokafka(bootstrap: str, security: Security, topic: str) -> list[bytes]:
    values = _values("aiokafka")

    async def run() -> list[bytes]:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", **security.aiokafka())
        await producer.start()
        try:
            for value in values:
                await producer.send_and_wait(topic, value)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id=f"g-{uuid.uuid4().hex}",
            auto_offset_reset="earliest",
            **security.aiokafka(),
        )
        await consumer.start()
        got: list[bytes] = []
        try:
            async with asyncio.timeout(TIMEOUT):
                async for message in consumer:
                    got.append(message.value)
                    if set(values) <= set(got):
                        break
        finally:
            await consumer.stop()
        return [v for v in got if v in values]

    return asyncio.run(run())


def login_error_aiokafka(bootstrap: str, security: Security) -> tuple[Exception, str]:
    async def run() -> Exception:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, **security.aiokafka())
        try:
            await producer.start()
        except Exception as error:
            return error
        finally:
            await producer.stop()
        raise AssertionError("aiokafka logged in with a wrong password")

    with _logs("aiokafka") as captured:
        error = asyncio.run(run())
    return error, "\n".join(captured.lines)


def _kcat_options(security: Security) -> list[str]:
    options = []
    for key, value in security.librdkafka().items():
        options += ["-X", f"{key}={value}"]
    return options


def round_trip_kcat(bootstrap: str, security: Security, topic: str) -> list[bytes]:
    assert KCAT is not None
    values = _values("kcat")
    common = [KCAT, "-b", bootstrap, *_kcat_options(security)]
    produced = subprocess.run(
        [*common, "-P", "-t", topic, "-X", "message.timeout.ms=30000"],
        input=b"\n".join(values) + b"\n",
        capture_output=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert produced.returncode == 0, produced.stderr.decode()
    consumed = subprocess.run(
        [*common, "-C", "-t", topic, "-o", "beginning", "-e", "-q"],
        capture_output=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert consumed.returncode == 0, consumed.stderr.decode()
    return [v for v in consumed.stdout.split(b"\n") if v in values]


def login_error_kcat(bootstrap: str, security: Security) -> str:
    assert KCAT is not None
    result = subprocess.run(
        [KCAT, "-b", bootstrap, *_kcat_options(security), "-L", "-m", "8"],
        capture_output=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert result.returncode != 0, "kcat logged in with a wrong password"
    return result.stderr.decode()
