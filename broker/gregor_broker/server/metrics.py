"""Prometheus metrics and health endpoints over HTTP (``metrics.port``).

Counters live as plain integers on the objects that own them (the connection's
sendfile counter, the replica manager's byte counts) so the produce and fetch paths
pay one integer add; this collector reads them only when Prometheus scrapes.
Gauges (purgatory sizes, under-replicated partitions, log sizes) are computed at scrape
time from the broker's state. The reference is docs/metrics.md.

Probes: ``/healthz`` (the process is alive and its event loop answers) and ``/readyz``
(registered in ZooKeeper with a live session, logs loaded, and no partition held under
``min.insync.replicas`` because this broker has not caught up).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from ..stats import LatencyHistogram
from .services import BrokerServices

log = logging.getLogger(__name__)

LOOP_LAG_INTERVAL_S = 0.5
# The lag histogram samples more often than the gauge: a stall shorter than the interval
# between samples is seen only when a sample falls inside it.
LOOP_LAG_SAMPLE_S = 0.05
LOOP_LAG_BUCKETS = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
)  # fmt: skip
ZOOKEEPER_CHECK_TIMEOUT_S = 2.0


class BrokerCollector(Collector):
    def __init__(self, broker: BrokerServices) -> None:
        self.broker = broker

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        broker = self.broker
        sendfile_bytes = CounterMetricFamily(
            "gregor_sendfile_bytes",
            "Record bytes sent from segment files to sockets with sendfile(2)",
        )
        sendfile_bytes.add_metric([], broker.sendfile.bytes_total)
        yield sendfile_bytes
        sendfile_calls = CounterMetricFamily(
            "gregor_sendfile_calls", "sendfile(2) system calls made by the fetch path"
        )
        sendfile_calls.add_metric([], broker.sendfile.calls_total)
        yield sendfile_calls
        tls_reads = getattr(broker, "tls_reads", None)
        if tls_reads is not None:
            tls_bytes = CounterMetricFamily(
                "gregor_tls_read_bytes",
                "Record bytes read from segment files and encrypted for TLS listeners",
            )
            tls_bytes.add_metric([], tls_reads.bytes_total)
            yield tls_bytes
        authentication = getattr(broker, "authentication_metrics", None)
        if authentication is not None:
            for name, counts, text in (
                ("gregor_successful_authentication", authentication.successful, "Successful"),
                ("gregor_failed_authentication", authentication.failed, "Failed"),
                (
                    "gregor_successful_reauthentication",
                    authentication.reauthenticated,
                    "Session-renewing (KIP-368)",
                ),
            ):
                family = CounterMetricFamily(
                    name,
                    f"{text} SASL logins, per listener and mechanism",
                    labels=["listener", "mechanism"],
                )
                for (listener, mechanism), count in sorted(counts.items()):
                    family.add_metric([listener, mechanism], count)
                yield family
        authorizer = getattr(broker, "authorizer", None)
        if authorizer is not None and authorizer.enabled:
            denials = CounterMetricFamily(
                "gregor_authorization_denials",
                "Requests (or parts of them) refused by the ACL authorizer, per resource type",
                labels=["resource_type"],
            )
            for resource_type, count in sorted(authorizer.denials.items()):
                denials.add_metric([resource_type], count)
            yield denials
        replicas = getattr(broker, "replica_manager", None)
        if replicas is not None:
            messages_in = CounterMetricFamily(
                "gregor_messages_in", "Records appended to logs this broker leads"
            )
            messages_in.add_metric([], replicas.messages_in_total)
            yield messages_in
            bytes_in = CounterMetricFamily(
                "gregor_bytes_in", "Record batch bytes appended to logs this broker leads"
            )
            bytes_in.add_metric([], replicas.bytes_in_total)
            yield bytes_in
            partitions = GaugeMetricFamily(
                "gregor_partitions", "Partitions with a log on this broker"
            )
            partitions.add_metric([], len(replicas.partitions))
            yield partitions
        requests = CounterMetricFamily(
            "gregor_requests", "Requests handled, per API", labels=["api"]
        )
        for api_key, count in sorted(broker.router.requests_total.items()):
            spec = broker.router.apis[api_key]
            requests.add_metric([spec.name], count)
        yield requests
        connections = GaugeMetricFamily("gregor_connections", "Open client connections")
        connections.add_metric([], len(broker.connections))
        yield connections
        controller = GaugeMetricFamily(
            "gregor_active_controller", "1 when this broker is the controller"
        )
        active = broker.controller is not None and broker.controller.active
        controller.add_metric([], 1 if active else 0)
        yield controller
        yield from self._request_latency()
        if replicas is not None:
            yield from self._topics(replicas)
            yield from self._partitions(replicas, active)
        yield from self._quotas()
        yield from self._fetch_sessions()
        yield from self._log_cleaner()
        lag = GaugeMetricFamily(
            "gregor_event_loop_lag_seconds",
            "How late the broker's event loop ran a timer, last check (every 0.5 s)",
        )
        lag.add_metric([], getattr(broker.metrics_server, "loop_lag_s", 0.0))
        yield lag
        histogram = getattr(broker.metrics_server, "loop_lag", None)
        if histogram is not None:
            delay = HistogramMetricFamily(
                "gregor_event_loop_delay_seconds",
                f"How late the event loop ran a timer, sampled every {LOOP_LAG_SAMPLE_S} s: "
                "what any request arriving then waited before the broker could look at it",
            )
            delay.add_metric([], histogram.buckets(), histogram.sum)
            yield delay

    def _request_latency(self) -> Iterator[HistogramMetricFamily]:
        router = self.broker.router
        latency = HistogramMetricFamily(
            "gregor_request_duration_seconds",
            "Time from decoding a request to its encoded response, per API (long polls "
            "and acks=all waits included, quota throttles not)",
            labels=["api"],
        )
        for api_key, histogram in sorted(router.latency.items()):
            if any(histogram.counts):
                latency.add_metric([router.apis[api_key].name], histogram.buckets(), histogram.sum)
        yield latency

    def _topics(self, replicas: Any) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        families = {
            "bytes_in": CounterMetricFamily(
                "gregor_topic_bytes_in",
                "Record batch bytes produced to the topic",
                labels=["topic"],
            ),
            "messages_in": CounterMetricFamily(
                "gregor_topic_messages_in", "Records produced to the topic", labels=["topic"]
            ),
            "bytes_out": CounterMetricFamily(
                "gregor_topic_bytes_out",
                "Record bytes sent to consumers from the topic (followers not included)",
                labels=["topic"],
            ),
        }
        for topic, counters in sorted(replicas.topic_counters.items()):
            for attribute, family in families.items():
                family.add_metric([topic], getattr(counters, attribute))
        yield from families.values()
        replication = CounterMetricFamily(
            "gregor_replication_bytes_out", "Record bytes sent to follower replicas"
        )
        replication.add_metric([], replicas.replication_bytes_out_total)
        yield replication
        follower_served = CounterMetricFamily(
            "gregor_fetch_from_follower_bytes",
            "Record bytes this broker served consumers as a follower (KIP-392, "
            "replica.selector.class)",
        )
        follower_served.add_metric([], replicas.follower_served_bytes_total)
        yield follower_served
        quota = replicas.leader_replication_quota
        throttled_bytes = CounterMetricFamily(
            "gregor_leader_replication_throttled_bytes",
            "Record bytes sent to followers for partitions under the leader replication "
            "throttle (leader.replication.throttled.replicas), in-sync followers included",
        )
        throttled_bytes.add_metric([], quota.bytes_total)
        yield throttled_bytes
        held_back = CounterMetricFamily(
            "gregor_leader_replication_held_back_partitions",
            "Partition reads answered without records because an out-of-sync follower "
            "was over leader.replication.throttled.rate",
        )
        held_back.add_metric([], quota.held_back_total)
        yield held_back
        throttled_rate = GaugeMetricFamily(
            "gregor_leader_replication_throttled_byte_rate",
            "Bytes/s sent to followers for leader-throttled partitions, over the quota "
            "window (what leader.replication.throttled.rate is compared with)",
        )
        throttled_rate.add_metric([], quota.observed())
        yield throttled_rate

    def _partitions(
        self, replicas: Any, active_controller: bool
    ) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        broker_id = self.broker.broker_id
        leaders = under_replicated = under_min_isr = 0
        log_size = GaugeMetricFamily(
            "gregor_log_size_bytes",
            "Bytes in a partition's log segments",
            labels=["topic", "partition"],
        )
        for (topic, index), partition in sorted(replicas.partitions.items()):
            log_size.add_metric([topic, str(index)], partition.log.size_bytes)
            if partition.is_leader(broker_id):
                leaders += 1
                if len(partition.isr) < len(partition.replicas):
                    under_replicated += 1
                if len(partition.isr) < partition.log.config.min_insync_replicas:
                    under_min_isr += 1
        yield log_size
        for name, doc, value in (
            ("gregor_leader_partitions", "Partitions this broker leads", leaders),
            (
                "gregor_under_replicated_partitions",
                "Partitions led here whose ISR is smaller than their replica set",
                under_replicated,
            ),
            (
                "gregor_under_min_isr_partitions",
                "Partitions led here with fewer in-sync replicas than min.insync.replicas",
                under_min_isr,
            ),
            (
                "gregor_offline_partitions",
                "Partitions without a live leader (reported by the active controller only, "
                "like Kafka's OfflinePartitionsCount)",
                _offline_partitions(self.broker.metadata) if active_controller else 0,
            ),
            (
                "gregor_produce_purgatory_size",
                "acks=all produce requests waiting for their in-sync replicas",
                replicas.produce_purgatory.pending(),
            ),
            (
                "gregor_fetch_purgatory_size",
                "Fetch requests (consumers and followers) long-polling for data",
                replicas.append_waiters.pending(),
            ),
        ):
            gauge = GaugeMetricFamily(name, doc)
            gauge.add_metric([], value)
            yield gauge
        yield from _unlabelled(
            (
                CounterMetricFamily,
                "gregor_isr_shrinks",
                "ISR shrinks of partitions led here",
                replicas.isr_shrinks_total,
            ),
            (
                CounterMetricFamily,
                "gregor_isr_expands",
                "ISR expands of partitions led here",
                replicas.isr_expands_total,
            ),
        )

    def _log_cleaner(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        return _log_cleaner_families(self.broker)

    def _fetch_sessions(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        """Kafka's NumIncrementalFetchSessions, NumIncrementalFetchPartitionsCached and
        IncrementalFetchSessionEvictionsPerSec, plus sessions created."""
        cache = self.broker.fetch_sessions
        yield from _unlabelled(
            (
                GaugeMetricFamily,
                "gregor_fetch_sessions",
                "Incremental fetch sessions (KIP-227) in the cache",
                len(cache),
            ),
            (
                GaugeMetricFamily,
                "gregor_fetch_session_partitions",
                "Partitions held by incremental fetch sessions, summed over the sessions",
                cache.partitions_total,
            ),
            (
                CounterMetricFamily,
                "gregor_fetch_sessions_created",
                "Incremental fetch sessions created",
                cache.created_total,
            ),
            (
                CounterMetricFamily,
                "gregor_fetch_session_evictions",
                "Incremental fetch sessions evicted to make room for new ones",
                cache.evictions_total,
            ),
        )

    def _quotas(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        quotas = getattr(self.broker, "quotas", None)
        labels = ["quota", "user", "client_id"]
        throttle = CounterMetricFamily(
            "gregor_client_quota_throttle_seconds",
            "Time responses were delayed for clients over a quota, per quota entity",
            labels=labels,
        )
        throttled = CounterMetricFamily(
            "gregor_client_quota_throttled_requests",
            "Requests delayed for clients over a quota, per quota entity",
            labels=labels,
        )
        observed = GaugeMetricFamily(
            "gregor_client_quota_observed",
            "Rate measured over the quota window: bytes/s for byte rates, percent of one "
            "thread for request_percentage",
            labels=labels,
        )
        limit = GaugeMetricFamily(
            "gregor_client_quota_limit", "The quota that applies to the entity", labels=labels
        )
        if quotas is not None:
            now = quotas.clock()
            for sensor in list(quotas.sensors.values()):
                values = [sensor.key, *sensor.tags]
                throttle.add_metric(values, sensor.throttle_ms_total / 1000)
                throttled.add_metric(values, sensor.throttled_total)
                observed.add_metric(values, sensor.rate.measure(now))
                limit.add_metric(values, sensor.bound)
        yield from (throttle, throttled, observed, limit)


def _log_cleaner_families(
    broker: BrokerServices,
) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
    cleaner = getattr(broker, "log_cleaner", None)
    if cleaner is None:
        return
    metrics = cleaner.metrics
    since = max(time.time() * 1000 - metrics.last_run_ms, 0)
    yield from _unlabelled(
        (GaugeMetricFamily, "gregor_log_cleaner_max_dirty_percent",
         "Dirty share of the dirtiest compacted log (Kafka's max-dirty-percent)",
         metrics.max_dirty_percent),
        (GaugeMetricFamily, "gregor_log_cleaner_recopy_percent",
         "Share of the bytes read that the last cleaning wrote again",
         metrics.recopy_percent),
        (GaugeMetricFamily, "gregor_log_cleaner_time_since_last_run_ms",
         "Milliseconds since a cleaner last looked at a log", since),
        (GaugeMetricFamily, "gregor_log_cleaner_uncleanable_partitions",
         "Partitions a pass failed on, left uncleaned (Kafka's uncleanable-partitions-count)",
         metrics.uncleanable_partitions),
        (GaugeMetricFamily, "gregor_log_cleaner_dead_threads",
         "Cleaner workers that died on an error (Kafka's DeadThreadCount)",
         metrics.dead_threads),
        (CounterMetricFamily, "gregor_log_cleaner_passes", "Cleaning passes completed",
         metrics.passes),
        (CounterMetricFamily, "gregor_log_cleaner_bytes_read", "Bytes the cleaners read",
         metrics.bytes_read),
        (CounterMetricFamily, "gregor_log_cleaner_bytes_written",
         "Bytes the cleaners wrote", metrics.bytes_written),
    )  # fmt: skip
    yield _dirty_ratios(cleaner)


def _dirty_ratios(cleaner: Any) -> GaugeMetricFamily:
    """The dirty ratio of every compacted log here, as the cleaner chooses by it: dirty
    bytes over the bytes up to the first uncleanable offset. Kafka exports only the
    maximum (``max-dirty-percent``); ``gregor topics describe`` shows each partition's
    from its leader's gauge, so no Kafka API has to carry it."""
    family = GaugeMetricFamily(
        "gregor_log_cleaner_dirty_ratio",
        "Dirty share of a compacted log (0-1): bytes not cleaned yet over the cleanable bytes",
        labels=["topic", "partition"],
    )
    for (topic, partition), log in sorted(cleaner.logs.logs().items()):
        if not log.config.compacted or log.is_deleted:
            continue
        try:
            ratio = cleaner.dirty_ratio(log)
        except (OSError, IndexError):  # a log closing or failing meanwhile: not exported
            continue
        family.add_metric([topic, str(partition)], ratio)
    return family


