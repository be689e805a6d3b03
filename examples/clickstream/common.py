"""What the clickstream jobs share: topic names, the event schema, a local SparkSession."""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession

PAGEVIEWS = "pageviews"
VIEWS_PER_MINUTE = "pageviews-per-minute"
VIEWS_GROUP = "clickstream-views"
PARTITIONS = 6
EVENT_DDL = "user string, url string, event_time timestamp"


def local_spark(app: str) -> SparkSession:
    """A local[2] session; on a real cluster use spark-submit and drop this."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    spark = (
        SparkSession.builder.master(os.environ.get("SPARK_MASTER", "local[2]"))
        .appName(app)
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        # Python workers connect back to the JVM within this time (default 15 s); a busy
        # 2-core machine can take longer to start one.
        .config("spark.python.authenticate.socketTimeout", "120s")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark
