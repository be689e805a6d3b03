"""What a User resource asks for, as plain data (like Strimzi's KafkaUser).

- **authentication**: a SCRAM credential for one mechanism (``scram-sha-512`` or
  ``scram-sha-256``), its password from a Secret the user names
  (``password.valueFrom.secretKeyRef``) or from a Secret the operator generates, named like
  the resource and owned by it (``password`` and ``sasl.jaas.config`` keys, as Strimzi's).
  The credential lives in ``/config/users/<user>`` (``cluster/scram_credentials.py``); the
  other mechanism's credential is removed, so the resource says exactly how the user logs in.
- **quotas**: ``producer_byte_rate``, ``consumer_byte_rate``, ``request_percentage`` of the
  user entity (``users/<user>``), Kafka's format (``cluster/client_quotas.py``); keys the
  spec leaves out are removed.
- **authorization.acls**: every ACL of principal ``User:<user>``. The User owns them all:
  ACLs of that principal that the spec does not list are deleted
  (``cluster/acls.set_principal_acls``).

Pure: the handler (``handlers/users.py``) reads and writes ZooKeeper and the Secret.
"""

from __future__ import annotations

import base64
import secrets
import string
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gregor_broker.cluster.client_quotas import QUOTA_KEYS
from gregor_broker.cluster.zk_paths import DEFAULT_ENTITY
from gregor_broker.protocol.acl_operations import AclOperation, AclPermissionType, PatternType
from gregor_broker.security.acl import (
    CLUSTER_NAME,
    AclBinding,
    AclEntry,
    ResourcePattern,
    ResourceType,
    operation_named,
    resource_type_named,
    validate_binding,
)
from gregor_broker.security.scram import (
    DEFAULT_ITERATIONS,
    MAX_ITERATIONS,
    MECHANISMS,
    MIN_ITERATIONS,
    ScramCredential,
    credential_from_password,
)
from gregor_operator.planners.quotas import SPEC_KEYS

AUTHENTICATION_TYPES = {"scram-sha-512": "SCRAM-SHA-512", "scram-sha-256": "SCRAM-SHA-256"}
PATTERN_TYPES = {
    "literal": PatternType.LITERAL,
    "prefix": PatternType.PREFIXED,
    "prefixed": PatternType.PREFIXED,
}
PASSWORD_KEY = "password"
JAAS_KEY = "sasl.jaas.config"
PASSWORD_LENGTH = 32


@dataclass(frozen=True)
class UserPlan:
    username: str = ""
    mechanism: str = ""
    iterations: int = DEFAULT_ITERATIONS
    # (Secret name, key) named by the spec; None: the generated Secret ``generated_secret``.
    password_ref: tuple[str, str] | None = None
    generated_secret: str | None = None
    # Every quota key: its value, or None to remove it.
    quotas: dict[str, float | None] = field(default_factory=dict)
    acls: dict[ResourcePattern, frozenset[AclEntry]] = field(default_factory=dict)
    refused: str | None = None

    @property
    def principal(self) -> str:
        return f"User:{self.username}"


def plan_user(namespace: str, name: str, spec: Mapping[str, Any]) -> UserPlan:
    """The credential, quotas and ACLs a User's spec asks for (``refused``: why not)."""
    what = f"User {namespace}/{name}"

    def refuse(problem: str) -> UserPlan:
        return UserPlan(refused=f"{what}: {problem}")

    username = spec.get("userName") or name
    if username == DEFAULT_ENTITY:
        return refuse(f"the user name {DEFAULT_ENTITY!r} is reserved for default quotas")
    authentication = spec.get("authentication") or {}
    kind = str(authentication.get("type") or "scram-sha-512").lower()
    if kind not in AUTHENTICATION_TYPES:
        return refuse(
            f"spec.authentication.type {kind!r} is not supported; use "
            f"{' or '.join(AUTHENTICATION_TYPES)}"
        )
    iterations = int(authentication.get("iterations") or DEFAULT_ITERATIONS)
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        return refuse(
            f"spec.authentication.iterations must be {MIN_ITERATIONS} to {MAX_ITERATIONS} "
            f"(Kafka's bounds), not {iterations}"
        )
    reference = ((authentication.get("password") or {}).get("valueFrom") or {}).get("secretKeyRef")
    password_ref = None
    if reference:
        if not reference.get("name"):
            return refuse("spec.authentication.password.valueFrom.secretKeyRef needs a name")
        password_ref = (reference["name"], reference.get("key") or PASSWORD_KEY)
    quotas: dict[str, float | None] = dict.fromkeys(QUOTA_KEYS)
    for spec_key, kafka_key in SPEC_KEYS.items():
        value = (spec.get("quotas") or {}).get(spec_key)
        if value is None:
            continue
        if float(value) <= 0:
            return refuse(f"spec.quotas.{spec_key} must be positive, not {value}")
        quotas[kafka_key] = float(value)
    acls, problem = _acls(f"User:{username}", (spec.get("authorization") or {}).get("acls"))
    if problem:
        return refuse(problem)
    return UserPlan(
        username=username,
        mechanism=AUTHENTICATION_TYPES[kind],
        iterations=iterations,
        password_ref=password_ref,
        generated_secret=None if password_ref else name,
        quotas=quotas,
        acls=acls,
    )


