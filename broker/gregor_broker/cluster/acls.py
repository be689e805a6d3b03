"""ACLs in ZooKeeper, exactly where and how Kafka's ``AclAuthorizer`` keeps them.

- Literal patterns: ``/kafka-acl/<ResourceType>/<name>`` (``/kafka-acl/Topic/orders``);
  prefixed ones: ``/kafka-acl-extended/prefixed/<ResourceType>/<name>``. Each znode holds
  ``{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow",
  "operation":"Read","host":"*"}]}`` (``ZkAclStore``, ``AclEntry.toJsonCompatibleMap``).
- Every change is announced with a sequential znode: ``/kafka-acl-changes/acl_changes_<n>``
  holding ``TOPIC:orders`` for a literal pattern (Kafka writes the enum's name; it reads
  any case), ``/kafka-acl-extended-changes/acl_changes_<n>`` holding
  ``{"version":1,"resourceType":"TOPIC","name":"orders-","patternType":"PREFIXED"}``.
  Each broker re-reads the named pattern (``AclChangeListener``); notifications older
  than 15 minutes are purged, as Kafka's ``ZkNodeChangeNotificationListener`` does.
- Updates are conditional on the znode's version (read, change, write with the version
  read; retried on a concurrent change, ``AclAuthorizer.updateResourceAcls``), and a
  pattern left without ACLs loses its znode.

This is the one writer used by the CreateAcls/DeleteAcls handlers (through
``server/authorizer.py``), ``gregor acls`` and the operator's User resource
(``set_principal_acls``: one principal's ACLs made exactly what it declares).
"""

from __future__ import annotations

import contextlib
import json
import logging
import random
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
from kazoo.recipe.watchers import ChildrenWatch

from ..security.acl import (
    RESOURCE_TYPES,
    AclBinding,
    AclBindingFilter,
    AclEntry,
    AclEntryFilter,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    pattern_type_named,
    resource_type_named,
    validate_binding,
)

log = logging.getLogger(__name__)

LITERAL_ACL_PATH = "/kafka-acl"
EXTENDED_ACL_PATH = "/kafka-acl-extended"
LITERAL_CHANGES_PATH = "/kafka-acl-changes"
EXTENDED_CHANGES_PATH = "/kafka-acl-extended-changes"
CHANGE_PREFIX = "acl_changes_"
# Kafka's ZkNodeChangeNotificationListener.changeExpirationMs.
CHANGE_EXPIRATION_S = 15 * 60
PURGE_INTERVAL_S = 60.0
# updateResourceAcls: retries on a concurrent change, with Kafka's backoff.
MAX_UPDATE_RETRIES = 10


class AclStoreError(Exception):
    """An ACL update that could not be written (concurrent writers kept winning)."""


@dataclass(frozen=True, slots=True)
class VersionedAcls:
    """A pattern's ACLs and its znode version (-1: no znode)."""

    acls: frozenset[AclEntry]
    version: int = -1

    @property
    def exists(self) -> bool:
        return self.version >= 0


NO_ACLS = VersionedAcls(frozenset(), -1)


# -- paths and formats -----------------------------------------------------------------------


def store_path(pattern_type: PatternType) -> str:
    """``/kafka-acl`` for literal patterns, ``/kafka-acl-extended/<type>`` otherwise."""
    if pattern_type == PatternType.LITERAL:
        return LITERAL_ACL_PATH
    return f"{EXTENDED_ACL_PATH}/{pattern_type.name.lower()}"


def acl_path(pattern: ResourcePattern) -> str:
    return f"{store_path(pattern.pattern_type)}/{pattern.resource_type.zk_name}/{pattern.name}"


def encode_acls(acls: Iterable[AclEntry]) -> bytes:
    ordered = sorted(acls, key=lambda e: (e.principal, e.host, e.operation, e.permission))
    return json.dumps(
        {"version": 1, "acls": [entry.to_json() for entry in ordered]}, separators=(",", ":")
    ).encode()


def decode_acls(data: bytes | None) -> frozenset[AclEntry]:
    """A resource znode's ACLs (``AclEntry.fromBytes``); ValueError when unreadable."""
    if not data:
        return frozenset()
    try:
        document = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"ACL znode is not JSON: {error}") from error
    if not isinstance(document, dict) or document.get("version") != 1:
        raise ValueError("ACL znode without version 1")
    try:
        return frozenset(AclEntry.from_json(item) for item in document["acls"])
    except (KeyError, TypeError) as error:
        raise ValueError(f"malformed ACL entry: {error!r}") from error


