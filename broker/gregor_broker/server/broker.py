"""The broker process: wires config, ZooKeeper, logs, metadata, controller and listener.

Start-up order matters and follows Kafka's: connect to ZooKeeper, claim the log dirs
(lock files) and recover the logs, learn the cluster's metadata, open the listener,
and only then register ``/brokers/ids/<id>`` so that nobody is sent to a broker that
cannot answer yet. Shutdown reverses it: deregister and wait for leadership to move
(controlled shutdown, unless ``controlled.shutdown.enable=false``), stop serving, flush
and close the logs with a clean-shutdown marker so the next start skips recovery.

A failed log dir (any I/O error writing to it, e.g. a full disk) takes its partitions
offline (``LogManager``, ``ReplicaManager``); the broker then tells the controller with a
``/log_dir_event_notification`` so their leadership moves to healthy replicas, and when
no log dir is left it shuts down (exit status 1), as Kafka does.
"""

from __future__ import annotations

import asyncio
import fcntl
import functools
import inspect
import logging
import os
import ssl
import threading
import time
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import ConnectionLoss, NoNodeError

from ..cluster.admin import ZOOKEEPER_CONNECTION_RETRY, ZkAdmin
from ..cluster.controller import Controller
from ..cluster.metadata_cache import MetadataCache, ZooKeeperMetadataWatcher
from ..cluster.models import BrokerRegistration
from ..cluster.scram_credentials import cached_credential
from ..cluster.zk_handler import PollingHandler
from ..config import BrokerConfig, log_config_for, log_configs_of
from ..coordinator.service import CoordinatorService
from ..log.log_cleaner import CleanerConfig, LogCleaner
from ..log.log_manager import LogManager
from ..log.validator import WALK
from ..replication.replica_manager import ReplicaManager
from ..replication.replication_config import ReplicationConfig
from ..security.client import ClientSecurity, inter_broker_security
from ..security.scram import ScramCredential
from ..security.tls import PrincipalMapper, server_context
from ..stats import AuthenticationMetrics
from ..tasks import cancel_and_wait
from .authentication import SaslAuthenticator, SaslListenerSettings
from .authorizer import Authorizer, build_authorizer
from .connection import Connection, SendfileCounter
from .fetch_sessions import FetchSessionCache
from .handlers import API_TABLE
from .metrics import MetricsServer
from .quotas import ClientQuotaManager, QuotaConfigs
from .request_router import RequestRouter
from .sliced_reconcile import SlicedReconcile
from .tls_connection import TlsConnection, TlsReadCounter
from .topic_admin import TopicAdmin

log = logging.getLogger(__name__)


CONTROLLED_SHUTDOWN_TIMEOUT_S = 30
# Reading which partitions ZooKeeper says a stopping broker leads: two pipelined rounds,
# well under a second for thousands of partitions; past this, the cache alone decides.
CONTROLLED_SHUTDOWN_READ_TIMEOUT_S = 10
# Re-registration after a ZooKeeper session loss: first retry after this, doubling up to
# the maximum (Kafka retries its registration until it succeeds, too).
REGISTRATION_RETRY_MIN_S = 0.5
REGISTRATION_RETRY_MAX_S = 5.0
UNSAFE_TRUNCATE_TO_HIGH_WATERMARK = "gregor.unsafe.truncate.to.high.watermark"


def replication_config_for(
    config: BrokerConfig, client_security: ClientSecurity | None = None
) -> ReplicationConfig:
    return ReplicationConfig(
        replica_lag_time_max_ms=config.replica_lag_time_max_ms,
        fetch_wait_max_ms=config.replica_fetch_wait_max_ms,
        fetch_min_bytes=config.replica_fetch_min_bytes,
        fetch_max_bytes=config.replica_fetch_max_bytes,
        fetch_response_max_bytes=config.replica_fetch_response_max_bytes,
        replica_selector=config.replica_selector_class,
        truncate_to_high_watermark=str(
            config.extra.get(UNSAFE_TRUNCATE_TO_HIGH_WATERMARK, "false")
        ).lower()
        == "true",
        inter_broker_listener=config.inter_broker_listener,
        client_security=client_security,
    )


