"""Fixtures for operator tests: ``run_operator(**config)`` runs gregor-operator (kopf, its
own thread and event loop) against the test's emulator (``kube``); stopped after the test,
or earlier with ``run_operator.stop()`` (an operator that is gone, as after helm uninstall).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from gregor_operator.handlers.common import OperatorConfig
from gregor_operator.operator import run


@pytest.fixture
def run_operator(kube: Any) -> Iterator[Callable[..., OperatorConfig]]:
    running: list[tuple[threading.Thread, threading.Event]] = []
    errors: list[BaseException] = []

    def start(**settings: Any) -> OperatorConfig:
        settings.setdefault("status_interval", 1.0)
        settings.setdefault("finalizer_retry_delay", 0.5)
        config = OperatorConfig(kube_server=kube.url, **settings)
        stop = threading.Event()

        def target() -> None:
            try:
                run(config, stop_flag=stop)
            except BaseException as error:  # reported at teardown
                errors.append(error)

        thread = threading.Thread(target=target, name="gregor-operator", daemon=True)
        thread.start()
        running.append((thread, stop))
        return config

    def stop_all() -> None:
        for _thread, stop in running:
            stop.set()
        for thread, _ in running:
            thread.join(20)
            assert not thread.is_alive(), "the operator did not stop within 20 s"

    start.stop = stop_all  # type: ignore[attr-defined]
    yield start
    stop_all()
    assert not errors, f"the operator failed: {errors!r}"
