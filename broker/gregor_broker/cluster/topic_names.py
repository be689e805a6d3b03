"""Topic name rules, as Kafka's ``Topic.validate`` states them, with its messages.

The one topic-name validator: the request handlers (CreateTopics, Metadata's auto-create,
partition admin) ask ``topic_name_error`` and ``ZkAdmin`` (CLI, operator) raises it as
``InvalidTopic``.
"""

from __future__ import annotations

import re

MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")


def topic_name_error(name: str | None) -> str | None:
    """Why ``name`` cannot be a topic name (Kafka's message), or None when it can."""
    if not name:
        return "Topic name is illegal, it can't be empty"
    if name in (".", ".."):
        return f"Topic name cannot be {name!r}"
    if len(name) > MAX_NAME_LENGTH:
        return (
            f"Topic name {name[:40]}... is illegal, it can't be longer than "
            f"{MAX_NAME_LENGTH} characters, length: {len(name)}"
        )
    if not _LEGAL.fullmatch(name):
        return (
            f"Topic name {name!r} is illegal, it contains a character other than "
            "ASCII alphanumerics, '.', '_' and '-'"
        )
    return None
