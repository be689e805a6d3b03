"""The operator's writes to the Kubernetes API besides kopf's own (owned objects of a
GregorCluster, pod deletions for rolling restarts), with the ``kubernetes`` client.

Every verb used here is one the chart's RBAC must grant: get on gregorclusters; patch on
the status of gregorclusters and gregorrebalances (the periodic steps, ``periodic.py``); get,
create, patch on configmaps, services, poddisruptionbudgets and statefulsets; get, list,
delete on pods; create on events; get and create on secrets (a User's generated password).
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Mapping
from typing import Any

import kubernetes
from kubernetes.client.exceptions import ApiException

_API = {
    "ConfigMap": ("CoreV1Api", "config_map"),
    "Service": ("CoreV1Api", "service"),
    "PodDisruptionBudget": ("PolicyV1Api", "pod_disruption_budget"),
    "StatefulSet": ("AppsV1Api", "stateful_set"),
    "Pod": ("CoreV1Api", "pod"),
    "Secret": ("CoreV1Api", "secret"),
}


class Kube:
    def __init__(self, server: str | None = None) -> None:
        configuration = kubernetes.client.Configuration()
        if server:
            configuration.host = server
        else:
            try:
                kubernetes.config.load_incluster_config(client_configuration=configuration)
            except kubernetes.config.ConfigException:
                kubernetes.config.load_kube_config(client_configuration=configuration)
        self.api_client = kubernetes.client.ApiClient(configuration)

    def _call(self, kind: str, verb: str, *args: Any, **kwargs: Any) -> Any:
        api_name, suffix = _API[kind]
        api = getattr(kubernetes.client, api_name)(self.api_client)
        return getattr(api, f"{verb}_namespaced_{suffix}")(*args, **kwargs)

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            found = self._call(kind, "read", name, namespace, _preload_content=False)
        except ApiException as error:
            if error.status == 404:
                return None
            raise
        return json.loads(found.data)

    def get_custom(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        """A gregor.dev object as the API server has it now (kopf's copy may lag)."""
        api = kubernetes.client.CustomObjectsApi(self.api_client)
        try:
            found = api.get_namespaced_custom_object(
                "gregor.dev", "v1alpha1", namespace, plural, name, _preload_content=False
            )
        except ApiException as error:
            if error.status == 404:
                return None
            raise
        return json.loads(found.data)

    def create(self, obj: Mapping[str, Any]) -> None:
        """Create ``obj`` (an error when it exists: the caller looked first)."""
        self._call(obj["kind"], "create", obj["metadata"]["namespace"], dict(obj))

    def apply(self, obj: Mapping[str, Any]) -> str:
        """Create ``obj``, or merge it into the existing one; returns what it did."""
        kind, metadata = obj["kind"], obj["metadata"]
        if self.get(kind, metadata["namespace"], metadata["name"]) is None:
            self._call(kind, "create", metadata["namespace"], dict(obj))
            return "created"
        self._call(kind, "patch", metadata["name"], metadata["namespace"], dict(obj))
        return "patched"

    def patch_custom_status(
        self, plural: str, namespace: str, name: str, body: Mapping[str, Any]
    ) -> None:
        """Merge-patch a gregor.dev object's status subresource (keys set to None go)."""
        api = kubernetes.client.CustomObjectsApi(self.api_client)
        try:
            api.patch_namespaced_custom_object_status(
                "gregor.dev", "v1alpha1", namespace, plural, name, dict(body),
                _preload_content=False,
            )  # fmt: skip
        except ApiException as error:
            if error.status != 404:  # deleted meanwhile: nothing to report on
                raise

    def list(self, kind: str, namespace: str, selector: str) -> list[dict[str, Any]]:
        found = self._call(kind, "list", namespace, label_selector=selector, _preload_content=False)
        return json.loads(found.data).get("items") or []

    def post_event(self, obj: Mapping[str, Any], kind: str, reason: str, message: str) -> None:
        """A core/v1 Event about ``obj`` (``kind``: Normal or Warning), as kopf.info/warn
        post them; for steps that run outside a kopf handler (``periodic.py``)."""
        metadata = obj["metadata"]
        now = datetime.datetime.now(tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "generateName": f"{metadata['name']}.",
                "namespace": metadata["namespace"],
            },
            "involvedObject": {
                "apiVersion": obj.get("apiVersion", "gregor.dev/v1alpha1"),
                "kind": obj.get("kind", ""),
                "name": metadata["name"],
                "namespace": metadata["namespace"],
                "uid": metadata.get("uid", ""),
            },
            "reason": reason,
            "message": message[:1024],
            "type": kind,
            "source": {"component": "gregor-operator"},
            "reportingComponent": "gregor-operator",
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        api = kubernetes.client.CoreV1Api(self.api_client)
        api.create_namespaced_event(metadata["namespace"], event, _preload_content=False)

    def patch(self, kind: str, namespace: str, name: str, body: Mapping[str, Any]) -> None:
        self._call(kind, "patch", name, namespace, dict(body))

    def delete(self, kind: str, namespace: str, name: str) -> None:
        try:
            self._call(kind, "delete", name, namespace)
        except ApiException as error:
            if error.status != 404:
                raise
