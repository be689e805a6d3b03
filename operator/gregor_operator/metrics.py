"""The operator's Prometheus metrics and its HTTP endpoint (``/metrics``, ``/healthz``).

``/healthz`` answers 200 while the operator's event loop serves requests (it runs on it);
Kubernetes restarts the operator when it stops answering.
"""

from __future__ import annotations

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, Counter, Gauge, generate_latest

PLANS = Counter(
    "gregor_operator_plans_total", "Plans applied or refused, by resource kind", ["kind", "outcome"]
)
RECONCILE_ERRORS = Counter(
    "gregor_operator_reconcile_errors_total", "Reconcile steps that failed and will retry", ["kind"]
)
CLUSTER_BROKERS = Gauge(
    "gregor_operator_cluster_brokers", "Registered brokers per GregorCluster", ["cluster"]
)


async def serve(port: int, host: str = "0.0.0.0") -> web.AppRunner:
    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def metrics(_: web.Request) -> web.Response:
        return web.Response(body=generate_latest(), headers={"Content-Type": CONTENT_TYPE_LATEST})

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/metrics", metrics)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner
