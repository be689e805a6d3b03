"""Kubernetes conditions as the operator writes them: ``Ready``, ``Reconciling``, ``Error``.

Owns the condition list's shape (type, status, reason, message, lastTransitionTime, kept
when the status does not change); not what the conditions say (the handlers decide).
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping
from typing import Any


def now() -> str:
    return datetime.datetime.now(tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def conditions(
    previous: Iterable[Mapping[str, Any]] | None,
    *,
    ready: bool,
    reconciling: bool = False,
    error: str | None = None,
    reason: str = "",
    message: str = "",
) -> list[dict[str, Any]]:
    """The three conditions, keeping each one's lastTransitionTime while its status holds."""
    before = {c.get("type"): c for c in previous or ()}
    wanted = [
        ("Ready", ready, reason or ("Reconciled" if ready else "NotReady"), message),
        ("Reconciling", reconciling, reason if reconciling else "", message if reconciling else ""),
        ("Error", error is not None, reason if error else "", error or ""),
    ]
    result = []
    for kind, flag, why, text in wanted:
        status = "True" if flag else "False"
        old = before.get(kind, {})
        result.append(
            {
                "type": kind,
                "status": status,
                "reason": why or ("None" if not flag else kind),
                "message": text,
                "lastTransitionTime": old.get("lastTransitionTime", now())
                if old.get("status") == status
                else now(),
            }
        )
    return result


def condition(status: Mapping[str, Any] | None, kind: str) -> dict[str, Any] | None:
    for entry in (status or {}).get("conditions") or ():
        if entry.get("type") == kind:
            return dict(entry)
    return None
