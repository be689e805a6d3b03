"""User resources → a SCRAM credential and quotas in ``/config/users/<user>`` and the
user's ACLs in ``/kafka-acl*`` (planned by ``planners/users.py``).

create/update/resume and a timer (every status interval): find the password (the Secret
the spec names, or the generated Secret, created on first use and owned by the User),
write the credential when the stored one is not made from that password (a rotated
Secret takes effect at the next tick), the quotas, and exactly the ACLs the spec lists;
status says what is in place. Nothing is written when nothing changed.

delete: the credentials (both mechanisms), the quotas and every ACL of the principal are
removed; the generated Secret goes with the User (owner reference). When ZooKeeper or the
cluster is gone the finalizer is released after bounded retries with a Warning event
naming the commands that clean up by hand, so a namespace deletion never wedges.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

import kopf

from gregor_broker.cluster.acls import set_principal_acls
from gregor_broker.cluster.admin import ZkAdmin
from gregor_broker.cluster.client_quotas import QUOTA_KEYS, alter_quota_config
from gregor_broker.cluster.scram_credentials import (
    alter_scram_credentials,
    read_scram_credentials,
    user_entity_path,
)
from gregor_broker.security.acl import AclBinding
from gregor_broker.security.scram import MECHANISMS, credential_from_password
from gregor_operator import metrics
from gregor_operator.handlers.common import GROUP, VERSION, ClusterNotFound, Context, cluster_of
from gregor_operator.planners.users import (
    PASSWORD_KEY,
    UserPlan,
    credential_matches,
    generated_secret,
    new_password,
    other_mechanisms,
    owned_by,
    plan_user,
    secret_value,
)
from gregor_operator.status import conditions
from gregor_operator.zookeeper import CONNECTION_ERRORS, ZooKeeperUnavailable

log = logging.getLogger(__name__)
UNAVAILABLE = (ZooKeeperUnavailable, ClusterNotFound, *CONNECTION_ERRORS)


class PasswordUnavailable(Exception):
    """The password's Secret is missing, not ours, or lacks the key (reason, message)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def password_of(ctx: Context, body: Any, plan: UserPlan) -> tuple[str, str]:
    """``(password, Secret name)``: from the named Secret, or the generated one (created
    now when absent)."""
    namespace, name = body["metadata"]["namespace"], body["metadata"]["name"]
    uid = body["metadata"].get("uid", "")
    kube = ctx.kube()
    if plan.password_ref is not None:
        secret_name, key = plan.password_ref
        secret = kube.get("Secret", namespace, secret_name)
        if secret is None:
            raise PasswordUnavailable(
                "SecretNotFound",
                f"User {namespace}/{name}: Secret {namespace}/{secret_name} "
                "(spec.authentication.password.valueFrom.secretKeyRef) does not exist; create it",
            )
        password = secret_value(secret, key)
        if not password:
            raise PasswordUnavailable(
                "SecretKeyNotFound",
                f"User {namespace}/{name}: Secret {namespace}/{secret_name} has no key {key!r}",
            )
        return password, secret_name
    assert plan.generated_secret is not None
    secret = kube.get("Secret", namespace, plan.generated_secret)
    if secret is None:
        password = new_password()
        kube.create(generated_secret(namespace, name, uid, plan.username, password))
        kopf.info(body, reason="SecretCreated", message=f"generated Secret {plan.generated_secret}")
        return password, plan.generated_secret
    if not owned_by(secret, uid):
        raise PasswordUnavailable(
            "SecretConflict",
            f"User {namespace}/{name}: Secret {namespace}/{plan.generated_secret} exists and "
            "is not owned by this User; delete it, or name it in "
            "spec.authentication.password.valueFrom.secretKeyRef",
        )
    password = secret_value(secret, PASSWORD_KEY)
    if not password:
        raise PasswordUnavailable(
            "SecretKeyNotFound",
            f"User {namespace}/{name}: the generated Secret {plan.generated_secret} has no "
            f"{PASSWORD_KEY!r} key; delete the Secret to have a new password generated",
        )
    return password, plan.generated_secret


