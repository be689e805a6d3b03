"""pytest fixtures of the Kubernetes test kit (imported by ``tests/conftest.py``).

- ``kube``: the emulator (``emulator.EmulatorThread``) for one test, with a ``KubeClient``
  at ``kube.client``.
- ``kubelet``: ``kubelet.Kubelet`` running the emulator's StatefulSet pods as processes.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.kube.client import KubeClient
from tests.kube.emulator import EmulatorThread
from tests.kube.kubelet import Kubelet


class Kube:
    def __init__(self, thread: EmulatorThread) -> None:
        self.thread = thread
        self.url = thread.url
        self.client = KubeClient(thread.url)


@pytest.fixture
def kube() -> Iterator[Kube]:
    with EmulatorThread() as thread:
        # No Namespace objects: kmock's router reads POST /api/v1/namespaces as a namespaced
        # path and fails; namespaced objects need none to exist.
        yield Kube(thread)


@pytest.fixture
def kubelet(kube: Kube, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kubelet]:
    """The kubelet stand-in on the test's emulator: StatefulSet pods as real processes on
    three zone-labelled nodes (zones a, b, c)."""
    with Kubelet(kube.url, tmp_path_factory.mktemp("kubelet")) as running:
        yield running
    assert not running.errors, running.errors[:3]
