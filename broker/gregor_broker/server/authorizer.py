"""The broker's authorizer: Kafka's ``AclAuthorizer`` over the ACLs in ZooKeeper.

``authorizer.class.name=kafka.security.authorizer.AclAuthorizer`` turns it on; empty (the
default) keeps ``Authorizer``, which allows everything, so a broker without the key
behaves as before. Handlers ask ``broker.authorizer`` before acting, with the
operations and resources Kafka's ``KafkaApis`` asks about, and answer Kafka's
``*_AUTHORIZATION_FAILED`` codes.

The ACL cache (``security/acl.py``'s ``AclCache``) is loaded at start and kept current
by the change notifications of every writer (this broker, others, ``gregor acls``,
the operator), through ``cluster/acls.py``'s ``AclChangeListener``, started before
the load as Kafka does so that no change falls in between. Decisions are made on the
event loop from the cache, never from ZooKeeper.

Denials are counted per resource type (``gregor_authorization_denials_total``); when
``authorizer.audit.log.enable`` is true every decision is logged on
``kafka.authorizer.logger`` (Kafka's logger name): denials at INFO, allowed requests at
DEBUG, in Kafka's words.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol, TypeVar

from kazoo.client import KazooClient
from kio.schema.errors import ErrorCode

from ..cluster import acls as store
from ..config import BrokerConfig
from ..protocol.acl_operations import SUPPORTED_OPERATIONS, operations_field
from ..protocol.error_response import RequestFailed
from ..security.acl import (
    CLUSTER_NAME,
    AclBinding,
    AclBindingFilter,
    AclCache,
    AclOperation,
    ResourcePattern,
    ResourceType,
    parse_super_users,
)

log = logging.getLogger(__name__)
audit_log = logging.getLogger("kafka.authorizer.logger")

T = TypeVar("T")


class Session(Protocol):
    """What a decision needs of a request (``RequestContext`` satisfies it)."""

    @property
    def principal(self) -> str: ...

    @property
    def host(self) -> str: ...

    @property
    def api_key(self) -> int: ...

    @property
    def api_name(self) -> str: ...


class Authorizer:
    """No authorizer (``authorizer.class.name`` empty): every request is allowed."""

    enabled = False

    def __init__(self) -> None:
        # Refused requests per resource type name (Topic, Group, ...).
        self.denials: dict[str, int] = {}

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def authorize(
        self,
        session: Session,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
        *,
        log_if_allowed: bool = True,
        log_if_denied: bool = True,
    ) -> bool:
        return True

    def authorize_by_resource_type(
        self, session: Session, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        return True

    # Shorthands for KafkaApis' patterns ---------------------------------------------------

    def authorize_cluster(
        self, session: Session, operation: AclOperation, *, log_if_denied: bool = True
    ) -> bool:
        return self.authorize(
            session, operation, ResourceType.CLUSTER, CLUSTER_NAME, log_if_denied=log_if_denied
        )

    def authorized_operations(
        self, session: Session, resource_type: ResourceType, name: str
    ) -> int:
        """Kafka's ``authorizedOperations``: the 32-bit field of the supported operations
        the session may perform on the resource (decisions not logged)."""
        return operations_field(
            {
                operation
                for operation in SUPPORTED_OPERATIONS[resource_type]
                if self.authorize(
                    session,
                    operation,
                    resource_type,
                    name,
                    log_if_allowed=False,
                    log_if_denied=False,
                )
            }
        )

    def require_cluster(self, session: Session, operation: AclOperation) -> None:
        """Kafka's ``authorizeClusterOperation``: the whole request is refused with
        CLUSTER_AUTHORIZATION_FAILED (``RequestFailed``) unless allowed."""
        if not self.authorize_cluster(session, operation):
            raise RequestFailed(
                ErrorCode.cluster_authorization_failed,
                f"Request not authorized: {operation.zk_name} on the cluster",
            )

    def filter_authorized(
        self,
        session: Session,
        operation: AclOperation,
        resource_type: ResourceType,
        items: Iterable[T],
        name: Callable[[T], str] = str,  # type: ignore[assignment]
        *,
        log_if_denied: bool = True,
    ) -> set[str]:
        """The names among ``items`` the session may act on (each decided once, as
        Kafka's ``filterByAuthorized``)."""
        names = {name(item) for item in items}
        if not self.enabled:
            return names
        return {
            n
            for n in names
            if self.authorize(session, operation, resource_type, n, log_if_denied=log_if_denied)
        }


class AclAuthorizer(Authorizer):
    """Kafka's ``AclAuthorizer``: ACLs from ZooKeeper, ``super.users``,
    ``allow.everyone.if.no.acl.found``."""

    enabled = True

    def __init__(self, client: KazooClient, config: BrokerConfig) -> None:
        super().__init__()
        self.client = client
        self.cache = AclCache(
            parse_super_users(config.super_users), config.allow_everyone_if_no_acl_found
        )
        self.audit = config.authorizer_audit_log_enable
        if self.audit:
            audit_log.setLevel(logging.DEBUG)
        self._listener = store.AclChangeListener(client, self._on_change)

    def start(self) -> None:
        """Create Kafka's ACL paths, listen to changes, then load every ACL (blocking:
        the broker calls it before serving)."""
        store.ensure_acl_paths(self.client)
        self._listener.start()
        for pattern, versioned in store.load_all_acls(self.client).items():
            self.cache.update(pattern, versioned.acls)
        log.info(
            "ACL authorizer: %d ACLs loaded, super users %s",
            len(self.cache),
            sorted(self.cache.super_users) or "none",
        )

    def stop(self) -> None:
        self._listener.stop()

    def _on_change(self, pattern: ResourcePattern) -> None:
        """A change notification (kazoo's thread): re-read the pattern."""
        self.cache.update(pattern, store.read_acls(self.client, pattern).acls)

    # -- decisions --------------------------------------------------------------------------

    def authorize(
        self,
        session: Session,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
        *,
        log_if_allowed: bool = True,
        log_if_denied: bool = True,
    ) -> bool:
        allowed = self.cache.authorize(
            session.principal, session.host, operation, resource_type, name
        )
        if not allowed and log_if_denied:
            key = resource_type.zk_name
            self.denials[key] = self.denials.get(key, 0) + 1
        if self.audit:
            self._audit(
                session, operation, resource_type, name, allowed, log_if_allowed, log_if_denied
            )
        return allowed

    def authorize_by_resource_type(
        self, session: Session, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        allowed = self.cache.authorize_by_resource_type(
            session.principal, session.host, operation, resource_type
        )
        if self.audit:
            self._audit(session, operation, resource_type, "NONE", allowed, True, True)
        return allowed

    def _audit(
        self,
        session: Session,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
        allowed: bool,
        log_if_allowed: bool,
        log_if_denied: bool,
    ) -> None:
        """Kafka's ``logAuditMessage``: denials asked for explicitly at INFO, allowed
        requests at DEBUG, decisions made only to filter at a lower level."""
        level = (
            (logging.DEBUG if log_if_allowed else 5)
            if allowed
            else (logging.INFO if log_if_denied else 5)
        )
        if not audit_log.isEnabledFor(level):
            return
        audit_log.log(
            level,
            "Principal = %s is %s Operation = %s from host = %s on resource = %s:LITERAL:%s "
            "for request = %s with resourceRefCount = 1",
            session.principal,
            "Allowed" if allowed else "Denied",
            operation.zk_name,
            session.host,
            resource_type.zk_name,
            name,
            session.api_name or session.api_key,
        )

    # -- the ACL APIs -----------------------------------------------------------------------

    def acls(self, binding_filter: AclBindingFilter) -> list[AclBinding]:
        return list(self.cache.bindings(binding_filter))

    def create_acls(self, bindings: Sequence[AclBinding]) -> list[Exception | None]:
        """Blocking (ZooKeeper): run in a thread. The cache learns of the change at once,
        other brokers through the notification."""
        results = store.add_acls(self.client, bindings)
        self._refresh({b.pattern for b, r in zip(bindings, results, strict=True) if r is None})
        return results

    def delete_acls(
        self, filters: Sequence[AclBindingFilter]
    ) -> list[list[tuple[AclBinding, Exception | None]]]:
        """Blocking: candidates are the cached patterns (and what a definite filter
        names), as in Kafka."""
        results = store.remove_acls(self.client, filters, self.cache.patterns())
        self._refresh({binding.pattern for found in results for binding, _ in found})
        return results

    def _refresh(self, patterns: Iterable[ResourcePattern]) -> None:
        for pattern in patterns:
            self.cache.update(pattern, store.read_acls(self.client, pattern).acls)


def build_authorizer(config: BrokerConfig, client: KazooClient | None) -> Authorizer:
    """The authorizer ``authorizer.class.name`` names."""
    if not config.authorizer_class_name:
        return Authorizer()
    if client is None:
        raise ValueError("the ACL authorizer needs ZooKeeper")
    return AclAuthorizer(client, config)
