"""A small synchronous JSON client for the emulator (or any API server without auth).

Tests and the kubelet stand-in use it to create, read, patch and delete objects by
``apiVersion``/plural, without the ``kubernetes`` client's per-kind classes.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

from kazoo.exceptions import ConnectionLoss, SessionExpiredError


class ApiError(Exception):
    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"HTTP {status}: {body[:300]}")
        self.status = status


# What a probe may raise and still be asked again: an emulator answering late, a loaded
# ZooKeeper dropping the test's connection (kazoo reconnects by itself).
TRANSIENT = (ApiError, TimeoutError, ConnectionLoss, SessionExpiredError)


def _base(api_version: str) -> str:
    return "/api/v1" if api_version == "v1" else f"/apis/{api_version}"


class KubeClient:
    def __init__(self, url: str, timeout: float = 30.0) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout

    def path(
        self, api_version: str, plural: str, namespace: str | None, name: str | None = None
    ) -> str:
        parts = [_base(api_version)]
        if namespace:
            parts.append(f"namespaces/{namespace}")
        parts.append(plural)
        if name:
            parts.append(name)
        return "/".join(parts)

    def request(self, method: str, path: str, body: Any = None, content_type: str = "") -> Any:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = content_type or "application/json"
        request = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                text = response.read().decode()
        except urllib.error.HTTPError as error:
            raise ApiError(error.code, error.read().decode(errors="replace")) from None
        return json.loads(text) if text else None

    def create(self, obj: dict[str, Any], plural: str, namespace: str | None = None) -> Any:
        namespace = namespace or obj.get("metadata", {}).get("namespace")
        return self.request("POST", self.path(obj["apiVersion"], plural, namespace), obj)

    def get(self, api_version: str, plural: str, namespace: str | None, name: str) -> Any:
        return self.request("GET", self.path(api_version, plural, namespace, name))

    def find(self, api_version: str, plural: str, namespace: str | None, name: str) -> Any:
        try:
            return self.get(api_version, plural, namespace, name)
        except ApiError as error:
            if error.status == 404:
                return None
            raise

    def list(self, api_version: str, plural: str, namespace: str | None = None) -> list[Any]:
        return self.request("GET", self.path(api_version, plural, namespace))["items"]

    def patch(
        self,
        api_version: str,
        plural: str,
        namespace: str | None,
        name: str,
        body: dict[str, Any],
        subresource: str | None = None,
    ) -> Any:
        path = self.path(api_version, plural, namespace, name)
        if subresource:
            path += f"/{subresource}"
        return self.request("PATCH", path, body, "application/merge-patch+json")

    def delete(self, api_version: str, plural: str, namespace: str | None, name: str) -> Any:
        return self.request("DELETE", self.path(api_version, plural, namespace, name))

    @staticmethod
    def read(what: str, probe: Callable[[], Any], timeout: float = 30.0) -> Any:
        """``probe()``'s answer, whatever it is (None included), asked again only while it
        fails transiently (a loaded ZooKeeper dropped the test's connection: CI failed on
        a bare ``admin.list_topics()``); AssertionError if it keeps failing."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return probe()
            except TRANSIENT as error:
                if time.monotonic() >= deadline:
                    raise AssertionError(f"could not read {what} in {timeout:.0f} s") from error
                time.sleep(0.25)

    def wait_for(
        self,
        what: str,
        probe: Callable[[], Any],
        timeout: float = 30.0,
        interval: float = 0.1,
        show: Callable[[], Any] | None = None,
    ) -> Any:
        """Poll ``probe`` until it returns something truthy; AssertionError on timeout,
        with what ``show`` returns then (the state a failure is diagnosed from)."""
        deadline = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < deadline:
            try:
                last = probe()
            except TRANSIENT as error:
                last = error
            if last and not isinstance(last, TRANSIENT):
                return last
            time.sleep(interval)
        message = f"timed out after {timeout:.0f} s waiting for {what}; last: {last!r}"
        if show is not None:
            try:
                message += f"; then: {show()!r}"
            except TRANSIENT as error:
                message += f"; then unreadable: {error!r}"
        raise AssertionError(message)
