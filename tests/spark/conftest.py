"""A real local SparkSession (``local[2]``), one per pytest worker, for the Spark tests.

The session is created the way docs/spark.md tells users to: nothing registers the data
source, Spark finds ``pyspark_gregor`` by itself. Python workers run this venv's interpreter
(``PYSPARK_PYTHON``) so that they import gregor_spark, pyarrow and confluent-kafka.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator

import pytest

from gregor_broker.devtools.local_cluster import BrokerProcess
from tests.integration.group_helpers import GROUP_BROKER_PROPERTIES

pyspark = pytest.importorskip(
    "pyspark", reason="PySpark is not installed: run 'make venv' (it installs gregor[spark])"
)
from pyspark.sql import SparkSession  # noqa: E402


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    warehouse = tmp_path_factory.mktemp("spark-warehouse")
    session = (
        SparkSession.builder.master("local[2]")
        .appName("gregor-spark-tests")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.warehouse.dir", str(warehouse))
        .config("spark.driver.memory", "1g")
        # Python workers connect back to the JVM within this time (default 15 s); a busy
        # 2-core machine can take longer to start one.
        .config("spark.python.authenticate.socketTimeout", "120s")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="module")
def spark_broker(
    zookeeper, tmp_path_factory: pytest.TempPathFactory, broker_launcher
) -> Iterator[BrokerProcess]:
    """One real broker shared by a test module (its tests use distinct topics), with fast
    consumer-group settings; a broker per test would cost more than the Spark jobs."""
    broker = BrokerProcess(
        broker_id=1,
        directory=tmp_path_factory.mktemp("spark-broker-"),
        zookeeper_connect=f"{zookeeper.connect_string}/gregor-{uuid.uuid4().hex[:12]}",
        port=0,
        rack=None,
        properties=dict(GROUP_BROKER_PROPERTIES),
        launcher=broker_launcher,
    )
    broker.start()
    try:
        broker.wait_registered(90.0)
        yield broker
    finally:
        broker.stop()
