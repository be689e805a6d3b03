"""Prometheus metrics and health endpoints over HTTP (``metrics.port``).

Counters live as plain integers on the objects that own them (the connection's
sendfile counter, the replica manager's byte counts) so the produce and fetch paths
pay one integer add; this collector reads them only when Prometheus scrapes.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING

from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from .server.broker import Broker

log = logging.getLogger(__name__)


class BrokerCollector(Collector):
    def __init__(self, broker: Broker) -> None:
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
        replicas = getattr(broker, "replicas", None)
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


class MetricsServer:
    def __init__(self, broker: Broker, port: int) -> None:
        self.broker = broker
        self.port = port
        self.registry = CollectorRegistry()
        self.registry.register(BrokerCollector(broker))
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/healthz", self._healthz)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, None, self.port).start()
        log.info("metrics and health on http://0.0.0.0:%d/metrics", self.port)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(
            body=generate_latest(self.registry),
            headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"},
        )

    async def _healthz(self, request: web.Request) -> web.Response:
        # Answering at all proves the event loop is responsive.
        return web.Response(text="ok\n")