def apply_user(admin: ZkAdmin, plan: UserPlan, password: str) -> list[str]:
    """Write what differs from ZooKeeper; returns what was changed (for events and logs)."""
    done = []
    stored = read_scram_credentials(admin, plan.username)
    stale = tuple(m for m in other_mechanisms(plan.mechanism) if m in stored)
    found = stored.get(plan.mechanism)
    current = (
        found is not None
        and found.iterations == plan.iterations
        and credential_matches(found, plan.mechanism, password)
    )
    if stale or not current:
        upsert = {}
        if not current:
            upsert[plan.mechanism] = credential_from_password(
                plan.mechanism, password, iterations=plan.iterations
            )
            done.append(f"set {plan.mechanism} credential of {plan.username}")
        alter_scram_credentials(admin, plan.username, upsert, delete=stale)
        if stale:
            done.append(f"removed {', '.join(stale)} credential of {plan.username}")
    done += _apply_quotas(admin, plan.username, plan.quotas)
    done += _apply_acls(admin, plan.principal, plan.acls)
    return done


def _apply_quotas(admin: ZkAdmin, username: str, quotas: dict[str, float | None]) -> list[str]:
    current = admin.get_entity_config(user_entity_path(username))
    wanted = {key: value for key, value in quotas.items() if value is not None}
    try:
        present = {key: float(current[key]) for key in QUOTA_KEYS if key in current}
    except ValueError:  # a value written by hand that is not a number: rewrite it
        present = {}
    if present == wanted:
        return []
    config = alter_quota_config(admin, (username, None), quotas)
    shown = {key: config[key] for key in QUOTA_KEYS if key in config}
    return [f"set quotas of user {username} to {shown}"]


def _apply_acls(admin: ZkAdmin, principal: str, wanted: dict) -> list[str]:
    """The principal's ACLs made exactly ``wanted`` (``cluster/acls.set_principal_acls``:
    other principals' entries on the same patterns are kept)."""
    bindings = [AclBinding(pattern, entry) for pattern, entries in wanted.items()
                for entry in entries]  # fmt: skip
    added, removed = set_principal_acls(admin.client, principal, bindings)
    return [f"added ACL {binding}" for binding in added] + [
        f"removed ACL {binding}" for binding in removed
    ]


def remove_user(admin: ZkAdmin, username: str) -> None:
    """Credentials, quotas and every ACL of the user."""
    stored = read_scram_credentials(admin, username)
    if stored:
        alter_scram_credentials(admin, username, {}, delete=tuple(MECHANISMS))
    current = admin.get_entity_config(user_entity_path(username))
    if any(key in current for key in QUOTA_KEYS):
        alter_quota_config(admin, (username, None), dict.fromkeys(QUOTA_KEYS))
    _apply_acls(admin, f"User:{username}", {})


