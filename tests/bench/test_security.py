"""The SASL_SSL-against-PLAINTEXT benchmark, scaled down (``python -m bench.security``)."""

from __future__ import annotations

from pathlib import Path

from bench import security


def test_the_security_bench_measures_sasl_ssl_against_plaintext(tmp_path: Path) -> None:
    result = security.run(tmp_path, mib=2, reps=1)
    for kind in ("produce_mb_s", "consume_mb_s"):
        for protocol in security.PROTOCOLS:
            assert result[kind][protocol]["median"] > 0, (kind, protocol)
    assert result["sasl_ssl_vs_plaintext"]["consume"]["median"] > 0
    assert result["sasl_ssl_vs_plaintext"]["produce"]["median"] > 0


def test_a_sasl_ssl_client_without_the_password_cannot_measure(tmp_path: Path) -> None:
    """The SASL_SSL row really logs in: a wrong password gets no topic created."""
    import confluent_kafka
    import pytest

    broker = security.SecureBroker(tmp_path)
    broker.start()
    try:
        config = broker.client_config("SASL_SSL") | {"sasl.password": "wrong"}
        # The admin request never gets an answer: the login fails (librdkafka retries).
        with pytest.raises((confluent_kafka.KafkaException, TimeoutError)):
            security.measure(broker.bootstrap["SASL_SSL"], config, "t", mib=1, partitions=1)
    finally:
        broker.stop()
