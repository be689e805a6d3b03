"""Client quotas: which quota applies to a request, how fast a client goes, how long to wait.

Kafka's client quotas (seed 000, "配额"), per broker:

- ``producer_byte_rate`` (produce request bytes per second), ``consumer_byte_rate`` (fetch
  response bytes per second, sendfile bytes included) and ``request_percentage`` (time
  spent handling the group's requests, as a percentage of one thread per second);
- configured on ``/config/users/<u>``, ``/config/clients/<c>`` and
  ``/config/users/<u>/clients/<c>``, with ``<default>`` entities, resolved with Kafka's
  eight-level precedence (``QuotaConfigs.resolve``), independently for each quota;
- measured over ``quota.window.num`` samples of ``quota.window.size.seconds``
  (``SampledRate``, Kafka's ``Rate`` over a ``SampledStat``);
- a client over its quota is not refused: it is told to wait
  ``(observed - quota) / quota * window`` (``throttle_time_ms``).

This module owns that arithmetic and the per-group state (``ClientQuotaManager``) and
decides the throttle of each request (``ClientQuotaManager.enforce``). It does no I/O:
the request router delays the response and the connection stops reading meanwhile, and
the ZooKeeper watcher feeds it configs.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from ..cluster.client_quotas import (
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    QUOTA_KEYS,
    REQUEST_PERCENTAGE,
    Entity,
    parse_entity_path,
)
from ..cluster.zk_paths import DEFAULT_ENTITY
from ..protocol.response import FetchResult, Response
from ..stats import SampledRate, throttle_time_ms

# The principal of every client until authentication exists (Kafka's unauthenticated user).
ANONYMOUS = "ANONYMOUS"

PRODUCE_KEY = 0
FETCH_KEY = 1
# Requests the request quota never throttles (Kafka exempts ApiVersions: a client must be
# able to learn what it may send).
REQUEST_QUOTA_EXEMPT = frozenset({18})

Tags = tuple[str, str]  # (user, client-id) of the group that shares one quota; "" = any


# -- resolution ----------------------------------------------------------------------------


class QuotaConfigs:
    """The configured quota entities, and Kafka's precedence between them."""

    def __init__(self, entities: Mapping[Entity, Mapping[str, float]] | None = None) -> None:
        self.entities: dict[Entity, dict[str, float]] = {
            entity: dict(values) for entity, values in (entities or {}).items() if values
        }

    @classmethod
    def from_entity_configs(cls, configs: Mapping[str, Mapping[str, str]]) -> QuotaConfigs:
        """From ``{"users/alice/clients/bulk": {"producer_byte_rate": "1048576"}}``
        (ZooKeeper's strings); unreadable paths and values are skipped."""
        entities: dict[Entity, dict[str, float]] = {}
        for path, config in configs.items():
            try:
                entity = parse_entity_path(path)
            except ValueError:
                continue
            values = {}
            for key in QUOTA_KEYS:
                try:
                    value = float(config[key])
                except (KeyError, ValueError):
                    continue
                if value > 0 and math.isfinite(value):
                    values[key] = value
            if values:
                entities[entity] = values
        return cls(entities)

    def __bool__(self) -> bool:
        return bool(self.entities)

    def resolve(self, user: str, client_id: str, key: str) -> tuple[Tags, float] | None:
        """The quota ``key`` for a client and the tags of the group that shares it.

        Matches Kafka's precedence (most specific first):
        1. /config/users/<user>/clients/<client-id>
        2. /config/users/<user>/clients/<default>
        3. /config/users/<user>
        4. /config/users/<default>/clients/<client-id>
        5. /config/users/<default>/clients/<default>
        6. /config/users/<default>
        7. /config/clients/<client-id>
        8. /config/clients/<default>
        and Kafka's grouping: a ``<default>`` quota is per user (or client id), not shared
        by everyone; a user quota is shared by all that user's client ids.
        """
        default = DEFAULT_ENTITY
        entities = self.entities
        for entity, tags in (
            ((user, client_id), (user, client_id)),
            ((user, default), (user, client_id)),
            ((user, None), (user, "")),
            ((default, client_id), (user, client_id)),
            ((default, default), (user, client_id)),
            ((default, None), (user, "")),
            ((None, client_id), ("", client_id)),
            ((None, default), ("", client_id)),
        ):
            values = entities.get(entity)
            if values is not None:
                value = values.get(key)
                if value is not None:
                    return tags, value
        return None


class QuotaSensor:
    """One group's usage of one quota (Kafka's quota sensor for a set of metric tags)."""

    __slots__ = ("bound", "key", "rate", "tags", "throttle_ms_total", "throttled_total")

    def __init__(self, key: str, tags: Tags, bound: float, rate: SampledRate) -> None:
        self.key = key
        self.tags = tags
        self.bound = bound
        self.rate = rate
        self.throttle_ms_total = 0
        self.throttled_total = 0

    def record(self, value: float, now: float, max_throttle_ms: int) -> int:
        """Record usage; the throttle time in ms (0 while within the quota)."""
        rate = self.rate
        rate.record(value, now)
        observed = rate.measure(now)
        if observed <= self.bound:
            return 0
        throttle = min(
            throttle_time_ms(observed, self.bound, rate.window_size(now)), max_throttle_ms
        )
        return throttle

    def count_throttle(self, throttle_ms: int) -> None:
        self.throttle_ms_total += throttle_ms
        self.throttled_total += 1


