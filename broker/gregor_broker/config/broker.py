"""The broker's static configuration with Kafka's keys, defaults and validation.

``BrokerConfig`` (field names are Kafka's keys with dots as underscores), the table of
supported keys (``BROKER_CONFIG_KEYS``), listeners, and ``load_broker_config``: defaults <
properties file < ``GREGOR_*`` environment < overrides. Every value is static once loaded;
the dynamic ones live in ``dynamic_broker.py``.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from .properties import parse_properties
from .values import (
    _EMPTY,
    ENV_PREFIX,
    LONG_MAX,
    ConfigError,
    ConfigType,
    Validator,
    at_least,
    between,
    list_of,
    one_of,
    parse_value,
)

log = logging.getLogger(__name__)

# --- the broker configuration ----------------------------------------------------------------


# replica.selector.class values (Kafka's class names; replication/replica_selector.py).
RACK_AWARE_REPLICA_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
LEADER_SELECTOR = "org.apache.kafka.common.replica.LeaderSelector"


def _key(
    default: Any,
    config_type: ConfigType,
    doc: str,
    *,
    validator: Validator | None = None,
    required: bool = False,
    ignored: bool = False,
) -> Any:
    metadata = {
        "type": config_type,
        "doc": doc,
        "validator": validator,
        "required": required,
        "ignored": ignored,
    }
    if required:
        return field(metadata=metadata)
    return field(default=default, metadata=metadata)


# authorizer.class.name values: Kafka's ZooKeeper-mode authorizer and its older name.
ACL_AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
ACL_AUTHORIZER_ALIASES = ("kafka.security.auth.SimpleAclAuthorizer",)

_PROTOCOL_MAP_DEFAULT = (
    "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"
)
LISTENER_PREFIX = "listener.name."
_SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_T = ConfigType


@dataclass(frozen=True, kw_only=True)
class BrokerConfig:
    """A broker's static configuration; field names are Kafka's keys with dots as underscores.

    Keys Kafka lets fall back to another key (``log.dirs`` → ``log.dir``,
    ``log.retention.ms`` → ``.minutes`` → ``.hours``, ``log.roll.ms`` → ``log.roll.hours``,
    ``log.flush.interval.ms`` → ``log.flush.scheduler.interval.ms``,
    ``advertised.listeners`` → ``listeners``, ``zookeeper.connection.timeout.ms`` →
    ``zookeeper.session.timeout.ms``) hold the *effective* value after construction.
    """

    # Identity and cluster membership
    broker_id: int = _key(
        None, _T.INT, "The id of this broker; unique in the cluster.", required=True,
        validator=at_least(0),
    )  # fmt: skip
    zookeeper_connect: str = _key(
        None, _T.STRING,
        "ZooKeeper connection string host:port[,host:port...][/chroot].",
        required=True,
    )  # fmt: skip
    zookeeper_session_timeout_ms: int = _key(18000, _T.INT, "ZooKeeper session timeout.")
    zookeeper_connection_timeout_ms: int | None = _key(
        None, _T.INT,
        "How long to wait for a ZooKeeper connection; defaults to zookeeper.session.timeout.ms.",
    )  # fmt: skip
    broker_rack: str | None = _key(
        None, _T.STRING, "Rack of this broker, used for rack-aware replica placement."
    )
    # Listeners
    listeners: str = _key(
        "PLAINTEXT://:9092", _T.STRING,
        "Comma-separated listeners NAME://host:port to bind; an empty host binds every "
        "interface.",
    )  # fmt: skip
    advertised_listeners: str | None = _key(
        None, _T.STRING,
        "Listeners published in ZooKeeper for clients; defaults to listeners. An empty "
        "host advertises the machine's canonical host name.",
    )  # fmt: skip
    listener_security_protocol_map: str = _key(
        _PROTOCOL_MAP_DEFAULT,
        _T.STRING,
        "Listener name to security protocol map, NAME:PROTOCOL,...",
    )
    inter_broker_listener_name: str | None = _key(
        None, _T.STRING,
        "Listener followers and the controller use between brokers; defaults to the "
        "PLAINTEXT listener.",
    )  # fmt: skip
    security_inter_broker_protocol: str = _key(
        "PLAINTEXT", _T.STRING,
        "Security protocol between brokers; names the inter-broker listener when "
        "inter.broker.listener.name is unset.",
        validator=one_of(*_SECURITY_PROTOCOLS),
    )  # fmt: skip
    # Security (docs/security.md). Each key can be set for one listener only as
    # listener.name.<listener>.<key> (lower-case listener name), as in Kafka.
    sasl_enabled_mechanisms: tuple[str, ...] = _key(
        ("GSSAPI",), _T.LIST,
        "SASL mechanisms SASL listeners offer: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (Kafka's "
        "default GSSAPI is not implemented).",
    )  # fmt: skip
    sasl_mechanism_inter_broker_protocol: str = _key(
        "GSSAPI", _T.STRING, "SASL mechanism followers use towards leaders."
    )
    sasl_jaas_config: str | None = _key(
        None, _T.PASSWORD,
        "JAAS login module configuration; PLAIN users are its user_<name>=\"<password>\" "
        "options, the broker's own client login its username and password.",
    )  # fmt: skip
    # Authorization (docs/security.md): Kafka's AclAuthorizer with its own keys.
    authorizer_class_name: str = _key(
        "", _T.STRING,
        "The authorizer: kafka.security.authorizer.AclAuthorizer (ACLs in ZooKeeper, "
        "Kafka's rules); empty: no authorization, every client may do everything.",
        validator=one_of("", ACL_AUTHORIZER, *ACL_AUTHORIZER_ALIASES),
    )  # fmt: skip
    super_users: str = _key(
        "", _T.STRING,
        "Principals allowed everything whatever the ACLs, separated by ';' "
        "(User:admin;User:broker).",
    )  # fmt: skip
    allow_everyone_if_no_acl_found: bool = _key(
        False, _T.BOOLEAN,
        "Whether a resource with no ACL at all is open to everyone (Kafka's default: false).",
    )  # fmt: skip
    authorizer_audit_log_enable: bool = _key(
        False, _T.BOOLEAN,
        "Gregor's own: log every authorization decision on the logger "
        "kafka.authorizer.logger (denials at INFO, allowed requests at DEBUG).",
    )  # fmt: skip
    connection_failed_authentication_delay_ms: int = _key(
        100, _T.INT, "How long to wait before closing a connection whose authentication failed.",
        validator=at_least(0),
    )  # fmt: skip
    connections_max_reauth_ms: int = _key(
        0, _T.LONG,
        "Longest SASL session before a client must re-authenticate (KIP-368); 0: no limit.",
        validator=at_least(0),
    )  # fmt: skip
    ssl_keystore_type: str = _key(
        "JKS", _T.STRING, "Key store format; Gregor reads PEM only.",
        validator=one_of("JKS", "PEM", "PKCS12"),
    )  # fmt: skip
    ssl_keystore_location: str | None = _key(
        None, _T.STRING, "PEM file with the private key and the certificate chain."
    )
    ssl_keystore_password: str | None = _key(None, _T.PASSWORD, "Unused for PEM key stores.")
    ssl_key_password: str | None = _key(None, _T.PASSWORD, "Password of an encrypted private key.")
    ssl_keystore_certificate_chain: str | None = _key(
        None, _T.PASSWORD, "Inline PEM certificate chain (instead of ssl.keystore.location)."
    )
    ssl_keystore_key: str | None = _key(
        None, _T.PASSWORD, "Inline PEM private key (instead of ssl.keystore.location)."
    )
    ssl_truststore_type: str = _key(
        "JKS", _T.STRING, "Trust store format; Gregor reads PEM only.",
        validator=one_of("JKS", "PEM", "PKCS12"),
    )  # fmt: skip
    ssl_truststore_location: str | None = _key(
        None, _T.STRING, "PEM file of trusted CA certificates."
    )
    ssl_truststore_password: str | None = _key(None, _T.PASSWORD, "Unused for PEM trust stores.")
    ssl_truststore_certificates: str | None = _key(
        None, _T.PASSWORD, "Inline PEM trusted certificates (instead of ssl.truststore.location)."
    )
    ssl_client_auth: str = _key(
        "none", _T.STRING,
        "Whether TLS clients must present a certificate: none, requested, required.",
        validator=one_of("none", "requested", "required"),
    )  # fmt: skip
    ssl_enabled_protocols: tuple[str, ...] = _key(
        ("TLSv1.2", "TLSv1.3"), _T.LIST, "TLS versions accepted (TLSv1.2, TLSv1.3 only)."
    )
    ssl_cipher_suites: tuple[str, ...] = _key(
        (), _T.LIST, "TLS 1.2 cipher suites (OpenSSL names); empty: the library's defaults."
    )
    ssl_principal_mapping_rules: str = _key(
        "DEFAULT", _T.STRING,
        "Rules that turn a client certificate's distinguished name into a principal name.",
    )  # fmt: skip
    ssl_endpoint_identification_algorithm: str = _key(
        "https", _T.STRING,
        "Brokers verify the leader's host name in its certificate (https) or not (empty).",
    )  # fmt: skip
    socket_request_max_bytes: int = _key(
        104857600, _T.INT, "Largest request the broker accepts.", validator=at_least(1)
    )
    socket_send_buffer_bytes: int = _key(102400, _T.INT, "SO_SNDBUF; -1 keeps the OS default.")
    socket_receive_buffer_bytes: int = _key(102400, _T.INT, "SO_RCVBUF; -1 keeps the OS default.")
    connections_max_idle_ms: int = _key(600000, _T.LONG, "Close connections idle this long.")
    num_network_threads: int = _key(
        3, _T.INT, "Accepted for compatibility and ignored (asyncio).", ignored=True
    )
    num_io_threads: int = _key(
        8, _T.INT, "Accepted for compatibility and ignored (asyncio).", ignored=True
    )
    # Log storage
    log_dirs: tuple[str, ...] | None = _key(
        None, _T.STRING, "Comma-separated log directories; defaults to log.dir."
    )
    log_dir: str = _key("/tmp/kafka-logs", _T.STRING, "Log directory, used when log.dirs is unset.")
    log_segment_bytes: int = _key(
        1073741824, _T.INT, "Largest size of a log segment file.", validator=at_least(14)
    )
    log_roll_ms: int | None = _key(
        None, _T.LONG, "Roll a new segment after this time; overrides log.roll.hours.",
        validator=at_least(1),
    )  # fmt: skip
    log_roll_hours: int = _key(
        168, _T.INT, "Roll a new segment after this many hours.", validator=at_least(1)
    )
    log_roll_jitter_ms: int | None = _key(
        None,
        _T.LONG,
        "Random jitter subtracted from the roll time; overrides log.roll.jitter.hours.",
    )
    log_roll_jitter_hours: int = _key(0, _T.INT, "Random jitter subtracted from the roll time.")
    log_retention_ms: int | None = _key(
        None, _T.LONG,
        "Delete segments older than this; -1 keeps them forever. Wins over .minutes and .hours.",
    )  # fmt: skip
    log_retention_minutes: int | None = _key(
        None, _T.INT, "Retention in minutes, used when log.retention.ms is unset."
    )
    log_retention_hours: int = _key(
        168, _T.INT, "Retention in hours, used when log.retention.ms and .minutes are unset."
    )
    log_retention_bytes: int = _key(
        -1, _T.LONG, "Delete old segments when a partition grows beyond this; -1: no limit."
    )
    log_retention_check_interval_ms: int = _key(
        300000, _T.LONG, "How often retention is checked.", validator=at_least(1)
    )
    log_index_interval_bytes: int = _key(
        4096, _T.INT, "Bytes between offset index entries.", validator=at_least(0)
    )
    log_index_size_max_bytes: int = _key(
        10485760, _T.INT, "Largest size of an offset index file.", validator=at_least(4)
    )
    log_flush_interval_messages: int = _key(
        LONG_MAX, _T.LONG, "fsync a log after this many messages.", validator=at_least(1)
    )
    log_flush_interval_ms: int | None = _key(
        None, _T.LONG,
        "fsync a log after a message has waited this long; defaults to "
        "log.flush.scheduler.interval.ms.",
    )  # fmt: skip
    log_flush_scheduler_interval_ms: int = _key(
        LONG_MAX, _T.LONG, "How often the flusher checks whether a log needs an fsync."
    )
    log_flush_offset_checkpoint_interval_ms: int = _key(
        60000, _T.INT, "How often the recovery point checkpoint is written.",
        validator=at_least(0),
    )  # fmt: skip
    log_flush_start_offset_checkpoint_interval_ms: int = _key(
        60000, _T.INT, "How often the log start offset checkpoint is written.",
        validator=at_least(0),
    )  # fmt: skip
    log_cleanup_policy: tuple[str, ...] = _key(
        ("delete",), _T.LIST, "Default cleanup policy for topics: delete, compact or both.",
        validator=list_of("delete", "compact"),
    )  # fmt: skip
    log_cleaner_enable: bool = _key(True, _T.BOOLEAN, "Run the log cleaner for compacted topics.")
    log_cleaner_delete_retention_ms: int = _key(
        86400000, _T.LONG, "How long compaction keeps tombstones.", validator=at_least(0)
    )
    log_cleaner_min_compaction_lag_ms: int = _key(
        0, _T.LONG, "Minimum age of a message before it can be compacted.", validator=at_least(0)
    )
    log_cleaner_max_compaction_lag_ms: int = _key(
        LONG_MAX, _T.LONG, "Maximum time a message stays uncompacted.", validator=at_least(1)
    )
    log_cleaner_min_cleanable_ratio: float = _key(
        0.5, _T.DOUBLE, "Dirty ratio above which a log is compacted.", validator=between(0, 1)
    )
    log_cleaner_backoff_ms: int = _key(
        15000, _T.LONG, "Sleep when no log needs cleaning.", validator=at_least(0)
    )
    log_cleaner_threads: int = _key(
        1, _T.INT, "Cleaner workers (asyncio tasks) compacting logs.", validator=at_least(0)
    )
    log_cleaner_dedupe_buffer_size: int = _key(
        134217728, _T.LONG, "Memory for the cleaners' key maps, all workers together.",
        validator=at_least(0),
    )  # fmt: skip
    log_cleaner_io_max_bytes_per_second: float = _key(
        1.7976931348623157e308, _T.DOUBLE, "Bytes per second the cleaners read and write at most.",
        validator=at_least(0),
    )  # fmt: skip
    log_cleaner_worker_nice: int = _key(
        0, _T.INT,
        "Gregor only: the niceness the cleaners' worker processes add to their own (0-19; "
        "above 0 they also run as SCHED_BATCH), so the broker's request handling wins a "
        "core the two contend for and compaction waits; 0 runs them at the broker's "
        "priority.",
        validator=between(0, 19),
    )  # fmt: skip
    producer_id_expiration_ms: int = _key(
        86400000, _T.INT,
        "How long a partition keeps a producer id after its last write (no open transaction).",
        validator=at_least(1),
    )  # fmt: skip
    producer_id_expiration_check_interval_ms: int = _key(
        600000, _T.INT, "How often partitions drop expired producer ids.", validator=at_least(1)
    )
    log_message_timestamp_type: str = _key(
        "CreateTime", _T.STRING, "Default timestamp type: CreateTime or LogAppendTime.",
        validator=one_of("CreateTime", "LogAppendTime"),
    )  # fmt: skip
    log_message_timestamp_before_max_ms: int = _key(
        LONG_MAX, _T.LONG, "Reject records whose timestamp is this far before the broker's time.",
        validator=at_least(0),
    )  # fmt: skip
    log_message_timestamp_after_max_ms: int = _key(
        LONG_MAX, _T.LONG, "Reject records whose timestamp is this far after the broker's time.",
        validator=at_least(0),
    )  # fmt: skip
    log_message_downconversion_enable: bool = _key(
        True, _T.BOOLEAN, "Allow down-conversion of records for old fetch versions."
    )
    log_segment_delete_delay_ms: int = _key(
        60000, _T.LONG, "Wait this long before deleting a segment file from disk.",
        validator=at_least(0),
    )  # fmt: skip
    log_preallocate: bool = _key(False, _T.BOOLEAN, "Preallocate segment files.")
    log_max_open_files: int = _key(
        1000, _T.INT,
        "Gregor only: most segment .log files kept open at once; the least recently used "
        "are closed and reopened on demand (a file being sent is never closed).",
        validator=at_least(16),
    )  # fmt: skip
    compression_type: str = _key(
        "producer", _T.STRING, "Default topic compression; producer keeps the producer's codec.",
        validator=one_of("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"),
    )  # fmt: skip
    message_max_bytes: int = _key(
        1048588, _T.INT, "Largest record batch the broker accepts.", validator=at_least(0)
    )
    produce_decompressed_max_bytes: int = _key(
        104857600, _T.INT,
        "Gregor only: most bytes the compressed record batches of one Produce request may "
        "inflate to while the broker validates them (streamed, never held whole); past it "
        "the batch is refused with MESSAGE_TOO_LARGE. Defaults to socket.request.max.bytes' "
        "default, so a compressed request costs at most the work of the largest plain one.",
        validator=at_least(1),
    )  # fmt: skip
    num_recovery_threads_per_data_dir: int = _key(
        1, _T.INT, "Threads per log dir for recovery at start-up and flush at shutdown.",
        validator=at_least(1),
    )  # fmt: skip
    # Topics
    num_partitions: int = _key(
        1, _T.INT, "Partitions of auto-created topics.", validator=at_least(1)
    )
    default_replication_factor: int = _key(
        1, _T.INT, "Replication factor of auto-created topics.", validator=at_least(1)
    )
    auto_create_topics_enable: bool = _key(
        True, _T.BOOLEAN, "Create a topic when a client asks for its metadata."
    )
    delete_topic_enable: bool = _key(True, _T.BOOLEAN, "Allow topic deletion.")
    max_partitions_per_request: int = _key(
        10000, _T.INT,
        "Gregor only (Kafka's controller hard-codes 10000): most partitions one CreateTopics "
        "or CreatePartitions request may add; more is refused with POLICY_VIOLATION.",
        validator=at_least(1),
    )  # fmt: skip
    # Replication
    min_insync_replicas: int = _key(
        1, _T.INT, "Replicas that must acknowledge an acks=all write.", validator=at_least(1)
    )
    unclean_leader_election_enable: bool = _key(
        False, _T.BOOLEAN, "Allow a replica outside the ISR to become leader (may lose data)."
    )
    replica_lag_time_max_ms: int = _key(
        30000, _T.LONG, "A follower not caught up for this long leaves the ISR."
    )
    replica_selector_class: str | None = _key(
        None,
        _T.STRING,
        "Which replica consumers read from (KIP-392): unset or "
        "org.apache.kafka.common.replica.LeaderSelector for the leader, "
        "org.apache.kafka.common.replica.RackAwareReplicaSelector for a replica in the "
        "consumer's client.rack.",
        validator=one_of(RACK_AWARE_REPLICA_SELECTOR, LEADER_SELECTOR),
    )
    replica_fetch_max_bytes: int = _key(
        1048576, _T.INT, "Bytes per partition a follower fetches.", validator=at_least(0)
    )
    replica_fetch_response_max_bytes: int = _key(
        10485760, _T.INT, "Bytes a follower fetch response may carry.", validator=at_least(0)
    )
    replica_fetch_wait_max_ms: int = _key(500, _T.INT, "Follower fetch max wait.")
    replica_fetch_min_bytes: int = _key(1, _T.INT, "Follower fetch min bytes.")
    replica_fetch_backoff_ms: int = _key(
        1000, _T.INT, "Sleep after a failed follower fetch.", validator=at_least(0)
    )
    replica_socket_timeout_ms: int = _key(30000, _T.INT, "Follower fetch socket timeout.")
    replica_high_watermark_checkpoint_interval_ms: int = _key(
        5000, _T.LONG, "How often high watermarks are checkpointed."
    )
    num_replica_fetchers: int = _key(1, _T.INT, "Fetcher connections per source broker.")
    fetch_max_bytes: int = _key(
        57671680, _T.INT, "Largest fetch response the broker returns.", validator=at_least(1024)
    )
    max_incremental_fetch_session_cache_slots: int = _key(
        1000, _T.INT,
        "Most incremental fetch sessions (KIP-227) the broker keeps; 0 turns them off. When "
        "the cache is full, a new session replaces one unused for "
        "min.incremental.fetch.session.eviction.ms or else a smaller one (a follower's may "
        "also replace a consumer's).",
        validator=at_least(0),
    )  # fmt: skip
    min_incremental_fetch_session_eviction_ms: int = _key(
        120000, _T.LONG,
        "Gregor only (Kafka hard-codes 120000): how long an incremental fetch session must "
        "go unused before any new session may take its slot.",
        validator=at_least(0),
    )  # fmt: skip
    # Controller
    controlled_shutdown_enable: bool = _key(
        True, _T.BOOLEAN,
        "Move leadership away before a broker shuts down: it deregisters and keeps serving "
        "until the controller has elected other leaders for what it led (at most 30 s). "
        "false: it just stops, and the controller fails its partitions over once its "
        "ZooKeeper session has ended, as after a crash.",
    )  # fmt: skip
    auto_leader_rebalance_enable: bool = _key(
        True, _T.BOOLEAN, "Periodically move leadership back to preferred leaders."
    )
    leader_imbalance_check_interval_seconds: int = _key(
        300, _T.LONG, "How often the controller checks leader imbalance.", validator=at_least(1)
    )
    leader_imbalance_per_broker_percentage: int = _key(
        10, _T.INT, "Allowed share of non-preferred leaders per broker, in percent."
    )
    controller_socket_timeout_ms: int = _key(30000, _T.INT, "Controller to broker timeout.")
    # Group coordinator and transactions
    offsets_topic_num_partitions: int = _key(
        50, _T.INT, "Partitions of __consumer_offsets.", validator=at_least(1)
    )
    offsets_topic_replication_factor: int = _key(
        3, _T.SHORT, "Replication factor of __consumer_offsets.", validator=at_least(1)
    )
    offsets_topic_segment_bytes: int = _key(
        104857600, _T.INT, "Segment size of __consumer_offsets.", validator=at_least(1)
    )
    offsets_retention_minutes: int = _key(
        10080, _T.INT, "Keep committed offsets of empty groups this long.", validator=at_least(1)
    )
    offsets_commit_timeout_ms: int = _key(
        5000, _T.INT, "Offset commit waits this long for replication.", validator=at_least(1)
    )
    offsets_retention_check_interval_ms: int = _key(
        600000,
        _T.LONG,
        "How often the group coordinator removes expired offsets.",
        validator=at_least(1),
    )
    offset_metadata_max_bytes: int = _key(
        4096, _T.INT, "Largest metadata string an offset commit may carry."
    )
    group_initial_rebalance_delay_ms: int = _key(
        3000, _T.INT, "Wait for more members before the first rebalance of a new group."
    )
    group_min_session_timeout_ms: int = _key(6000, _T.INT, "Smallest allowed session timeout.")
    group_max_session_timeout_ms: int = _key(1800000, _T.INT, "Largest allowed session timeout.")
    transaction_state_log_num_partitions: int = _key(
        50, _T.INT, "Partitions of __transaction_state.", validator=at_least(1)
    )
    transaction_state_log_replication_factor: int = _key(
        3, _T.SHORT, "Replication factor of __transaction_state.", validator=at_least(1)
    )
    transaction_state_log_min_isr: int = _key(
        2, _T.INT, "min.insync.replicas of __transaction_state.", validator=at_least(1)
    )
    transaction_state_log_segment_bytes: int = _key(
        104857600, _T.INT, "Segment size of __transaction_state.", validator=at_least(1)
    )
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = _key(
        10000, _T.INT, "How often the transaction coordinator aborts timed-out transactions.",
        validator=at_least(1),
    )  # fmt: skip
    transaction_remove_expired_transaction_cleanup_interval_ms: int = _key(
        3600000, _T.INT, "How often the transaction coordinator removes expired transactional ids.",
        validator=at_least(1),
    )  # fmt: skip
    transactional_id_expiration_ms: int = _key(
        604800000, _T.INT, "Expire idle transactional ids after this long.", validator=at_least(1)
    )
    transaction_max_timeout_ms: int = _key(
        900000, _T.INT, "Largest transaction timeout a producer may ask for.",
        validator=at_least(1),
    )  # fmt: skip
    # Quotas
    quota_window_num: int = _key(
        11, _T.INT, "Samples kept for client quotas.", validator=at_least(1)
    )
    quota_window_size_seconds: int = _key(
        1, _T.INT, "Time span of each quota sample.", validator=at_least(1)
    )
    # Gregor's own
    metrics_port: int = _key(
        0, _T.INT,
        "Gregor only: HTTP port for Prometheus /metrics and health endpoints; 0 disables it.",
        validator=between(0, 65535),
    )  # fmt: skip

    # Bookkeeping, not configuration keys.
    raw: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)
    """The strings set explicitly (file, environment, overrides) for known keys."""
    extra: Mapping[str, str] = field(default_factory=dict)
    """Unknown keys, kept as strings (a warning is logged for each)."""
    resolved_defaults: frozenset[str] = field(default=frozenset(), repr=False, compare=False)
    """Fallback keys that were unset and now hold the value of the key they fall back to."""

    def __post_init__(self) -> None:
        # Keys resolved before (dataclasses.replace passes them back in) are resolved again,
        # so that replace(config, log_retention_hours=1) changes log_retention_ms too.
        stale = self.resolved_defaults
        resolved: set[str] = set()

        def fill(key: str, value: Any) -> None:
            if getattr(self, _attr(key)) is None or key in stale:
                object.__setattr__(self, _attr(key), value)
                resolved.add(key)

        fill("log.dirs", (self.log_dir,))
        fill("advertised.listeners", self.listeners)
        fill("zookeeper.connection.timeout.ms", self.zookeeper_session_timeout_ms)
        fill("log.roll.ms", self.log_roll_hours * 3600 * 1000)
        fill("log.roll.jitter.ms", self.log_roll_jitter_hours * 3600 * 1000)
        fill("log.flush.interval.ms", self.log_flush_scheduler_interval_ms)
        # Matches Kafka's logRetentionTimeMillis: ms, else minutes, else hours; negative: -1.
        if self.log_retention_minutes is not None:
            retention = self.log_retention_minutes * 60 * 1000
        else:
            retention = self.log_retention_hours * 3600 * 1000
        fill("log.retention.ms", retention)
        if self.log_retention_ms is not None and self.log_retention_ms < 0:
            object.__setattr__(self, "log_retention_ms", -1)
        object.__setattr__(self, "resolved_defaults", frozenset(resolved))
        self._check_listeners()

    # -- derived values

    @property
    def security_protocol_map(self) -> dict[str, str]:
        return _parse_protocol_map(self.listener_security_protocol_map)

    @property
    def listener_list(self) -> list[tuple[str, str, int]]:
        """``(name, host, port)`` of each listener to bind."""
        return _parse_listeners("listeners", self.listeners)

    @property
    def advertised_listener_list(self) -> list[tuple[str, str, int]]:
        """``(name, host, port)`` to publish; an empty host becomes the canonical host name."""
        return [
            (name, host or _canonical_hostname(), port)
            for name, host, port in _parse_listeners(
                "advertised.listeners", self.advertised_listeners or self.listeners
            )
        ]

    @property
    def advertised_endpoint(self) -> tuple[str, int]:
        """``(host, port)`` clients should use: the first PLAINTEXT advertised listener.

        Falls back to the first advertised listener when none uses PLAINTEXT.
        """
        advertised = self.advertised_listener_list
        protocols = self.security_protocol_map
        for name, host, port in advertised:
            if protocols.get(name) == "PLAINTEXT":
                return host, port
        _, host, port = advertised[0]
        return host, port

    @property
    def inter_broker_listener(self) -> str:
        """The listener brokers use between them: ``inter.broker.listener.name``, else the
        listener named like ``security.inter.broker.protocol`` (Kafka's rule), else the
        first advertised listener with that protocol."""
        if self.inter_broker_listener_name:
            return self.inter_broker_listener_name.upper()
        protocol = self.security_inter_broker_protocol
        names = [name for name, _, _ in self.advertised_listener_list]
        if protocol in names:
            return protocol
        protocols = self.security_protocol_map
        for name in names:
            if protocols.get(name) == protocol:
                return name
        raise ConfigError(
            f"No listener for security.inter.broker.protocol={protocol}: name one with "
            f"inter.broker.listener.name (listeners: {self.listeners})"
        )

    def for_listener(self, listener: str, key: str) -> Any:
        """``listener.name.<listener>.<key>`` if set, else ``key``'s value (Kafka's
        per-listener overrides; ``key`` may carry a mechanism prefix such as
        ``plain.sasl.jaas.config``, which falls back to the bare ``sasl.jaas.config``)."""
        prefixed = f"listener.name.{listener.lower()}.{key}"
        text = self.extra.get(prefixed)
        base = key
        mechanism, _, rest = key.partition(".")
        if rest in BROKER_CONFIG_KEYS and mechanism not in ("ssl", "sasl"):
            base = rest
        definition = BROKER_CONFIG_KEYS.get(base)
        if text is not None:
            if definition is None:
                return text
            return _parse_broker_value(definition, text)
        return getattr(self, _attr(base)) if definition is not None else self.extra.get(key)

    @property
    def retention_ms(self) -> int:
        assert self.log_retention_ms is not None
        return self.log_retention_ms

    def is_set(self, key: str) -> bool:
        """Whether ``key`` was configured, as opposed to holding its (or a fallback's) default."""
        if key in self.raw:
            return True
        if key in self.resolved_defaults or key not in BROKER_CONFIG_KEYS:
            return False
        return getattr(self, _attr(key)) != BROKER_CONFIG_KEYS[key].default

    def _check_listeners(self) -> None:
        protocols = _parse_protocol_map(self.listener_security_protocol_map)
        for key, value in (("listeners", self.listeners), ("advertised.listeners", None)):
            text = value if value is not None else self.advertised_listeners or self.listeners
            parsed = _parse_listeners(key, text)
            names = [name for name, _, _ in parsed]
            if len(set(names)) != len(names):
                raise ConfigError(
                    f"Invalid value {text!r} for {key}: listener names must be unique"
                )
            for name, host, _ in parsed:
                if name not in protocols:
                    raise ConfigError(
                        f"Invalid value {text!r} for {key}: listener {name} has no security "
                        f"protocol; add {name}:PLAINTEXT to listener.security.protocol.map"
                    )
                if key == "advertised.listeners" and host == "0.0.0.0":
                    raise ConfigError(
                        f"Invalid value {text!r} for advertised.listeners: cannot advertise the "
                        "non-routable meta-address 0.0.0.0; use a host name clients can reach"
                    )
        if self.inter_broker_listener_name is not None and (
            self.inter_broker_listener_name.upper() not in [n for n, _, _ in self.listener_list]
        ):
            raise ConfigError(
                f"Invalid value {self.inter_broker_listener_name!r} for inter.broker.listener.name:"
                f" it must be one of the listeners ({self.listeners})"
            )
        # Kafka insists on the inter-broker listener; Gregor did not while every listener
        # was PLAINTEXT, so only an explicit protocol that no listener has is refused.
        if self.inter_broker_listener_name is None and self.is_set(
            "security.inter.broker.protocol"
        ):
            self.inter_broker_listener  # noqa: B018 - raises the ConfigError


def _attr(key: str) -> str:
    return key.replace(".", "_")


def _canonical_hostname() -> str:
    # Matches Kafka: an empty advertised host is InetAddress.getLocalHost.getCanonicalHostName.
    return socket.getfqdn()


@dataclass(frozen=True, slots=True)
class BrokerConfigKey:
    """One supported broker key: its Kafka name, type, default, validator and description."""

    name: str
    config_type: ConfigType
    default: Any
    doc: str
    validator: Validator | None = None
    required: bool = False
    ignored: bool = False

    @property
    def env_var(self) -> str:
        return ENV_PREFIX + self.name.upper().replace(".", "_")


def _collect_keys() -> dict[str, BrokerConfigKey]:
    keys: dict[str, BrokerConfigKey] = {}
    for f in dataclasses.fields(BrokerConfig):
        if "type" not in f.metadata:
            continue
        default = None if f.default is dataclasses.MISSING else f.default
        keys[f.name.replace("_", ".")] = BrokerConfigKey(
            name=f.name.replace("_", "."),
            config_type=f.metadata["type"],
            default=default,
            doc=f.metadata["doc"],
            validator=f.metadata["validator"],
            required=f.metadata["required"],
            ignored=f.metadata["ignored"],
        )
    return keys


BROKER_CONFIG_KEYS: Mapping[str, BrokerConfigKey] = MappingProxyType(_collect_keys())
"""Every supported broker key, by Kafka name, in documentation order."""

_ENV_TO_KEY = {definition.env_var: name for name, definition in BROKER_CONFIG_KEYS.items()}

_LISTENER_RE = re.compile(r"^(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)$")


def parse_listener(listener: str) -> tuple[str, str, int]:
    """``"PLAINTEXT://host:9092"`` → ``("PLAINTEXT", "host", 9092)``; IPv6 hosts in brackets.

    An empty host (``PLAINTEXT://:9092``) is returned as ``""``.
    """
    match = _LISTENER_RE.match(listener.strip())
    if not match or not match.group(1):
        raise ConfigError(
            f"Invalid listener {listener!r}: expected NAME://host:port, e.g. PLAINTEXT://:9092"
        )
    name, host, port = match.group(1), match.group(2), int(match.group(3))
    if not 0 <= port <= 65535:
        raise ConfigError(f"Invalid listener {listener!r}: port {port} is not in 0..65535")
    return name.upper(), host, port


def _parse_listeners(key: str, text: str) -> list[tuple[str, str, int]]:
    items = [item for item in (part.strip() for part in text.split(",")) if item]
    if not items:
        raise ConfigError(f"Invalid value {text!r} for {key}: expected at least one listener")
    try:
        return [parse_listener(item) for item in items]
    except ConfigError as exc:
        raise ConfigError(f"Invalid value {text!r} for {key}: {exc}") from None


def _parse_protocol_map(text: str) -> dict[str, str]:
    result: dict[str, str] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, sep, protocol = item.partition(":")
        if not sep or protocol.strip().upper() not in _SECURITY_PROTOCOLS:
            raise ConfigError(
                f"Invalid value {text!r} for listener.security.protocol.map: expected "
                f"NAME:PROTOCOL pairs with PROTOCOL one of {', '.join(_SECURITY_PROTOCOLS)}"
            )
        result[name.strip().upper()] = protocol.strip().upper()
    return result


def _parse_broker_value(key: BrokerConfigKey, text: str) -> Any:
    if key.name == "log.dirs":
        dirs = tuple(d.strip() for d in text.split(",") if d.strip())
        if not dirs:
            raise ConfigError(f"Invalid value {text!r} for configuration log.dirs: expected a path")
        return dirs
    value = parse_value(key.name, text, key.config_type)
    if key.validator is not None:
        key.validator(key.name, value)
    return value


def load_broker_config(
    path: Path | None,
    overrides: Mapping[str, str] = _EMPTY,
    env: Mapping[str, str] = os.environ,
) -> BrokerConfig:
    """Load a broker config: defaults < properties file < ``GREGOR_*`` env < ``overrides``.

    ``GREGOR_`` + the key upper-cased with dots as underscores overrides a key
    (``GREGOR_BROKER_ID=3`` sets ``broker.id``); only known keys can be set this way.
    Unknown keys from the file or overrides are logged and kept in ``extra``.
    """
    settings: dict[str, str] = {}
    if path is not None:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"Cannot read broker config file {path}: {exc.strerror}") from exc
        settings.update(parse_properties(text))
    for variable, value in env.items():
        if variable in _ENV_TO_KEY:
            settings[_ENV_TO_KEY[variable]] = value
    settings.update(overrides)

    values: dict[str, Any] = {}
    raw: dict[str, str] = {}
    extra: dict[str, str] = {}
    for name, text in settings.items():
        definition = BROKER_CONFIG_KEYS.get(name)
        if definition is None and name.startswith(LISTENER_PREFIX):
            extra[name] = text  # a per-listener override, read by BrokerConfig.for_listener
            continue
        if definition is None:
            log.warning("Unknown broker config %s=%r: kept but not used", name, text)
            extra[name] = text
            continue
        if definition.ignored:
            log.info("Broker config %s is accepted for compatibility and ignored", name)
        values[_attr(name)] = _parse_broker_value(definition, text)
        raw[name] = text
    for name in ("broker.id", "zookeeper.connect"):
        if values.get(_attr(name)) in ("", None):
            raise ConfigError(
                f"Missing required configuration {name}: set it in the properties file, "
                f"with {BROKER_CONFIG_KEYS[name].env_var}, or as an override"
            )
    return BrokerConfig(**values, raw=raw, extra=extra)