def encode_change(pattern: ResourcePattern) -> tuple[str, bytes]:
    """The change notification of one pattern: (sequential path prefix, content)."""
    if pattern.pattern_type == PatternType.LITERAL:
        content = f"{pattern.resource_type.name}:{pattern.name}".encode()
        return f"{LITERAL_CHANGES_PATH}/{CHANGE_PREFIX}", content
    document = {
        "version": 1,
        "resourceType": pattern.resource_type.name,
        "name": pattern.name,
        "patternType": pattern.pattern_type.name,
    }
    return f"{EXTENDED_CHANGES_PATH}/{CHANGE_PREFIX}", json.dumps(document).encode()


def decode_change(changes_path: str, data: bytes) -> ResourcePattern:
    """A notification's pattern; ValueError when it names nothing Gregor knows."""
    text = data.decode("utf-8")
    if changes_path == LITERAL_CHANGES_PATH:
        kind, separator, name = text.partition(":")
        if not separator:
            raise ValueError(f"expected ResourceType:ResourceName, got {text!r}")
        pattern = ResourcePattern(resource_type_named(kind), name, PatternType.LITERAL)
    else:
        event = json.loads(text)
        if not isinstance(event, dict) or event.get("version", 0) > 1:
            raise ValueError(f"unsupported ACL change event {text!r}")
        pattern = ResourcePattern(
            resource_type_named(str(event["resourceType"])),
            str(event["name"]),
            pattern_type_named(str(event["patternType"])),
        )
    if pattern.resource_type not in RESOURCE_TYPES or pattern.pattern_type not in (
        PatternType.LITERAL,
        PatternType.PREFIXED,
    ):
        raise ValueError(f"ACL change for an unknown resource: {text!r}")
    return pattern


# -- reads ------------------------------------------------------------------------------------


def ensure_acl_paths(client: KazooClient) -> None:
    """Kafka's ``createAclPaths``: both stores with a child per resource type, and both
    change paths."""
    for pattern_type in (PatternType.LITERAL, PatternType.PREFIXED):
        for resource_type in RESOURCE_TYPES:
            client.ensure_path(f"{store_path(pattern_type)}/{resource_type.zk_name}")
    client.ensure_path(LITERAL_CHANGES_PATH)
    client.ensure_path(EXTENDED_CHANGES_PATH)


def read_acls(client: KazooClient, pattern: ResourcePattern) -> VersionedAcls:
    try:
        data, stat = client.get(acl_path(pattern))
    except NoNodeError:
        return NO_ACLS
    try:
        return VersionedAcls(decode_acls(data), stat.version)
    except ValueError as error:
        log.warning("ignoring unreadable ACLs at %s: %s", acl_path(pattern), error)
        return VersionedAcls(frozenset(), stat.version)


def load_all_acls(client: KazooClient) -> dict[ResourcePattern, VersionedAcls]:
    """Every stored pattern with ACLs (``AclAuthorizer.loadAllAcls``); unknown resource
    types are skipped with a warning, as Kafka does."""
    found: dict[ResourcePattern, VersionedAcls] = {}
    for pattern_type in (PatternType.LITERAL, PatternType.PREFIXED):
        root = store_path(pattern_type)
        try:
            type_names = client.get_children(root)
        except NoNodeError:
            continue
        for type_name in type_names:
            resource_type = resource_type_named(type_name)
            if resource_type not in RESOURCE_TYPES:
                log.warning("ignoring unknown ACL resource type %s under %s", type_name, root)
                continue
            try:
                names = client.get_children(f"{root}/{type_name}")
            except NoNodeError:
                continue
            for name in names:
                pattern = ResourcePattern(resource_type, name, pattern_type)
                versioned = read_acls(client, pattern)
                if versioned.acls:
                    found[pattern] = versioned
    return found


# -- writes -----------------------------------------------------------------------------------


