"""The e2e suite runs in one of two modes (``--e2e-mode``):

- ``local`` (``make e2e-local``): the chart in kmock's Kubernetes emulator on this
  machine, brokers as podman containers of the real image (e2e/local.py); ``make test``
  runs its short variant (tests/e2e_local: install, a Topic round trip, uninstall);
- ``kind`` (``make e2e``): a kind cluster with three zone-labelled workers (e2e/kind.py);
  skipped, with the reason, where docker or kind is missing.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

SUMMARY: dict[str, Any] = {}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--e2e-mode",
        choices=("local", "kind"),
        default="local",
        help="local: kmock's emulator on this machine; kind: a kind cluster (needs docker)",
    )


@pytest.fixture(scope="session")
def platform(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    mode = request.config.getoption("--e2e-mode")
    directory = tmp_path_factory.mktemp(f"e2e-{mode}")
    if mode == "kind":
        from .kind import KindPlatform, kind_unavailable

        reason = kind_unavailable()
        if reason:
            pytest.skip(f"kind mode needs docker and kind: {reason}")
        platform = KindPlatform(directory)
    else:
        from .local import LocalPlatform

        platform = LocalPlatform(directory)
    started = time.monotonic()
    platform.start()
    SUMMARY.update(mode=mode, runtime=getattr(platform, "runtime", mode))
    try:
        yield platform
    finally:
        platform.stop()
        SUMMARY["total_seconds"] = round(time.monotonic() - started, 1)
        out = Path(request.config.rootpath) / "build" / f"e2e-{mode}-summary.json"
        out.parent.mkdir(exist_ok=True)
        out.write_text(json.dumps(SUMMARY, indent=2, sort_keys=True) + "\n")
        print(f"\ne2e {mode} summary: {json.dumps(SUMMARY, sort_keys=True)}")


@pytest.fixture(scope="session")
def summary() -> dict[str, Any]:
    return SUMMARY