class LogDirLocked(RuntimeError):
    pass


def _lock_log_dir(directory: Path) -> int:
    """Kafka's ``.lock``: one broker process per log dir."""
    directory.mkdir(parents=True, exist_ok=True)
    fd = os.open(directory / ".lock", os.O_CREAT | os.O_RDWR, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError as error:
        os.close(fd)
        raise LogDirLocked(
            f"log dir {directory} is in use by another broker process (its .lock is held)"
        ) from error
    return fd


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.metadata = MetadataCache()
        self.quotas = ClientQuotaManager(config.quota_window_num, config.quota_window_size_seconds)
        self._quota_configs_version = 0
        self.metadata.listeners.append(self._apply_quota_configs)
        self.router = RequestRouter(self, API_TABLE)
        self.fetch_sessions = FetchSessionCache(
            config.max_incremental_fetch_session_cache_slots,
            config.min_incremental_fetch_session_eviction_ms,
        )
        self.sendfile = SendfileCounter()
        self.connections: set[Connection] = set()
        self.authentication_metrics = AuthenticationMetrics()
        # authorizer.class.name: the ACL authorizer once ZooKeeper is up; until then (and
        # without the key) everything is allowed.
        self.authorizer: Authorizer = Authorizer()
        # Per listener: its SASL settings (None: no SASL), checked before anything starts.
        protocols = config.security_protocol_map
        self.sasl_settings: dict[str, SaslListenerSettings | None] = {
            name: (
                SaslListenerSettings.from_config(config, name)
                if protocols[name].startswith("SASL_")
                else None
            )
            for name, _, _ in config.listener_list
        }
        # Per TLS listener: its context and, on SSL, the certificate-to-principal mapper.
        self.tls_contexts: dict[str, ssl.SSLContext] = {}
        self.principal_mappers: dict[str, PrincipalMapper | None] = {}
        for name, _, _ in config.listener_list:
            if protocols[name] in ("SSL", "SASL_SSL"):
                self.tls_contexts[name] = server_context(config, name)
                self.principal_mappers[name] = (
                    PrincipalMapper(config.for_listener(name, "ssl.principal.mapping.rules"))
                    if protocols[name] == "SSL"
                    else None
                )
        self.tls_reads = TlsReadCounter()
        # How followers reach leaders (TLS context, SASL login); None for PLAINTEXT.
        self.inter_broker_security = inter_broker_security(config)
        self.zk: KazooClient | None = None
        self.servers: list[asyncio.base_events.Server] = []
        self.controller: Controller | None = None
        self.metrics_server: MetricsServer | None = None
        self._lock_fds: list[int] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._session_lost = False
        self._registration_lock = threading.Lock()
        self._registration_needed = False
        self._registration_thread: threading.Thread | None = None
        # Each listener's bound port (a configured port 0 binds a free one).
        self._bound_ports: dict[str, int] = {}
        self.started = asyncio.Event()
        self.stopping = False
        # Set when the broker must stop by itself (every log dir failed); the process
        # runner waits on it next to SIGTERM, and exits with ``exit_status``.
        self.shutdown_requested = asyncio.Event()
        self.exit_status = 0
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def broker_id(self) -> int:
        return self.config.broker_id

    # start-up ---------------------------------------------------------------------------
    async def start(self) -> None:
        config = self.config
        loop = self._loop = asyncio.get_running_loop()
        if config.metrics_port:
            # First, so that /healthz answers (and /readyz says "starting") during recovery.
            self.metrics_server = MetricsServer(self, config.metrics_port)
            await self.metrics_server.start()
        self.zk = KazooClient(
            hosts=config.zookeeper_connect,
            timeout=config.zookeeper_session_timeout_ms / 1000,
            # ``zk.retry`` waits out connection losses, as Kafka's ZooKeeper client blocks
            # requests until it is connected again: retried for good, at most 1 s apart.
            command_retry={"max_tries": -1, "delay": 0.1, "backoff": 2, "max_delay": 1.0},
            handler=PollingHandler(),
            # Reconnection attempts at most 1 s apart too. With kazoo's default (doubling
            # up to an hour) a broker whose ZooKeeper was away 10-15 s (a restart, a flap)
            # waited another 12-25 s before trying again; its session expired meanwhile.
            connection_retry=ZOOKEEPER_CONNECTION_RETRY,
        )
        self.zk.add_listener(self._on_zk_state)
        await asyncio.to_thread(
            _start_zookeeper, self.zk, (config.zookeeper_connection_timeout_ms or 18000) / 1000
        )
        await asyncio.to_thread(self.zk.retry, self.zk.ensure_path, "/")
        self.zk_admin = ZkAdmin(self.zk)
        await asyncio.to_thread(self.zk.retry, self.zk_admin.ensure_paths)
        self.metadata.cluster_id = await asyncio.to_thread(
            self.zk.retry, self.zk_admin.get_or_create_cluster_id
        )
        # ACLs loaded before any listener accepts a client.
        authorizer = build_authorizer(config, self.zk)
        await asyncio.to_thread(self.zk.retry, authorizer.start)
        self.authorizer = authorizer

        log_dirs = [Path(d) for d in config.log_dirs]
        self._lock_fds = [_lock_log_dir(d) for d in log_dirs]
        self.logs = LogManager(
            log_dirs,
            default_config=log_config_for(config, {}),
            max_open_files=config.log_max_open_files,
        )
        self.logs.write_meta_properties(config.broker_id, self.metadata.cluster_id)
        topic_configs = await asyncio.to_thread(self.zk.retry, self._read_all_topic_configs)
        self.logs.load(lambda topic: log_config_for(config, topic_configs.get(topic, {})))
        self.log_cleaner = LogCleaner(
            self.logs,
            CleanerConfig(
                enable=config.log_cleaner_enable,
                threads=config.log_cleaner_threads,
                dedupe_buffer_size=config.log_cleaner_dedupe_buffer_size,
                io_max_bytes_per_second=config.log_cleaner_io_max_bytes_per_second,
                backoff_ms=config.log_cleaner_backoff_ms,
                processes=True,
                worker_nice=config.log_cleaner_worker_nice,
            ),
        )
        self.log_cleaner.start()

        self.replica_manager = ReplicaManager(
            config.broker_id,
            self.logs,
            self.metadata,
            log_configs_of(config),
            zk_admin=self.zk_admin,
            replication_config=replication_config_for(config, self.inter_broker_security),
            produce_decompressed_max_bytes=config.produce_decompressed_max_bytes,
        )
        # It leads nothing until it knows this run's registration (``_register``).
        self.replica_manager.expect_registration()
        # Followers' sessions read only the partitions the replica manager says changed.
        self.fetch_sessions.watch_partitions(self.replica_manager.append_waiters)
        # After the replica manager's own listener: its partitions go offline first.
        self.logs.dir_failure_listeners.append(self._on_log_dir_failure)
        self.topic_admin = TopicAdmin(
            config, self.metadata, self.zk_admin, self.replica_manager.leads_as_assigned
        )
        # Before metadata arrives: it listens for __consumer_offsets leadership.
        self.coordinator = CoordinatorService(
            config, self.metadata, self.replica_manager, self.topic_admin
        )
        # Metadata changes reach local partitions a time-bounded slice at a time.
        self.reconciler = SlicedReconcile(
            self.metadata.take_changed_topics, self.replica_manager.reconcile
        )
        self.metadata.listeners.append(self.reconciler.schedule)
        self.watcher = ZooKeeperMetadataWatcher(self.zk, self.metadata, loop)
        await asyncio.to_thread(self.watcher.start)

        for name, host, port in config.listener_list:
            server = await loop.create_server(
                functools.partial(self._new_connection, name),
                host or None,
                port,
                reuse_address=True,
                backlog=1024,
                ssl=self.tls_contexts.get(name),
                ssl_handshake_timeout=(
                    config.connections_max_idle_ms / 1000 if name in self.tls_contexts else None
                ),
            )
            self.servers.append(server)
            self._bound_ports[name] = server.sockets[0].getsockname()[1]
        await asyncio.to_thread(self._clear_stale_registrations)
        await asyncio.to_thread(self._register)
        self.controller = Controller(
            self.zk,
            config.broker_id,
            delete_topic_enable=config.delete_topic_enable,
            unclean_leader_election_for=self._unclean_election_enabled,
            auto_leader_rebalance_enable=config.auto_leader_rebalance_enable,
            leader_imbalance_per_broker_percentage=config.leader_imbalance_per_broker_percentage,
            leader_imbalance_check_interval_s=config.leader_imbalance_check_interval_seconds,
            known_partition_state=self.metadata.known_partition_state,
        )
        await asyncio.to_thread(self.controller.start)
        self.coordinator.start(self.zk_admin)
        self._tasks = [
            asyncio.create_task(
                self._every(config.log_retention_check_interval_ms, self._retention)
            ),
            asyncio.create_task(self._every(config.log_flush_scheduler_interval_ms, self._flush)),
            asyncio.create_task(
                self._every(
                    config.log_flush_offset_checkpoint_interval_ms, self.logs.checkpoint_off_loop
                )
            ),
            asyncio.create_task(self._every(1000, self._roll)),
            asyncio.create_task(
                self._every(
                    config.producer_id_expiration_check_interval_ms, self._expire_producer_ids
                )
            ),
            asyncio.create_task(
                self._every(
                    config.replica_lag_time_max_ms // 2, self.replica_manager.shrink_lagging_isrs
                )
            ),
        ]
        self.router.preparer.start_background(self.router.versions())
        self.started.set()
        # The record walk says whether produce validation runs compiled (``make native``;
        # images carry the build) or as Python, about 24 times slower per record.
        log.info(
            "broker %d serving on %s (cluster %s, record walk: %s)",
            config.broker_id,
            ", ".join(
                f"{name}://{host or '0.0.0.0'}:{self._bound_ports[name]}"
                for name, host, _ in config.listener_list
            ),
            self.metadata.cluster_id,
            WALK,
        )

    def _read_all_topic_configs(self) -> dict[str, dict[str, str]]:
        return {
            topic: self.zk_admin.get_topic_config(topic) for topic in self.zk_admin.list_topics()
        }

    def _clear_stale_registrations(self) -> None:
        """Remove ephemeral znodes a killed process of this broker left behind.

        After a SIGKILL, ZooKeeper keeps the old session's ``/brokers/ids/<id>`` and
        ``/controller`` until the session times out, and Kafka's broker waits that out.
        We hold the ``.lock`` of this broker's log dirs, whose meta.properties name this
        broker id, so the old owner is certainly dead: delete its nodes and restart
        without the wait.
        """
        for path in self.zk_admin.remove_stale_registrations(self.broker_id):
            log.info("removed %s left by a previous run of broker %d", path, self.broker_id)

    def _register(self) -> None:
        """``/brokers/ids/<id>`` as Kafka writes it: every advertised listener in
        ``endpoints`` (an advertised port 0 becomes the port its listener bound), the
        protocol of each in ``listener_security_protocol_map``, and ``host``/``port`` the
        PLAINTEXT endpoint (null and -1 when there is none)."""
        config = self.config
        protocols = config.security_protocol_map
        first_bound = next(iter(self._bound_ports.values()), 0)
        endpoints = []
        listener_protocols = {}
        host: str | None = None
        port = -1
        for name, adv_host, adv_port in config.advertised_listener_list:
            adv_port = adv_port or self._bound_ports.get(name, first_bound)
            endpoints.append(f"{name}://{adv_host}:{adv_port}")
            listener_protocols[name] = protocols[name]
            if host is None and protocols[name] == "PLAINTEXT":
                host, port = adv_host, adv_port
        registration = BrokerRegistration(
            host=host,
            port=port,
            endpoints=tuple(endpoints),
            listener_security_protocol_map=listener_protocols,
            rack=config.broker_rack,
        )
        czxid = self.zk_admin.register_broker(registration, config.broker_id)
        # On the event loop, where the replica manager lives (this runs on a thread).
        loop = self._loop
        assert loop is not None
        loop.call_soon_threadsafe(self.replica_manager.registered, czxid)

    def _unclean_election_enabled(self, topic: str) -> bool:
        info = self.metadata.topics.get(topic)
        overrides = info.config if info is not None else {}
        value = overrides.get("unclean.leader.election.enable")
        if value is None:
            return self.config.unclean_leader_election_enable
        return value.lower() == "true"

    def _new_connection(self, listener: str) -> Connection:
        options: dict[str, Any] = {
            "max_request_size": self.config.socket_request_max_bytes,
            "sendfile_counter": self.sendfile,
            "on_close": self.connections.discard,
            "listener": listener,
        }
        connection: Connection
        if listener in self.tls_contexts:
            connection = TlsConnection(
                self.router,
                principal_mapper=self.principal_mappers[listener],
                tls_reads=self.tls_reads,
                **options,
            )
        else:
            connection = Connection(self.router, **options)
        sasl = self.sasl_settings.get(listener)
        if sasl is not None:
            authenticator = SaslAuthenticator(
                connection,
                self.router,
                sasl,
                self._scram_credential,
                self.authentication_metrics,
            )
            connection.handler = authenticator
            authenticator.start()
        self.connections.add(connection)
        return connection

    def _scram_credential(self, user: str, mechanism: str) -> ScramCredential | None:
        return cached_credential(self.metadata.quota_configs, user, mechanism)

    def _apply_quota_configs(self) -> None:
        """Client quota changes (``/config/changes``) take effect on the next request."""
        if self.metadata.quota_configs_version != self._quota_configs_version:
            self._quota_configs_version = self.metadata.quota_configs_version
            self.quotas.update(QuotaConfigs.from_entity_configs(self.metadata.quota_configs))

    def _on_zk_state(self, state: str) -> None:
        """Kazoo's thread. After an expired session, register again under the new one
        (``_register_again``, retried until it works), then stand for controller.

        The watches refresh themselves on every reconnect (kazoo's DataWatch and
        ChildrenWatch, and our AsyncDataWatch, read their node again and set a new
        watch: kazoo drops every watch with the connection), and the metadata they
        bring demotes this broker if another took its partitions meanwhile.
        """
        if state == KazooState.LOST and self.stopping:
            # Our own close at the end of ``stop``: no error, nothing to recreate.
            log.info("ZooKeeper session closed")
        elif state == KazooState.LOST:
            log.error("ZooKeeper session lost; ephemeral registrations will be recreated")
            self._session_lost = True
        elif state == KazooState.SUSPENDED:
            log.warning("ZooKeeper connection suspended")
        elif state == KazooState.CONNECTED and self._session_lost and not self.stopping:
            self._session_lost = False
            with self._registration_lock:
                self._registration_needed = True
                if self._registration_thread is None or not self._registration_thread.is_alive():
                    self._registration_thread = threading.Thread(
                        target=self._register_again, name="zk-reregister", daemon=True
                    )
                    self._registration_thread.start()

    def _register_again(self) -> None:
        """Register under the new session, retrying with backoff until it works.

        One try is not enough: ZooKeeper may drop the connection during it, or the old
        session's node may still be there (another broker's, or a session not yet
        expired; ``register_broker`` waits a session timeout for that). A broker left out
        of ``/brokers/ids`` gets no leadership and is invisible to clients, so this keeps
        going until the node is ours (or the broker stops). A new session loss meanwhile
        sets ``_registration_needed`` again and this loop registers once more.
        """
        backoff = REGISTRATION_RETRY_MIN_S
        while not self.stopping:
            with self._registration_lock:
                if not self._registration_needed:
                    return
                self._registration_needed = False
            try:
                self._register()
            except Exception as error:
                with self._registration_lock:
                    self._registration_needed = True
                log.warning(
                    "registering again after a ZooKeeper session loss failed (%s); "
                    "retrying in %.1f s",
                    error,
                    backoff,
                )
                time.sleep(backoff)
                backoff = min(backoff * 2, REGISTRATION_RETRY_MAX_S)
                continue
            backoff = REGISTRATION_RETRY_MIN_S
            log.info("registered again in ZooKeeper after a session loss")
            if self.controller is not None:
                self.controller.registration_restored()

    # periodic work ------------------------------------------------------------------------
    async def _every(self, interval_ms: int, job: object) -> None:
        interval = max(interval_ms, 100) / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                result = job()  # type: ignore[operator]
                if inspect.isawaitable(result):
                    await result
            except Exception:
                log.exception("periodic job %s failed", getattr(job, "__name__", job))

    def _retention(self) -> None:
        deleted = self.logs.run_retention()
        if deleted:
            log.info("retention deleted %d segments", deleted)

    def _expire_producer_ids(self) -> None:
        removed = self.logs.remove_expired_producers(self.config.producer_id_expiration_ms)
        if removed:
            log.info("expired %d producer ids (producer.id.expiration.ms)", removed)

    async def _flush(self) -> None:
        await self.logs.flush_due_sliced()

    async def _roll(self) -> None:
        await self.logs.roll_due_sliced()

    # failed log dirs ----------------------------------------------------------------------
    def _on_log_dir_failure(self, log_dir: Path, partitions: list[tuple[str, int]]) -> None:
        """After ``ReplicaManager`` took the dir's partitions offline: tell the controller
        (it elects other leaders), or shut down when no log dir is left (Kafka halts)."""
        loop = self._loop
        assert loop is not None, "log dirs fail only once the broker has started"
        if not self.logs.live_dirs:
            log.error(
                "shutting down broker %d: every log dir has failed (%s)",
                self.broker_id,
                ", ".join(f"{d}: {e}" for d, e in self.logs.offline_dirs.items()),
            )
            self.exit_status = 1
            loop.call_soon_threadsafe(self.shutdown_requested.set)
            return
        if partitions and getattr(self, "zk_admin", None) is not None:
            asyncio.run_coroutine_threadsafe(
                self._notify_log_dir_failure(log_dir, partitions), loop
            )

    async def _notify_log_dir_failure(
        self, log_dir: Path, partitions: list[tuple[str, int]]
    ) -> None:
        delay = REGISTRATION_RETRY_MIN_S
        while not self.stopping:
            try:
                await asyncio.to_thread(
                    self.zk_admin.notify_log_dir_failure, self.broker_id, partitions
                )
                log.info("told the controller that log dir %s failed", log_dir)
                return
            except Exception as error:  # ZooKeeper unreachable: keep trying
                log.warning("cannot write the log dir event for %s (%s); retrying", log_dir, error)
                await asyncio.sleep(delay)
                delay = min(delay * 2, REGISTRATION_RETRY_MAX_S)

    # shutdown ---------------------------------------------------------------------------
    async def stop(self) -> None:
        if self.stopping:
            return
        self.stopping = True
        started = time.monotonic()
        if self.controller is not None:
            await asyncio.to_thread(self.controller.stop)
        if self.zk is not None and self.zk.connected and getattr(self, "replica_manager", None):
            if self.config.controlled_shutdown_enable:
                await self._controlled_shutdown()
            else:
                # Kafka's controlled.shutdown.enable=false: just stop. The registration
                # goes with the ZooKeeper session at the end, and the controller then
                # fails over what this broker led, as after a crash.
                log.info(
                    "controlled.shutdown.enable=false: stopping without moving leadership "
                    "away first"
                )
        # Awaited, not only cancelled: a periodic job (a flush or roll sweep, between two
        # slices) must be over before the logs close under it.
        await cancel_and_wait(self._tasks, "periodic jobs")
        await self.router.preparer.stop()
        if getattr(self, "coordinator", None) is not None:
            await self.coordinator.stop()
        if self.metrics_server is not None:
            await self.metrics_server.stop()
        if getattr(self, "replica_manager", None) is not None:
            await self.replica_manager.stop()
        if getattr(self, "watcher", None) is not None:
            self.watcher.stop()
        self.authorizer.stop()
        for server in self.servers:
            server.close()
        for connection in list(self.connections):
            if connection.transport is not None:
                connection.transport.close()
        if self.zk is not None:
            await asyncio.to_thread(self._close_zk)
        if getattr(self, "log_cleaner", None) is not None:
            await self.log_cleaner.stop()
        if getattr(self, "logs", None) is not None:
            self.logs.close()
        for fd in self._lock_fds:
            os.close(fd)
        self._lock_fds = []
        log.info("broker %d stopped in %.2f s", self.broker_id, time.monotonic() - started)

    async def _controlled_shutdown(self) -> None:
        """Hand leadership over before exiting, so a rolling restart keeps every
        partition available (Kafka's controlled shutdown; ``controlled.shutdown.enable``).

        Deregistering makes the controller treat this broker as gone: it moves each
        partition led here to another in-sync replica. We keep serving until the
        metadata shows that done (or the timeout passes), then exit.

        What this broker leads comes from ZooKeeper, not only from its metadata cache:
        a state the controller wrote just before (a topic created a moment ago) may not
        be in the cache yet, and the cache alone then said "nothing left to hand over"
        at once though ZooKeeper named this broker leader. The cache must first have
        caught up with those states (Kafka's controller answers a controlled shutdown
        from its own view, ZooKeeper's, for the same reason).
        """
        assert self.zk is not None
        started = time.monotonic()
        deregistered = await self._deregister_knowing_what_is_led()
        if deregistered is None:
            return
        led, how = deregistered
        log.info(
            "controlled shutdown: deregistered; waiting for leadership to move away "
            "(%d partitions led here, says ZooKeeper: %s; deregistered %.3f s after the "
            "shutdown began)",
            len(led),
            how,
            time.monotonic() - started,
        )
        metadata = self.metadata

        def cache_caught_up() -> bool:
            # Pruned as states arrive, so a check costs what is still missing. A topic
            # deleted meanwhile has nothing left to hand over: its state never arrives.
            for (topic, index), (topic_id, version) in list(led.items()):
                if topic_id is not None and topic_id in metadata.deleted_topic_ids:
                    del led[(topic, index)]
                    continue
                info = metadata.topics.get(topic)
                partition = None
                if info is not None and info.topic_id == topic_id:
                    partition = info.partitions.get(index)
                if partition is None or partition.state_version < version:
                    return False
                del led[(topic, index)]
            return True

        def nothing_left_to_hand_over() -> bool:
            if not cache_caught_up():
                return False
            others = set(metadata.brokers) - {self.broker_id}
            for topic in metadata.topics.values():
                for info in topic.partitions.values():
                    if info.leader == self.broker_id and others.intersection(info.isr):
                        return False
            return True

        handed_over = await metadata.wait_for(
            nothing_left_to_hand_over, CONTROLLED_SHUTDOWN_TIMEOUT_S
        )
        if handed_over:
            log.info(
                "controlled shutdown: nothing left to hand over (%.3f s after the shutdown began)",
                time.monotonic() - started,
            )
        else:
            log.warning(
                "controlled shutdown: leadership not moved within %d s; exiting anyway",
                CONTROLLED_SHUTDOWN_TIMEOUT_S,
            )

    async def _deregister_knowing_what_is_led(
        self,
    ) -> tuple[dict[tuple[str, int], tuple[str | None, int]], str] | None:
        """Deregister, and say which partitions ZooKeeper named this broker leader of at
        that moment (topic id and state version each, see ``_controlled_shutdown``), and
        how that was learnt; None when the deregistration failed.

        Until the registration goes no controller moves anything away, so what ZooKeeper
        says just before it is everything there is to hand over. The quick way asks no
        question: when the metadata cache knows the state of every partition assigned
        here, one ZooKeeper transaction deletes the registration on condition that each
        of those states is still at the version the cache holds, and the cache then
        says exactly what is led here. Otherwise (a state not loaded yet, one that moved
        on meanwhile) the states are read, and the deregistration goes right behind the
        reads in the same pipeline: ZooKeeper executes one session's requests in order,
        so the reads still see the states from before it."""
        admin = self.zk_admin
        timeout = CONTROLLED_SHUTDOWN_READ_TIMEOUT_S
        assigned: dict[tuple[str, int], str | None] | None = None
        try:
            assigned = await asyncio.to_thread(admin.assigned_partitions, self.broker_id, timeout)
        except Exception:
            log.warning(
                "controlled shutdown: could not read the partitions assigned here",
                exc_info=True,
            )
        cached = self._cached_states(assigned) if assigned is not None else None
        if cached is not None:
            versions, led = cached
            try:
                checked = await asyncio.to_thread(
                    admin.deregister_broker_if_states_unchanged, self.broker_id, versions
                )
            except NoNodeError:
                checked = False  # not registered: the way below says what is led
            except Exception:
                log.warning(
                    "controlled shutdown: the deregistration checked against the metadata "
                    "cache failed; reading the states instead",
                    exc_info=True,
                )
                checked = False
            if checked:
                return led, "the metadata cache's states, checked as it deregistered"
        deregistration: list[Any] = []

        def deregister() -> None:
            if not deregistration:
                deregistration.append(admin.deregister_broker_async(self.broker_id))

        def read_and_deregister() -> dict[tuple[str, int], tuple[str | None, int]]:
            try:
                if assigned is None:
                    raise RuntimeError("the partitions assigned here are not known")
                return admin.partitions_led_by(
                    self.broker_id, timeout, assigned=assigned, then=deregister
                )
            finally:
                deregister()  # the reads failed before their ``then``: deregister anyway

        try:
            led = await asyncio.to_thread(read_and_deregister)
            how = "read just before it deregistered"
        except Exception:
            log.warning(
                "controlled shutdown: could not read what ZooKeeper says this broker leads; "
                "deciding from the metadata cache alone",
                exc_info=assigned is not None,
            )
            led, how = {}, "unknown, the metadata cache alone decides"
        try:
            if not deregistration:
                raise RuntimeError("the deregistration could not be sent")
            await asyncio.to_thread(deregistration[0].get)
        except NoNodeError:
            pass
        except Exception:
            log.warning("controlled shutdown: could not deregister", exc_info=True)
            return None
        return led, how

    def _cached_states(
        self, assigned: dict[tuple[str, int], str | None]
    ) -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], tuple[str | None, int]]] | None:
        """From the metadata cache, for the partitions ``assigned`` here: each one's
        state version, and those led here (topic id, version); None when the cache does
        not know one of those states (or knows another incarnation of its topic)."""
        versions: dict[tuple[str, int], int] = {}
        led: dict[tuple[str, int], tuple[str | None, int]] = {}
        for (topic, index), topic_id in assigned.items():
            info = self.metadata.topics.get(topic)
            if info is None or info.topic_id != topic_id:
                return None
            partition = info.partitions.get(index)
            if partition is None or partition.state is None or partition.state_version < 0:
                return None
            versions[(topic, index)] = partition.state_version
            if partition.leader == self.broker_id:
                led[(topic, index)] = (topic_id, partition.state_version)
        return versions, led

    def _close_zk(self) -> None:
        assert self.zk is not None
        try:
            self.zk.stop()
            self.zk.close()
        except Exception:
            log.debug("closing the ZooKeeper client failed", exc_info=True)


def _start_zookeeper(zk: KazooClient, timeout: float) -> None:
    """Connect, within ``timeout`` seconds (Kafka's zookeeper.connection.timeout.ms).

    With a chroot, kazoo's ``start`` reads the chroot once connected, and a connection
    lost in that moment raised out of ``start`` (CI, ZooKeeper on a loaded machine: the
    broker exited with status 1) although the client reconnects by itself. The steps
    after this one retry their requests through connection losses, so the loss is
    theirs to wait out; only not connecting at all within the timeout fails the start.
    """
    try:
        zk.start(timeout)
    except ConnectionLoss:
        log.warning("ZooKeeper connection lost right after connecting; reconnecting")
