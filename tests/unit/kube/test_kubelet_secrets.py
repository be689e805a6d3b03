"""The kubelet stand-in's Secret handling and listener ports, without processes: the
environment a pod of the operator's secured StatefulSet gets (``secretKeyRef`` values,
``$(VAR)`` expansion over them, a missing Secret refused), ``secret`` volumes, and the
overrides that move each advertised listener to its host port."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from tests.kube.client import KubeClient
from tests.kube.kubelet import (
    ProcessRuntime,
    RunningPod,
    SecretMissing,
    resolve_env,
    write_secret_volume,
)


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


POD = {"metadata": {"name": "gregor-0", "namespace": "gregor"}, "spec": {}}
SECRETS = {
    "login": {"data": {"username": b64("broker"), "password": b64("s3cret")}},
    "plain": {"stringData": {"token": "abc"}},
}
CONTAINER = {
    "env": [
        {"name": "USER", "valueFrom": {"secretKeyRef": {"name": "login", "key": "username"}}},
        {"name": "PASS", "valueFrom": {"secretKeyRef": {"name": "login", "key": "password"}}},
        {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "plain", "key": "token"}}},
        {"name": "JAAS", "value": 'username="$(USER)" password="$(PASS)";'},
    ]
}


def test_secret_key_refs_are_decoded_and_expand_in_later_values() -> None:
    env = resolve_env(CONTAINER, POD, {}, SECRETS)
    assert env == {
        "USER": "broker",
        "PASS": "s3cret",
        "TOKEN": "abc",
        "JAAS": 'username="broker" password="s3cret";',
    }


def test_a_missing_secret_or_key_keeps_the_container_from_starting() -> None:
    with pytest.raises(SecretMissing, match="login"):
        resolve_env(CONTAINER, POD, {}, {"plain": SECRETS["plain"]})
    missing_key = {
        "env": [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "login", "key": "nope"}}}]
    }
    with pytest.raises(SecretMissing, match="nope"):
        resolve_env(missing_key, POD, {}, SECRETS)
    optional = {
        "env": [
            {
                "name": "X",
                "valueFrom": {"secretKeyRef": {"name": "gone", "key": "k", "optional": True}},
            }
        ]
    }
    assert resolve_env(optional, POD, {}, SECRETS) == {}


def test_secret_volume_writes_each_key_or_the_listed_items(tmp_path: Path) -> None:
    write_secret_volume({"name": "v", "secret": {"secretName": "login"}}, SECRETS, tmp_path / "a")
    assert (tmp_path / "a/username").read_text() == "broker"
    assert (tmp_path / "a/password").read_text() == "s3cret"
    items = {"secretName": "login", "items": [{"key": "password", "path": "sub/pw"}]}
    write_secret_volume({"name": "v", "secret": items}, SECRETS, tmp_path / "b")
    assert [p.name for p in (tmp_path / "b").rglob("*") if p.is_file()] == ["pw"]
    assert (tmp_path / "b/sub/pw").read_text() == "s3cret"
    with pytest.raises(SecretMissing):
        write_secret_volume({"name": "v", "secret": {"secretName": "gone"}}, SECRETS, tmp_path)


def test_each_advertised_listener_moves_to_its_host_port(tmp_path: Path) -> None:
    pod = RunningPod("gregor", "gregor-0", 0, "uid", tmp_path)
    pod.container = {
        "ports": [
            {"name": "kafka", "containerPort": 9092},
            {"name": "internal", "containerPort": 9093},
            {"name": "metrics", "containerPort": 9404},
        ]
    }
    pod.ports = {"kafka": 31001, "internal": 31002, "metrics": 31003}
    pod.env = {
        "GREGOR_ADVERTISED_LISTENERS": "CLIENT://gregor-0.gregor-brokers.gregor.svc:9092,"
        "INTERNAL://gregor-0.gregor-brokers.gregor.svc:9093"
    }
    listeners = "CLIENT://127.0.0.1:31001,INTERNAL://127.0.0.1:31002"
    runtime = ProcessRuntime(KubeClient("http://127.0.0.1:9"))  # port_overrides asks no API
    assert runtime.port_overrides(pod) == [
        "--override", f"listeners={listeners}",
        "--override", f"advertised.listeners={listeners}",
        "--override", "metrics.port=31003",
    ]  # fmt: skip
    pod.env = {}  # no advertised listeners: one PLAINTEXT listener on "kafka", as before
    assert runtime.port_overrides(pod)[:2] == [
        "--override",
        "listeners=PLAINTEXT://127.0.0.1:31001",
    ]