def update_resource_acls(
    client: KazooClient,
    pattern: ResourcePattern,
    change: Callable[[frozenset[AclEntry]], frozenset[AclEntry]],
    current: VersionedAcls | None = None,
) -> tuple[VersionedAcls, bool]:
    """Apply ``change`` to one pattern's ACLs with a conditional write, retrying on a
    concurrent writer (``updateResourceAcls``); returns the new ACLs and whether they
    changed. A change is announced with a notification; a pattern left empty loses its
    znode. ``current``: the caller's cached copy (read from ZooKeeper when None)."""
    versioned = read_acls(client, pattern) if current is None else current
    path = acl_path(pattern)
    for _attempt in range(MAX_UPDATE_RETRIES + 1):
        new_acls = frozenset(change(versioned.acls))
        try:
            if new_acls:
                data = encode_acls(new_acls)
                if versioned.exists:
                    stat = client.set(path, data, version=versioned.version)
                    new_version = stat.version
                else:
                    client.create(path, data, makepath=True)
                    new_version = 0
            else:
                if versioned.exists:
                    with contextlib.suppress(NoNodeError):
                        client.delete(path, version=versioned.version)
                new_version = -1
        except (BadVersionError, NodeExistsError, NoNodeError):
            time.sleep((100 + random.randrange(50)) / 1000)
            versioned = read_acls(client, pattern)
            continue
        updated = VersionedAcls(new_acls, new_version)
        changed = new_acls != versioned.acls
        if changed:
            notify_change(client, pattern)
        return updated, changed
    raise AclStoreError(
        f"Failed to update ACLs for {pattern} after trying a maximum of {MAX_UPDATE_RETRIES} times"
    )


def notify_change(client: KazooClient, pattern: ResourcePattern) -> str:
    prefix, content = encode_change(pattern)
    return client.create(prefix, content, sequence=True, makepath=True)


def add_acls(
    client: KazooClient,
    bindings: Sequence[AclBinding],
    cached: Callable[[ResourcePattern], VersionedAcls | None] = lambda _p: None,
) -> list[Exception | None]:
    """CreateAcls: one result per binding, None when it is stored (already present
    counts), a ValueError for an invalid binding, another error when ZooKeeper failed.
    Bindings of one pattern are written together."""
    results: list[Exception | None] = [None] * len(bindings)
    by_pattern: dict[ResourcePattern, list[int]] = {}
    for index, binding in enumerate(bindings):
        try:
            validate_binding(binding)
        except ValueError as error:
            results[index] = error
            continue
        by_pattern.setdefault(binding.pattern, []).append(index)
    for pattern, indexes in by_pattern.items():
        entries = frozenset(bindings[i].entry for i in indexes)
        try:
            update_resource_acls(client, pattern, entries.union, cached(pattern))
        except Exception as error:  # ZooKeeper unreachable, retries exhausted
            for index in indexes:
                results[index] = error
    return results


def remove_acls(
    client: KazooClient,
    filters: Sequence[AclBindingFilter],
    known_patterns: Iterable[ResourcePattern],
    cached: Callable[[ResourcePattern], VersionedAcls | None] = lambda _p: None,
) -> list[list[tuple[AclBinding, Exception | None]]]:
    """DeleteAcls: per filter, the bindings it deleted (and the error that stopped a
    deletion). Candidates are ``known_patterns`` (the broker's cache, or everything
    stored for the CLI) and the patterns a definite filter names, as Kafka does."""
    candidates = set(known_patterns)
    for binding_filter in filters:
        if binding_filter.pattern.indefinite() is None and not binding_filter.unknown():
            candidates.update(binding_filter.pattern.patterns())
    results: list[list[tuple[AclBinding, Exception | None]]] = [[] for _ in filters]
    for pattern in sorted(candidates):
        matching = [
            (index, f)
            for index, f in enumerate(filters)
            if not f.unknown() and f.pattern.matches(pattern)
        ]
        if not matching:
            continue
        removed: dict[AclEntry, int] = {}
        error: Exception | None = None
        try:
            update_resource_acls(client, pattern, _Remover(matching, removed), cached(pattern))
        except Exception as failure:
            error = failure
        for entry, index in removed.items():
            results[index].append((AclBinding(pattern, entry), error))
    return results


class _Remover:
    """The change of one pattern's ACLs for DeleteAcls: drops what the filters match and
    records which filter matched each entry (the last attempt's, after retries)."""

    def __init__(
        self, filters: list[tuple[int, AclBindingFilter]], removed: dict[AclEntry, int]
    ) -> None:
        self.filters = filters
        self.removed = removed

    def __call__(self, acls: frozenset[AclEntry]) -> frozenset[AclEntry]:
        self.removed.clear()
        for entry in acls:
            for index, binding_filter in self.filters:
                if binding_filter.entry.matches(entry):
                    self.removed.setdefault(entry, index)
        return acls - self.removed.keys()