def register(registry: kopf.OperatorRegistry, ctx: Context) -> None:
    def reconcile(body: Any, patch: Any, gregor_clusters: Any, announce: bool) -> None:
        namespace, name = body["metadata"]["namespace"], body["metadata"]["name"]
        spec, status = body.get("spec") or {}, body.get("status") or {}
        previous = status.get("conditions")
        plan = plan_user(namespace, name, spec)
        if not plan.refused and status.get("username") not in (None, plan.username):
            plan = UserPlan(
                refused=f"User {namespace}/{name}: spec.userName is immutable (it manages "
                f"{status['username']}); create another User for another Kafka user"
            )
        patch.status["observedGeneration"] = body["metadata"].get("generation")
        if plan.refused:
            patch.status["conditions"] = conditions(
                previous, ready=False, error=plan.refused, reason="Refused"
            )
            if announce:
                kopf.warn(body, reason="PlanRefused", message=plan.refused)
                metrics.PLANS.labels("User", "refused").inc()
            return
        # One reconcile of a User at a time: the handler and the timer would otherwise both
        # generate a password and create the Secret.
        lock = ctx.locks[body["metadata"].get("uid", f"{namespace}/{name}")]
        try:
            with lock:
                password, secret = password_of(ctx, body, plan)
                _, connect, _ = cluster_of(ctx, namespace, spec, gregor_clusters)
                done = apply_user(ctx.sessions.admin(connect), plan, password)
        except PasswordUnavailable as error:
            patch.status["conditions"] = conditions(
                previous, ready=False, error=str(error), reason=error.reason
            )
            raise kopf.TemporaryError(str(error), delay=ctx.config.status_interval) from error
        except UNAVAILABLE as error:
            message = f"User {namespace}/{name}: {error}"
            reason = "ClusterNotFound" if isinstance(error, ClusterNotFound) else (
                "ZooKeeperUnavailable"
            )  # fmt: skip
            patch.status["conditions"] = conditions(
                previous, ready=False, error=message, reason=reason
            )
            raise kopf.TemporaryError(message, delay=ctx.config.status_interval) from error
        for message in done:
            log.info("user %s/%s: %s", namespace, name, message)
            kopf.info(body, reason="PlanApplied", message=message)
            metrics.PLANS.labels("User", "applied").inc()
        patch.status.update(
            username=plan.username,
            mechanism=plan.mechanism,
            secret=secret,
            acls=sum(len(entries) for entries in plan.acls.values()),
        )
        patch.status["conditions"] = conditions(
            previous,
            ready=True,
            message=f"{plan.username} logs in with {plan.mechanism} (password in Secret "
            f"{secret}); {sum(len(e) for e in plan.acls.values())} ACLs",
        )

    @kopf.on.create(GROUP, VERSION, "users", registry=registry)
    @kopf.on.update(GROUP, VERSION, "users", field="spec", registry=registry)
    @kopf.on.resume(GROUP, VERSION, "users", registry=registry)
    def reconcile_user(body: Any, patch: Any, gregor_clusters: Any, **_: Any):
        reconcile(body, patch, gregor_clusters, announce=True)

    @kopf.timer(GROUP, VERSION, "users", interval=ctx.config.status_interval, registry=registry)
    def refresh_user(body: Any, patch: Any, gregor_clusters: Any, **_: Any):
        """Rotated Secrets and changes made outside the resource are put right."""
        if body["metadata"].get("deletionTimestamp"):
            return
        with contextlib.suppress(kopf.TemporaryError):  # the status says why; it runs again
            reconcile(body, patch, gregor_clusters, announce=False)

    @kopf.on.delete(GROUP, VERSION, "users", registry=registry)
    def delete_user(
        body: Any, spec: Any, status: Any, namespace: str, name: str, retry: int,
        gregor_clusters: Any, **_: Any,
    ):  # fmt: skip
        username = status.get("username") or spec.get("userName") or name
        try:
            _, connect, _ = cluster_of(ctx, namespace, spec, gregor_clusters)
            remove_user(ctx.sessions.admin(connect), username)
            kopf.info(
                body, reason="PlanApplied",
                message=f"removed the credentials, quotas and ACLs of {username}",
            )  # fmt: skip
        except UNAVAILABLE as error:
            if retry + 1 < ctx.config.finalizer_retries:
                raise kopf.TemporaryError(
                    str(error), delay=ctx.config.finalizer_retry_delay
                ) from error
            message = (
                f"User {namespace}/{name}: finalizer released after {retry + 1} attempts "
                f"without removing user {username}: {error}. If the cluster still exists, "
                f"remove it with: gregor users scram delete {username}; gregor quotas delete "
                f"--user {username}; and its ACLs (principal User:{username}) with gregor acls "
                "remove or kafka-acls --remove"
            )
            log.warning(message)
            kopf.warn(body, reason="FinalizerReleased", message=message)