# -- the broker's quota state --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ClientSensors:
    """The sensors one (user, client id) records into; None where no quota applies."""

    produce: QuotaSensor | None
    fetch: QuotaSensor | None
    request: QuotaSensor | None


_NO_SENSORS = ClientSensors(None, None, None)


class ClientQuotaManager:
    """Quota state of one broker: configs, sensors per group, and throttle decisions.

    ``update`` replaces the configs (from ``/config/changes``); sensors keep their history
    across updates, so a raised quota applies to the rate already measured. Nothing here
    costs anything while no quota is configured (``active`` is False).
    """

    def __init__(
        self,
        samples: int = 11,
        window_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.samples = max(samples, 1)
        self.window_s = float(window_s)
        self.clock = clock
        self.configs = QuotaConfigs()
        self.active = False
        self.sensors: dict[tuple[str, str, str], QuotaSensor] = {}
        self._by_client: dict[tuple[str, str], ClientSensors] = {}
        # Kafka bounds request-quota throttles by one window. It does not bound bandwidth
        # throttles (new clients back off themselves, KIP-219); Gregor delays the response
        # instead, so it keeps the delay within the whole quota window, well inside client
        # request timeouts (30 s by default).
        self.max_request_throttle_ms = round(self.window_s * 1000)
        self.max_bandwidth_throttle_ms = round(self.samples * self.window_s * 1000)

    def update(self, configs: QuotaConfigs) -> None:
        self.configs = configs
        self.active = bool(configs)
        self._by_client = {}

    def sensors_for(self, user: str, client_id: str) -> ClientSensors:
        found = self._by_client.get((user, client_id))
        if found is None:
            if self.active:
                found = ClientSensors(
                    self._sensor(user, client_id, PRODUCER_BYTE_RATE),
                    self._sensor(user, client_id, CONSUMER_BYTE_RATE),
                    self._sensor(user, client_id, REQUEST_PERCENTAGE),
                )
            else:
                found = _NO_SENSORS
            self._by_client[(user, client_id)] = found
        return found

    def _sensor(self, user: str, client_id: str, key: str) -> QuotaSensor | None:
        resolved = self.configs.resolve(user, client_id, key)
        if resolved is None:
            return None
        tags, bound = resolved
        sensor = self.sensors.get((key, *tags))
        if sensor is None:
            rate = SampledRate(self.samples, self.window_s, self.clock())
            sensor = self.sensors[(key, *tags)] = QuotaSensor(key, tags, bound, rate)
        else:
            sensor.bound = bound
        return sensor

    def fetch_max_bytes(self, user: str, client_id: str, max_bytes: int) -> int:
        """Matches Kafka: a throttled consumer's fetch is bounded by what its quota allows
        over the quota window, so that one response cannot overshoot it by much."""
        sensor = self.sensors_for(user, client_id).fetch
        if sensor is None:
            return max_bytes
        return min(max_bytes, max(int(sensor.bound * (self.samples - 1) * self.window_s), 1))

    def enforce(
        self,
        api_key: int,
        client_id: str | None,
        request: Any,
        request_size: int,
        result: Response,
        handler_seconds: float,
    ) -> tuple[Response, int]:
        """Record one request and decide its throttle: ``(result, throttle_ms)``.

        ``result`` is the handler's response (a fetch's is a ``FetchResult``, with a
        ``size``); on a throttle it gets ``throttle_time``, and a fetch is replaced by
        its ``throttled(throttle_ms)``, an empty response, as Kafka does. Follower
        fetches (replica id >= 0) are replication, not client traffic: never throttled.
        """
        if api_key == FETCH_KEY and _replica_id(request) >= 0:
            return result, 0
        sensors = self.sensors_for(ANONYMOUS, client_id or "")
        if sensors is _NO_SENSORS:
            return result, 0
        now = self.clock()
        bandwidth_sensor = None
        bandwidth_ms = 0
        fetched = 0
        if api_key == PRODUCE_KEY and sensors.produce is not None:
            bandwidth_sensor = sensors.produce
            bandwidth_ms = bandwidth_sensor.record(
                request_size, now, self.max_bandwidth_throttle_ms
            )
        elif api_key == FETCH_KEY and sensors.fetch is not None:
            bandwidth_sensor = sensors.fetch
            fetched = cast(FetchResult, result).size
            bandwidth_ms = bandwidth_sensor.record(fetched, now, self.max_bandwidth_throttle_ms)
        request_ms = 0
        if sensors.request is not None and api_key not in REQUEST_QUOTA_EXEMPT:
            request_ms = sensors.request.record(
                handler_seconds * 100, now, self.max_request_throttle_ms
            )
            if request_ms:
                sensors.request.count_throttle(request_ms)
        if bandwidth_ms and bandwidth_sensor is not None:
            bandwidth_sensor.count_throttle(bandwidth_ms)
        throttle_ms = max(bandwidth_ms, request_ms)
        if not throttle_ms:
            return result, 0
        if api_key == FETCH_KEY:
            # Matches Kafka: a throttled fetch returns no records, and the bytes it would
            # have sent do not count against the quota.
            if sensors.fetch is not None and fetched:
                sensors.fetch.rate.record(-fetched, now)
            return cast(FetchResult, result).throttled(throttle_ms), throttle_ms
        result.throttle_time = throttle_ms
        return result, throttle_ms


def _replica_id(request: Any) -> int:
    replica_state = getattr(request, "replica_state", None)
    if replica_state is not None:
        return replica_state.replica_id
    return getattr(request, "replica_id", -1)
