"""SaslHandshake (17), SaslAuthenticate (36), DescribeUserScramCredentials (50) and
AlterUserScramCredentials (51).

The SASL exchange itself runs in ``server/authentication.py`` before a connection
reaches the router; a SaslHandshake or SaslAuthenticate that gets here arrived on a
listener without SASL (or out of turn), and Kafka answers it ILLEGAL_SASL_STATE.

The SCRAM credential APIs read and write ``/config/users/<user>`` through
``cluster/scram_credentials.py`` with Kafka's validation and per-user results.
"""

from __future__ import annotations

import asyncio
from typing import Any

from kio.schema.errors import ErrorCode

from ...cluster.scram_credentials import (
    alter_scram_credentials,
    read_all_scram_credentials,
    read_scram_credentials,
    storable_user,
)
from ...protocol.requests import (
    AlterUserScramCredentialsRequest,
    DescribeUserScramCredentialsRequest,
    SaslAuthenticateRequest,
    SaslHandshakeRequest,
)
from ...protocol.response import BodyResponse
from ...security.acl import AclOperation
from ...security.scram import (
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    ScramCredential,
    credential_from_salted_password,
)
from ..request_router import RequestContext
from ..services import BrokerServices

# Kafka's ScramMechanism types on the wire.
MECHANISM_BY_TYPE = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
TYPE_BY_MECHANISM = {name: code for code, name in MECHANISM_BY_TYPE.items()}


def handle_sasl_handshake(
    broker: BrokerServices, context: RequestContext, request: SaslHandshakeRequest
) -> BodyResponse:
    return context.respond({"error_code": ErrorCode.illegal_sasl_state, "mechanisms": []})


def handle_sasl_authenticate(
    broker: BrokerServices, context: RequestContext, request: SaslAuthenticateRequest
) -> BodyResponse:
    body = {
        "error_code": ErrorCode.illegal_sasl_state,
        "error_message": "SaslAuthenticate request received while not authenticating",
        "auth_bytes": b"",
        "session_lifetime": 0,
    }
    return context.respond(body)


# -- DescribeUserScramCredentials ------------------------------------------------------------


async def handle_describe_user_scram_credentials(
    broker: BrokerServices, context: RequestContext, request: DescribeUserScramCredentialsRequest
) -> BodyResponse:
    broker.authorizer.require_cluster(context, AclOperation.DESCRIBE)
    wanted = None if request.users is None else [user.name for user in request.users]
    try:
        if wanted:
            found = await asyncio.to_thread(_read_users, broker, sorted(set(wanted)))
        else:
            found = await asyncio.to_thread(read_all_scram_credentials, broker.zk_admin)
    except Exception as error:  # ZooKeeper unreachable
        body = {
            "throttle_time": 0,
            "error_code": ErrorCode.unknown_server_error,
            "error_message": f"reading credentials from ZooKeeper failed: {error}",
            "results": [],
        }
        return context.respond(body)
    results = []
    names = list(dict.fromkeys(wanted)) if wanted else sorted(found)
    for name in names:
        if wanted and wanted.count(name) > 1:
            results.append(
                _describe_error(
                    name,
                    ErrorCode.duplicate_resource,
                    "Cannot describe SCRAM credentials for the same user twice in a single request",
                )
            )
            continue
        credentials = found.get(name)
        if not credentials:
            results.append(
                _describe_error(
                    name,
                    ErrorCode.resource_not_found,
                    "Attempt to describe a user credential that does not exist",
                )
            )
            continue
        results.append(
            {
                "user": name,
                "error_code": ErrorCode.none,
                "error_message": None,
                "credential_infos": [
                    {"mechanism": TYPE_BY_MECHANISM[m], "iterations": c.iterations}
                    for m, c in sorted(credentials.items())
                ],
            }
        )
    body = {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "error_message": None,
        "results": results,
    }
    return context.respond(body)


def _read_users(broker: BrokerServices, users: list[str]) -> dict[str, dict[str, ScramCredential]]:
    """The users' credentials; none for a name no znode can have (Kafka answers
    RESOURCE_NOT_FOUND for the empty name; "." and ".." were read as paths and failed)."""
    return {
        user: read_scram_credentials(broker.zk_admin, user) if storable_user(user) else {}
        for user in users
    }


def _describe_error(user: str, code: ErrorCode, message: str) -> dict[str, Any]:
    return {"user": user, "error_code": code, "error_message": message, "credential_infos": []}


# -- AlterUserScramCredentials ---------------------------------------------------------------


async def handle_alter_user_scram_credentials(
    broker: BrokerServices, context: RequestContext, request: AlterUserScramCredentialsRequest
) -> BodyResponse:
    broker.authorizer.require_cluster(context, AclOperation.ALTER)
    errors: dict[str, tuple[ErrorCode, str]] = {}
    upserts: dict[str, dict[str, ScramCredential]] = {}
    deletes: dict[str, list[str]] = {}
    seen: dict[str, set[str]] = {}
    order: list[str] = []

    def fail(user: str, code: ErrorCode, message: str) -> None:
        errors.setdefault(user, (code, message))

    changes = [(d, False) for d in request.deletions] + [(u, True) for u in request.upsertions]
    for change, is_upsert in changes:
        user = change.name
        if user not in order:
            order.append(user)
        mechanism = MECHANISM_BY_TYPE.get(int(change.mechanism))
        if not user:
            fail(user, ErrorCode.unacceptable_credential, "Username must not be empty")
            continue
        if not storable_user(user):
            fail(user, ErrorCode.unacceptable_credential, f"Username {user!r} cannot be stored")
            continue
        if mechanism is None:
            fail(user, ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism")
            continue
        if mechanism in seen.setdefault(user, set()):
            fail(
                user,
                ErrorCode.duplicate_resource,
                "A user credential cannot be altered twice in the same request",
            )
            continue
        seen[user].add(mechanism)
        if not is_upsert:
            deletes.setdefault(user, []).append(mechanism)
            continue
        iterations = int(change.iterations)
        if iterations < MIN_ITERATIONS:
            fail(user, ErrorCode.unacceptable_credential, "Too few iterations")
        elif iterations > MAX_ITERATIONS:
            fail(user, ErrorCode.unacceptable_credential, "Too many iterations")
        elif not change.salt or not change.salted_password:
            fail(user, ErrorCode.unacceptable_credential, "Salt and salted password must be given")
        else:
            upserts.setdefault(user, {})[mechanism] = credential_from_salted_password(
                mechanism, bytes(change.salted_password), bytes(change.salt), iterations
            )
    results = []
    for user in order:
        if user in errors:
            code, message = errors[user]
            results.append({"user": user, "error_code": code, "error_message": message})
            continue
        try:
            code, message = await asyncio.to_thread(
                _alter_one, broker, user, upserts.get(user, {}), tuple(deletes.get(user, ()))
            )
        except Exception as error:  # ZooKeeper unreachable
            code, message = ErrorCode.unknown_server_error, f"writing to ZooKeeper failed: {error}"
        results.append({"user": user, "error_code": code, "error_message": message})
    return context.respond({"throttle_time": 0, "results": results})


def _alter_one(
    broker: BrokerServices,
    user: str,
    upsert: dict[str, ScramCredential],
    delete: tuple[str, ...],
) -> tuple[ErrorCode, str | None]:
    if delete:
        existing = read_scram_credentials(broker.zk_admin, user)
        if any(mechanism not in existing for mechanism in delete):
            return (
                ErrorCode.resource_not_found,
                "Attempt to delete a user credential that does not exist",
            )
    alter_scram_credentials(broker.zk_admin, user, upsert, delete)
    return ErrorCode.none, None
