"""One exception for every failure that goes back to the client as a Kafka error code.

A partition that cannot be appended to or read, a topic that cannot be created: each
layer raises ``KafkaError`` (or a subclass naming where it came from) with the error code
Kafka would return and a message for the client, and the handler copies both into the
response. Living at the bottom of the layers, it lets an upper layer catch what a lower
one raises without importing it (the coordinator catches topic-creation errors this way).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode


class KafkaError(Exception):
    """A failure with the Kafka error code to return and a message saying why."""

    def __init__(self, error_code: ErrorCode, message: str = "") -> None:
        super().__init__(message or error_code.name)
        self.error_code = error_code
        self.message = message

    def __str__(self) -> str:
        return self.message or self.error_code.name