def _unlabelled(
    *specs: tuple[type[CounterMetricFamily] | type[GaugeMetricFamily], str, str, float],
) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
    """One family with a single unlabelled sample per ``(family, name, doc, value)``."""
    for family, name, doc, value in specs:
        metric = family(name, doc)
        metric.add_metric([], value)
        yield metric


def _offline_partitions(metadata: Any) -> int:
    live = metadata.brokers
    return sum(
        1
        for topic in metadata.topics.values()
        for info in topic.partitions.values()
        if info.leader < 0 or info.leader not in live
    )


class MetricsServer:
    def __init__(self, broker: BrokerServices, port: int) -> None:
        self.broker = broker
        self.port = port
        self.registry = CollectorRegistry()
        self.registry.register(BrokerCollector(broker))
        self._runner: web.AppRunner | None = None
        self._lag_task: asyncio.Task[None] | None = None
        self.loop_lag_s = 0.0
        self.loop_lag = LatencyHistogram(LOOP_LAG_BUCKETS)

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, None, self.port).start()
        log.info("metrics and health on http://0.0.0.0:%d/metrics", self.port)
        self._lag_task = asyncio.create_task(self._measure_loop_lag())

    async def stop(self) -> None:
        if self._lag_task is not None:
            self._lag_task.cancel()
        if self._runner is not None:
            await self._runner.cleanup()

    async def _measure_loop_lag(self) -> None:
        """Sleep a short while, again and again, and record how late each wake-up came:
        every sample goes to the histogram; the gauge keeps the worst of each 0.5 s."""
        worst = 0.0
        next_gauge = time.monotonic() + LOOP_LAG_INTERVAL_S
        while True:
            expected = time.monotonic() + LOOP_LAG_SAMPLE_S
            await asyncio.sleep(LOOP_LAG_SAMPLE_S)
            now = time.monotonic()
            lag = max(now - expected, 0.0)
            self.loop_lag.observe(lag)
            worst = max(worst, lag)
            if now >= next_gauge:
                self.loop_lag_s = worst
                worst = 0.0
                next_gauge = now + LOOP_LAG_INTERVAL_S

    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(
            body=generate_latest(self.registry),
            headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"},
        )

    async def _healthz(self, request: web.Request) -> web.Response:
        # Answering at all proves the event loop is responsive (a stuck loop answers
        # nothing, and the probe's timeout fails it).
        return web.Response(text=f"ok (event loop lag {self.loop_lag_s * 1000:.0f} ms)\n")

    async def _readyz(self, request: web.Request) -> web.Response:
        problems = await self.readiness_problems()
        if problems:
            return web.Response(status=503, text="".join(f"{p}\n" for p in problems))
        return web.Response(text="ready\n")

    async def readiness_problems(self) -> list[str]:
        """Why this broker should not get traffic yet; empty when it is ready."""
        broker = self.broker
        if broker.stopping:
            return ["shutting down"]
        if not broker.started.is_set():
            return ["starting: logs, metadata or registration not done yet"]
        zk = broker.zk
        if zk is None or not zk.connected:
            return ["ZooKeeper unreachable (session suspended or lost)"]
        path = f"/brokers/ids/{broker.broker_id}"
        try:
            async with asyncio.timeout(ZOOKEEPER_CHECK_TIMEOUT_S):
                stat = await asyncio.to_thread(zk.exists, path)
        except Exception as error:  # timeouts, connection loss
            return [f"ZooKeeper unreachable: {type(error).__name__} {error}".rstrip()]
        session_id = zk.client_id[0] if zk.client_id else None
        if stat is None or stat.ephemeralOwner != session_id:
            return [f"not registered at {path} under this broker's ZooKeeper session"]
        return self._caught_up_problems()

    def _caught_up_problems(self) -> list[str]:
        """Partitions under min.insync.replicas that this broker's catching up would fix:
        a rolling restart must not move on while this broker is still out of their ISR."""
        broker = self.broker
        problems = []
        for (topic, index), partition in sorted(broker.replica_manager.partitions.items()):
            isr = partition.isr
            if broker.broker_id in isr or partition.leader < 0:
                continue
            min_isr = partition.log.config.min_insync_replicas
            if len(isr) < min_isr:
                problems.append(
                    f"{topic}-{index}: ISR {list(isr)} is under min.insync.replicas={min_isr} "
                    f"and this broker is still catching up"
                )
        return problems