def list_acls(
    client: KazooClient, binding_filter: AclBindingFilter | None = None
) -> list[AclBinding]:
    """Every stored binding the filter matches, read from ZooKeeper (the CLI's view)."""
    found = []
    for pattern, versioned in sorted(load_all_acls(client).items()):
        for entry in sorted(versioned.acls, key=lambda e: (e.principal, e.host, e.operation)):
            binding = AclBinding(pattern, entry)
            if binding_filter is None or binding_filter.matches(binding):
                found.append(binding)
    return found


def set_principal_acls(
    client: KazooClient, principal: str, desired: Iterable[AclBinding]
) -> tuple[list[AclBinding], list[AclBinding]]:
    """Make ``principal``'s stored ACLs exactly ``desired`` (every binding must name that
    principal): add what is missing, remove what is no longer wanted, each with its
    notification. For a declarative owner of one principal's ACLs (the operator's User
    resource). Returns (added, removed); ValueError for an invalid or foreign binding."""
    wanted = set(desired)
    for binding in wanted:
        if binding.entry.principal != principal:
            raise ValueError(f"{binding} does not belong to {principal}")
        validate_binding(binding)
    current = {binding for binding in list_acls(client) if binding.entry.principal == principal}
    to_add = sorted(wanted - current, key=str)
    to_remove = sorted(current - wanted, key=str)
    for error in add_acls(client, to_add):
        if error is not None:
            raise error
    if to_remove:
        filters = [
            AclBindingFilter(
                ResourcePatternFilter(
                    b.pattern.resource_type, b.pattern.name, b.pattern.pattern_type
                ),
                AclEntryFilter(
                    b.entry.principal, b.entry.host, b.entry.operation, b.entry.permission
                ),
            )
            for b in to_remove
        ]
        for found in remove_acls(client, filters, {b.pattern for b in to_remove}):
            for _binding, error in found:
                if error is not None:
                    raise error
    return to_add, to_remove


# -- change notifications ---------------------------------------------------------------------


class AclChangeListener:
    """Calls ``on_change(pattern)`` for every ACL change notification made after it
    started, in sequence order, on kazoo's callback thread; purges notifications older
    than 15 minutes. Start it before loading the cache so no change falls in between
    (``AclAuthorizer.configure``)."""

    def __init__(self, client: KazooClient, on_change: Callable[[ResourcePattern], None]) -> None:
        self.client = client
        self.on_change = on_change
        self._stopped = False
        self._last: dict[str, int] = {}
        self._purged: dict[str, float] = {}
        self._lock = threading.Lock()

    def start(self) -> None:
        for path in (LITERAL_CHANGES_PATH, EXTENDED_CHANGES_PATH):
            self.client.ensure_path(path)
            existing = self.client.get_children(path)
            self._last[path] = max((_sequence(name) for name in existing), default=-1)
            ChildrenWatch(self.client, path, self._watcher(path))

    def stop(self) -> None:
        self._stopped = True

    def _watcher(self, path: str) -> Callable[[list[str]], bool]:
        def on_children(children: list[str]) -> bool:
            if self._stopped:
                return False
            with self._lock:
                self._process(path, children)
            return True

        return on_children

    def _process(self, path: str, children: list[str]) -> None:
        now = time.time()
        # Old notifications are looked at (one read each) at most once a minute.
        purge = now - self._purged.get(path, 0.0) >= PURGE_INTERVAL_S
        if purge:
            self._purged[path] = now
        for child in sorted(children, key=_sequence):
            sequence = _sequence(child)
            node = f"{path}/{child}"
            if sequence > self._last[path]:
                self._last[path] = sequence
                try:
                    data, stat = self.client.get(node)
                    pattern = decode_change(path, data)
                except NoNodeError:
                    continue
                except (ValueError, KeyError, UnicodeDecodeError) as error:
                    log.warning("ignoring ACL change notification %s: %s", node, error)
                    continue
                try:
                    self.on_change(pattern)
                except Exception:
                    log.exception("processing ACL change %s failed", node)
                continue
            if not purge:
                continue
            try:
                _data, stat = self.client.get(node)
                if now - stat.ctime / 1000 > CHANGE_EXPIRATION_S:
                    self.client.delete(node)
            except NoNodeError:
                pass


def _sequence(name: str) -> int:
    try:
        return int(name.rsplit("_", 1)[-1])
    except ValueError:
        return -1
