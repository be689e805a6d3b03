"""Topic name rules, as Kafka's ``Topic.validate`` states them."""

from __future__ import annotations

import re

MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")


def topic_name_error(name: str | None) -> str | None:
    """Why ``name`` cannot be a topic name, or None when it can."""
    if not name:
        return "topic name is empty"
    if name in (".", ".."):
        return f"topic name cannot be {name!r}"
    if len(name) > MAX_NAME_LENGTH:
        return f"topic name is {len(name)} characters; the limit is {MAX_NAME_LENGTH}"
    if not _LEGAL.match(name):
        return (
            f"topic name {name!r} is illegal: only ASCII letters, digits, '.', '_' and '-' "
            "are allowed"
        )
    return None
