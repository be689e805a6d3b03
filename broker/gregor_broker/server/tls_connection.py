"""A connection on an SSL or SASL_SSL listener.

Everything is a ``Connection``'s (framing, muting, one request in flight) except two
things. Record data cannot go from the page cache to the socket with ``sendfile(2)``, as
it must be encrypted first: the segment slices of a fetch response are read (``pread``,
a chunk at a time, waiting whenever the transport holds more than its high-water mark)
and written through the TLS transport. And on an SSL listener the principal is the
client certificate's, mapped by ``ssl.principal.mapping.rules`` (User:ANONYMOUS without
one); on SASL_SSL the SASL login sets it.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from ..security.tls import PrincipalMapper, distinguished_name
from .connection import Connection, read_in_small

# Bytes read from a segment per write through TLS: large enough to amortise the call,
# small enough that a fetch of many MiB never sits in memory whole.
TLS_READ_CHUNK = 256 * 1024


class TlsReadCounter:
    """Bytes of record data read from segments and encrypted (no sendfile on TLS)."""

    def __init__(self) -> None:
        self.bytes_total = 0


class TlsConnection(Connection):
    def __init__(
        self,
        *args: Any,
        principal_mapper: PrincipalMapper | None,
        tls_reads: TlsReadCounter,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.principal_mapper = principal_mapper
        self.tls_reads = tls_reads

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        mapper = self.principal_mapper
        if mapper is None:
            return
        certificate = transport.get_extra_info("peercert")
        if not certificate:
            return
        try:
            self.principal = f"User:{mapper.name(distinguished_name(certificate))}"
        except ValueError as error:
            self.close_for(str(error))

    def _send_now(self, parts: list[Any]) -> list[Any]:
        """Nothing goes to the socket directly under TLS: bytes go through the transport
        (which encrypts them), a small answer's file regions are read in now
        (``read_in_small``), and a larger answer with file regions is left whole to
        ``_write_parts`` (a task), which reads and encrypts them. A parked fetch's answer,
        written in the call that resolves it, took the plain connection's path and sent
        its records with ``sendfile(2)`` onto the socket under the TLS layer."""
        small = read_in_small(parts)  # all bytes, or regions small enough to read in
        if small is not None:  # encrypted by the transport
            self.tls_reads.bytes_total += small[1]
            self.transport.write(small[0])  # type: ignore[union-attr]
            return []
        return parts

    async def _write_parts(self, parts: list[Any]) -> None:
        transport = self.transport
        assert transport is not None
        for part in parts:
            if self._closed:
                return
            if isinstance(part, bytes):
                transport.write(part)
                continue
            offset = part.position
            remaining = part.size
            while remaining:
                try:
                    chunk = os.pread(part.fd, min(remaining, TLS_READ_CHUNK), offset)
                except OSError as error:
                    self.close_for(f"segment read failed: {error}")
                    return
                if not chunk:
                    self.close_for("segment shrank during read")
                    return
                transport.write(chunk)
                self.tls_reads.bytes_total += len(chunk)
                offset += len(chunk)
                remaining -= len(chunk)
                if self._writing_paused and not self._closed:
                    self._drained = asyncio.get_running_loop().create_future()
                    await self._drained