def _acls(
    principal: str, items: Any
) -> tuple[dict[ResourcePattern, frozenset[AclEntry]], str | None]:
    found: dict[ResourcePattern, set[AclEntry]] = {}
    for index, item in enumerate(items or ()):
        where = f"spec.authorization.acls[{index}]"
        resource = item.get("resource") or {}
        resource_type = resource_type_named(str(resource.get("type") or ""))
        if resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
            return {}, (
                f"{where}.resource.type {resource.get('type')!r} is not one of topic, group, "
                "cluster, transactionalId, delegationToken"
            )
        default_name = CLUSTER_NAME if resource_type == ResourceType.CLUSTER else None
        pattern_name = str(resource.get("patternType") or "literal").lower()
        if pattern_name not in PATTERN_TYPES:
            return {}, f"{where}.resource.patternType must be literal or prefix"
        pattern = ResourcePattern(
            resource_type, resource.get("name") or default_name or "", PATTERN_TYPES[pattern_name]
        )
        permission = str(item.get("type") or "allow").lower()
        if permission not in ("allow", "deny"):
            return {}, f"{where}.type must be allow or deny, not {item.get('type')!r}"
        operations = item.get("operations") or []
        if not operations:
            return {}, f"{where}.operations is empty"
        for text in operations:
            operation = operation_named(str(text))
            if operation in (AclOperation.UNKNOWN, AclOperation.ANY):
                return {}, f"{where}.operations: unknown operation {text!r}"
            entry = AclEntry(
                principal,
                str(item.get("host") or "*"),
                operation,
                AclPermissionType.ALLOW if permission == "allow" else AclPermissionType.DENY,
            )
            try:
                validate_binding(AclBinding(pattern, entry))
            except ValueError as error:
                return {}, f"{where}: {error}"
            found.setdefault(pattern, set()).add(entry)
    return {pattern: frozenset(entries) for pattern, entries in found.items()}, None


def credential_matches(credential: ScramCredential | None, mechanism: str, password: str) -> bool:
    """Whether a stored credential is the one ``password`` makes (with its own salt and
    iterations): then nothing is rewritten, and no notification wakes the brokers."""
    if credential is None:
        return False
    again = credential_from_password(
        mechanism, password, iterations=credential.iterations, salt=credential.salt
    )
    return secrets.compare_digest(again.stored_key, credential.stored_key)


def new_password() -> str:
    alphabet = string.ascii_letters + string.digits
    return "".join(secrets.choice(alphabet) for _ in range(PASSWORD_LENGTH))


def jaas_config(username: str, password: str) -> str:
    """The client login line Kafka's clients take in ``sasl.jaas.config``."""
    escaped = password.replace("\\", "\\\\").replace('"', '\\"')
    return (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{username}" password="{escaped}";'
    )


def generated_secret(
    namespace: str, name: str, uid: str, username: str, password: str
) -> dict[str, Any]:
    """The Secret the operator makes when the spec names none: owned by the User (the API
    server deletes it with the User), holding the password and a ready JAAS line."""

    def encoded(text: str) -> str:
        return base64.b64encode(text.encode()).decode()

    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/managed-by": "gregor-operator", "gregor.dev/user": name},
            "ownerReferences": [
                {
                    "apiVersion": "gregor.dev/v1alpha1",
                    "kind": "User",
                    "name": name,
                    "uid": uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "data": {
            PASSWORD_KEY: encoded(password),
            JAAS_KEY: encoded(jaas_config(username, password)),
        },
    }


def owned_by(secret: Mapping[str, Any], uid: str) -> bool:
    return any(
        ref.get("uid") == uid for ref in secret.get("metadata", {}).get("ownerReferences") or ()
    )


def secret_value(secret: Mapping[str, Any], key: str) -> str | None:
    data = (secret.get("data") or {}).get(key)
    if data is not None:
        return base64.b64decode(data).decode()
    return (secret.get("stringData") or {}).get(key)


def other_mechanisms(mechanism: str) -> tuple[str, ...]:
    return tuple(m for m in MECHANISMS if m != mechanism)
