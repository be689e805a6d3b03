"""What request handlers, the request router and the metrics endpoint use of the broker.

``BrokerServices`` is a Protocol: ``server/broker.py`` (the composition root) satisfies it
structurally, and a handler depends on it, never on ``Broker``, so the handlers sit below
the broker in the layers and a test calls ``handle_produce(services, context, request)``
with a small object holding real components and no socket (as tansu's per-API services
run over its ``Storage`` trait). Each attribute is a component of a lower layer (metadata
cache, replica manager, coordinator) or of this one (topic admin, quotas, fetch
sessions); the router and the metrics server, which sit above, appear through the
narrow views below.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, Protocol

from kazoo.client import KazooClient

from ..cluster.admin import ZkAdmin
from ..cluster.controller import Controller
from ..cluster.metadata_cache import MetadataCache
from ..config import BrokerConfig
from ..coordinator.service import CoordinatorService
from ..log.log_cleaner import LogCleaner
from ..log.log_manager import LogManager
from ..protocol.preparation import Preparer
from ..replication.replica_manager import ReplicaManager
from ..stats import LatencyHistogram
from .authorizer import Authorizer
from .connection import Connection, SendfileCounter
from .fetch_sessions import FetchSessionCache
from .quotas import ClientQuotaManager
from .topic_admin import TopicAdmin


class ServedApis(Protocol):
    """The request router as handlers and metrics see it: what is served and counted."""

    apis: Mapping[int, Any]
    requests_total: dict[int, int]
    latency: dict[int, LatencyHistogram]

    # Runs rare expensive work (a version's first use, a huge group id's hash) off the
    # event loop.
    preparer: Preparer

    def advertised(self) -> list[dict[str, int]]: ...


class EventLoopLag(Protocol):
    """The metrics server's event-loop lag samples (a gauge and a histogram)."""

    loop_lag_s: float
    loop_lag: LatencyHistogram


class BrokerServices(Protocol):
    """The broker's components, as the serving layer uses them."""

    config: BrokerConfig
    metadata: MetadataCache
    replica_manager: ReplicaManager
    logs: LogManager
    log_cleaner: LogCleaner
    coordinator: CoordinatorService
    topic_admin: TopicAdmin
    quotas: ClientQuotaManager
    authorizer: Authorizer
    fetch_sessions: FetchSessionCache
    zk: KazooClient | None
    zk_admin: ZkAdmin
    controller: Controller | None
    router: ServedApis
    metrics_server: EventLoopLag | None
    sendfile: SendfileCounter
    connections: set[Connection]
    started: asyncio.Event
    stopping: bool

    @property
    def broker_id(self) -> int: ...
