"""Builds and runs one operator: a fresh kopf registry with Gregor's handlers, kopf's
settings, the login to the API server and the /healthz + /metrics endpoint.

Owns wiring, not behaviour (``handlers/``). ``run`` blocks until ``stop_flag`` is set or
the process is signalled; tests run it in a thread against the emulator.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

import kopf

from gregor_operator import metrics
from gregor_operator.handlers import clusters, quotas, rebalances, topics, users
from gregor_operator.handlers.common import (
    FINALIZER,
    Context,
    OperatorConfig,
    register_cluster_index,
)
from gregor_operator.periodic import Periodic
from gregor_operator.zookeeper import Sessions

log = logging.getLogger(__name__)


def build(config: OperatorConfig) -> tuple[kopf.OperatorRegistry, kopf.OperatorSettings, Context]:
    registry = kopf.OperatorRegistry()
    ctx = Context(config=config, sessions=Sessions(config.zookeeper_timeout))

    @kopf.on.login(registry=registry)
    def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
        if config.kube_server:
            return kopf.ConnectionInfo(server=config.kube_server, insecure=True)
        return kopf.login_with_service_account(**kwargs) or kopf.login_with_kubeconfig(**kwargs)

    periodic = Periodic()

    @kopf.on.startup(registry=registry)
    async def start_http(memo: Any, **_: Any) -> None:
        if config.http_port:
            memo.http = await metrics.serve(config.http_port)
        memo.periodic = periodic.start(config.status_interval)
        # The moment the periodic checks can run: start-up time before it is imports.
        log.info("operator started: periodic steps and checks scheduled")

    @kopf.on.cleanup(registry=registry)
    async def stop(memo: Any, **_: Any) -> None:
        await Periodic.stop(getattr(memo, "periodic", None))
        if getattr(memo, "http", None) is not None:
            await memo.http.cleanup()
        ctx.sessions.close()

    register_cluster_index(registry)
    topics.register(registry, ctx)
    quotas.register(registry, ctx)
    users.register(registry, ctx)
    clusters.register(registry, ctx, periodic)
    rebalances.register(registry, ctx, periodic)

    settings = kopf.OperatorSettings()
    settings.scanning.disabled = True  # the CRDs are installed with the chart
    settings.persistence.finalizer = FINALIZER
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix="gregor.dev")
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix="gregor.dev", key="last-handled-configuration"
    )
    settings.posting.level = logging.INFO  # kopf.info() events (plans applied) need INFO
    settings.watching.server_timeout = 60
    settings.queueing.error_delays = [1, 2, 5, 10]
    settings.execution.default_backoff = max(1.0, config.status_interval)
    settings.execution.max_workers = 20
    # A deleted resource keeps its finalizer until its status timer has exited. A timer
    # caught mid-run (a thread) is not "instantly" done, and kopf then looks again only
    # after ``cancellation_polling`` (60 s by default): deletions stalled for a minute.
    # Wait up to 2 s for the run to end (a refresh takes milliseconds), then poll each second.
    settings.background.instant_exit_timeout = 2.0
    settings.background.cancellation_polling = 1.0
    return registry, settings, ctx


def run(config: OperatorConfig, stop_flag: threading.Event | None = None) -> None:
    registry, settings, _ = build(config)
    asyncio.run(
        kopf.operator(
            registry=registry,
            settings=settings,
            standalone=True,
            clusterwide=not config.namespaces,
            namespaces=config.namespaces,
            stop_flag=stop_flag,
        )
    )
