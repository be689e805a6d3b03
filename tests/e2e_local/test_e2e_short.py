"""The short variant of the local e2e suite (``make e2e-local``) for ``make test``: the
chart installed into the Kubernetes emulator, the operator as its own process, broker
pods as podman containers of the real broker image (processes where podman cannot run:
the test says which), then a Topic produced to and consumed from, and ``helm uninstall``
leaving nothing behind. The same steps as the full suite (e2e/scenarios.py), without its
long scenarios (scaling and the rolling upgrade under load, a killed pod).

It shares the ``images`` xdist group with tests/image: whichever runs first builds the
broker image (from a debootstrap base on a fresh machine), the other reuses it.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from e2e.local import LocalPlatform
from e2e.scenarios import (
    check_installed,
    create_topic,
    install,
    round_trip,
    uninstall_leaves_nothing,
)

pytestmark = [pytest.mark.timeout(900), pytest.mark.xdist_group("images")]


@pytest.fixture
def platform(tmp_path: Path) -> Iterator[LocalPlatform]:
    platform = LocalPlatform(tmp_path)
    try:
        platform.start()
        if platform.runtime != "podman":
            warnings.warn(
                f"broker pods ran as processes, not podman containers: {platform.runtime_reason}",
                stacklevel=1,
            )
        yield platform
    finally:
        platform.stop()


def test_install_topic_produce_consume_and_uninstall(platform: LocalPlatform) -> None:
    summary: dict[str, Any] = {"runtime": platform.runtime}
    started = time.monotonic()
    installed = install(platform, summary)
    check_installed(platform, installed)
    create_topic(platform, "orders", partitions=3)
    summary["produce_consume"] = round_trip(platform, "orders", count=200)
    summary["uninstall"] = uninstall_leaves_nothing(platform, topics=["orders"])
    summary["total_seconds"] = round(time.monotonic() - started, 1)
    print(f"e2e short: {summary}")
