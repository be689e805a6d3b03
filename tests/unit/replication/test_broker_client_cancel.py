"""A cancelled ``BrokerClient.connect`` is cancelled, whenever the cancellation comes.

``Broker.stop`` cancels each replica fetcher and waits for it. On Python 3.11,
``asyncio.wait_for`` returns the inner result when the cancellation arrives in the same
turn of the loop as the connection completes, and the cancellation is lost: a stopping
broker's fetcher reconnecting to its leader (after a leader epoch change) went on
fetching, and ``Broker.stop`` never returned (two brokers in one process, stopped one
after the other).
"""

from __future__ import annotations

import asyncio

from gregor_broker.replication.client import BrokerClient

# Enough loop turns to cover the whole of a local connect (it takes a few).
TURNS = 40


async def _cancel_connect_after(port: int, turns: int) -> tuple[bool, bool, bool]:
    """(cancel() took, the task ended cancelled, the client kept a connection)."""
    client = BrokerClient("127.0.0.1", port, "test", timeout=30.0)
    task = asyncio.create_task(client.connect())
    for _ in range(turns):
        await asyncio.sleep(0)
    took = task.cancel()
    await asyncio.wait({task})
    connected = client._protocol is not None and not client._protocol.closed
    await client.close()
    return took, task.cancelled(), connected


async def _every_turn() -> list[tuple[int, bool, bool, bool]]:
    accepted: list[asyncio.StreamWriter] = []

    async def accept(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer)

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        return [(turns, *await _cancel_connect_after(port, turns)) for turns in range(TURNS)]
    finally:
        for writer in accepted:
            writer.close()
        server.close()
        await server.wait_closed()


def test_a_cancellation_during_connect_is_never_lost() -> None:
    results = asyncio.run(_every_turn())
    # The connect completed within the turns tried (the last ones found it done).
    assert not results[-1][1], results
    lost = [turns for turns, took, cancelled, _ in results if took and not cancelled]
    assert lost == [], f"cancellation lost after {lost} loop turns"
    # A cancelled connect leaves no connection behind.
    kept = [turns for turns, took, cancelled, connected in results if cancelled and connected]
    assert kept == []
