"""A zstd decompression bomb costs the broker a bounded amount of memory (issue 9, F2).

On 25f0aff a compacted topic inflated a compressed batch whole to check its keys: a
160 KB zstd batch was OOM-killed. Now batches inflate in chunks against the request's
``produce.decompressed.max.bytes``; these tests read the broker's peak RSS (VmHWM) around
the bomb (reset to the current RSS first). The broker runs with RLIMIT_DATA set a little
above its size, so a broker that inflates whole fails its allocation instead of taking
the machine's memory.
"""

from __future__ import annotations

import resource
import time
import uuid

import pytest

from gregor_broker.devtools.local_cluster import BrokerProcess

from .broker_helpers import create_topic
from .produce_crafting import batch_around, log_end_offset, produce, zstd_bomb

MESSAGE_TOO_LARGE = 10
MIB = 1024 * 1024
# Peak RSS the broker may gain while it validates one bomb: a few inflated chunks, the
# request and its response, with room for allocator noise; far below any bomb's size.
RSS_GROWTH_BOUND = 48 * MIB


def _status(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise LookupError(field)


@pytest.fixture
def bounded_broker(zk_connect, tmp_path_factory, broker_launcher):
    broker = BrokerProcess(
        broker_id=1,
        directory=tmp_path_factory.mktemp("bomb-broker-"),
        zookeeper_connect=zk_connect,
        port=0,
        rack=None,
        properties={},
        launcher=broker_launcher,
    )
    broker.start()
    broker.wait_registered(30)
    # Safety net for the machine running the test, not the bound under test.
    data = _status(broker.pid, "VmData")
    resource.prlimit(broker.pid, resource.RLIMIT_DATA, (data + 1024 * MIB, data + 1024 * MIB))
    yield broker
    broker.stop()


def _send(broker: BrokerProcess, topic: str, batch: bytes) -> tuple[object, int, float]:
    # Reset the peak to the current RSS (proc(5): "5" > clear_refs), so that only what
    # this request adds can show up as growth.
    with open(f"/proc/{broker.pid}/clear_refs", "w") as clear_refs:
        clear_refs.write("5")
    before = _status(broker.pid, "VmRSS")
    started = time.monotonic()
    response = produce(broker.bootstrap, topic, batch)
    elapsed = time.monotonic() - started
    growth = _status(broker.pid, "VmHWM") - before
    print(
        f"{len(batch)} byte batch: {response.error_code=}, peak RSS +{growth / MIB:.1f} MiB, "
        f"{elapsed:.2f} s, VmHWM {_status(broker.pid, 'VmHWM') / MIB:.0f} MiB"
    )
    return response, growth, elapsed


def test_a_160_kb_zstd_bomb_is_refused_without_inflating_it(bounded_broker):
    """80 records of 64 MiB zeros: 5 GiB inflated from ~170 KB, past the 100 MiB limit.

    With a small window (128 KiB) and with the largest the broker allows by default
    (8 MiB: a decoder fills its window as it inflates) the batch is MESSAGE_TOO_LARGE;
    a frame declaring zstd's maximum window (128 MiB) is refused before inflating."""
    topic = f"bomb-{uuid.uuid4().hex[:8]}"
    create_topic(bounded_broker.bootstrap, topic, config={"cleanup.policy": "compact"})
    for window_log, error_code in ((17, MESSAGE_TOO_LARGE), (23, MESSAGE_TOO_LARGE), (27, 87)):
        bomb = batch_around(zstd_bomb(80, 64 * MIB, window_log), 80, attributes=4)
        assert 150_000 < len(bomb) < 200_000

        response, growth, _elapsed = _send(bounded_broker, topic, bomb)

        assert response.error_code == error_code, response
        assert "produce.decompressed.max.bytes" in response.error_message
        assert growth < RSS_GROWTH_BOUND, f"peak RSS grew {growth / MIB:.0f} MiB"
        assert log_end_offset(bounded_broker.bootstrap, topic) == 0
        assert bounded_broker.is_running()


def test_a_bomb_under_the_limit_is_streamed_and_accepted(bounded_broker):
    """4 records of 16 MiB zeros (64 MiB inflated, under the limit): valid, so stored, and
    walked as a stream: the broker never holds a record, let alone the batch."""
    topic = f"bomb-{uuid.uuid4().hex[:8]}"
    create_topic(bounded_broker.bootstrap, topic, config={"cleanup.policy": "compact"})
    batch = batch_around(zstd_bomb(4, 16 * MIB), 4, attributes=4)

    response, growth, _elapsed = _send(bounded_broker, topic, batch)

    assert (response.error_code, response.base_offset) == (0, 0), response
    assert growth < RSS_GROWTH_BOUND, f"peak RSS grew {growth / MIB:.0f} MiB"
    assert log_end_offset(bounded_broker.bootstrap, topic) == 4
