"""The kubelet stand-in's podman mode: each pod's container runs as a podman container of
the image its spec names (the real broker image), not as a process of this checkout.

``Kubelet(url, directory, runtime=PodmanRuntime(client))`` swaps it in. What the container
gets is what the pod spec says: the image, command and args (the image's entrypoint when
the spec has no command), env as the kubelet resolves it (``resolve_env``), ConfigMap
volumes as read-only files and volume claims as directories that outlive the container,
mounted at the spec's mount paths. Containers share the host network (the sandbox allows
no other), so like ``ProcessRuntime`` each named container port gets a free host port and
brokers hear of it through ``--override``; readiness is the spec's HTTP probe against it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import Mapping
from typing import Any

from deploy.images import PODMAN, RUN_LIMITS

from gregor_broker.devtools.zookeeper_server import free_port
from tests.kube.kubelet import (
    ProcessRuntime,
    RunningPod,
    resolve_env,
    secrets_of,
    write_secret_volume,
)


def podman_usable() -> str | None:
    """None when podman can run containers here, else why not."""
    if shutil.which("podman") is None:
        return "podman is not installed (scripts/install-image-tools installs it as root)"
    result = subprocess.run(
        [*PODMAN, "info", "--format", "{{.Host.OCIRuntime.Name}}"],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        return f"podman does not work here: {result.stderr.strip()[:200]}"
    return None


class PodmanRuntime(ProcessRuntime):
    """Runs a pod's first container with ``podman run`` (attached: the podman process is
    the pod's process, so exits, SIGTERM and restarts work as with ``ProcessRuntime``)."""

    def container_name(self, pod: RunningPod) -> str:
        return f"kubelet-{pod.namespace}-{pod.name}-{pod.uid[:8] or 'x'}"

    def start(self, pod: RunningPod, spec: Mapping[str, Any], obj: Mapping[str, Any]) -> None:
        container = spec["containers"][0]
        mounts: dict[str, tuple[str, bool]] = {}  # volume name -> (host dir, read-only)
        config_maps: dict[str, Any] = {}
        secrets = secrets_of(self.client, pod.namespace, spec)
        for volume in spec.get("volumes") or ():
            target = pod.directory / "volumes" / volume["name"]
            if "configMap" in volume:
                name = volume["configMap"]["name"]
                config_map = self.client.find("v1", "configmaps", pod.namespace, name) or {}
                config_maps[name] = config_map
                shutil.rmtree(target, ignore_errors=True)
                target.mkdir(parents=True)
                for key, text in (config_map.get("data") or {}).items():
                    (target / key).write_text(text)
                    (target / key).chmod(0o644)
                mounts[volume["name"]] = (str(target), True)
            elif "secret" in volume:
                shutil.rmtree(target, ignore_errors=True)
                target.mkdir(parents=True)
                write_secret_volume(volume, secrets, target)
                for file in target.rglob("*"):
                    file.chmod(0o644)  # readable by the image's non-root user
                mounts[volume["name"]] = (str(target), True)
            else:
                target.mkdir(parents=True, exist_ok=True)
                mounts[volume["name"]] = (str(target), False)
        for template in obj.get("_volumeClaimTemplates", ()):
            target = pod.directory / "claims" / template["metadata"]["name"]
            target.mkdir(parents=True, exist_ok=True)
            mounts[template["metadata"]["name"]] = (str(target), False)
        for host_dir, read_only in mounts.values():
            if not read_only:
                # The image runs as a non-root user; a fresh volume is writable by the pod
                # (Kubernetes' fsGroup does this for a real volume).
                os.chmod(host_dir, 0o777)
        env = resolve_env(container, obj, config_maps, secrets)
        pod.ports = {
            p.get("name", str(p["containerPort"])): free_port() for p in container.get("ports", ())
        }
        pod.container, pod.env = dict(container), env
        name = self.container_name(pod)
        subprocess.run([*PODMAN, "rm", "--force", name], capture_output=True, check=False)
        command = [*PODMAN, "run", "--rm", "--name", name, "--network", "host", *RUN_LIMITS]
        # Names only: podman takes the values from its own environment, so Secret values
        # stay out of the command line (the process list, the pod's log).
        for key in env:
            command += ["--env", key]
        for mount in container.get("volumeMounts") or ():
            host_dir, read_only = mounts[mount["name"]]
            command += ["--volume", f"{host_dir}:{mount['mountPath']}{':ro' if read_only else ''}"]
        args = [*(container.get("args") or ())]
        if container.get("command"):
            command += ["--entrypoint", container["command"][0]]
            args = [*container["command"][1:], *args]
        command += [container["image"], *args, *self.port_overrides(pod)]
        pod.command = command
        pod.readiness = container.get("readinessProbe")
        with open(pod.log_path, "ab") as log:
            log.write(f"--- starting {pod.name} at {time.ctime()}: {command}\n".encode())
            log.flush()
            pod.process = subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**os.environ, **env},
                cwd=pod.directory,
                start_new_session=True,
            )

    def stop(self, pod: RunningPod, timeout: float = 30.0) -> None:
        # SIGTERM to the attached podman is proxied to the container (sig-proxy).
        super().stop(pod, timeout)
        self._remove(pod)

    def kill(self, pod: RunningPod) -> None:
        subprocess.run(
            [*PODMAN, "kill", self.container_name(pod)], capture_output=True, check=False
        )
        super().kill(pod)
        self._remove(pod)

    def _remove(self, pod: RunningPod) -> None:
        with contextlib.suppress(OSError):
            subprocess.run(
                [*PODMAN, "rm", "--force", "--time", "5", self.container_name(pod)],
                capture_output=True,
                check=False,
                timeout=60,
            )
