"""Which image build a test may reuse: a digest of everything that goes into the images.

``scripts/build-images`` labels each image with ``gregor.source-digest`` (this module's
``source_digest()``), and the image test and the local e2e mode rebuild an image whose
label differs, so no test ever runs a broker image older than the code under test.
Owns only that digest and the podman command line this machine needs; building stays in
``scripts/build-images``.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# What the images are built from: the packages, their metadata, the Dockerfiles and the
# files they copy. Tests and docs do not change an image.
SOURCES = (
    "pyproject.toml",
    "broker",
    "operator",
    "deploy/broker",
    "Dockerfile.broker",
    "Dockerfile.operator",
)
DIGEST_LABEL = "gregor.source-digest"
# podman here: runc (crun refuses the sandbox's hybrid cgroups), cgroupfs and a file events
# log (no systemd), and rlimits the sandbox allows (TOOLING.md).
PODMAN = ("podman", "--runtime", "runc", "--cgroup-manager", "cgroupfs", "--events-backend", "file")
RUN_LIMITS = ("--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024")


def source_digest(root: Path = ROOT) -> str:
    """SHA-256 over the paths and bytes of every image source file, in sorted order."""
    digest = hashlib.sha256()
    files: list[Path] = []
    for name in SOURCES:
        path = root / name
        if path.is_file():
            files.append(path)
        elif path.is_dir():
            files.extend(
                p
                for p in path.rglob("*")
                if p.is_file() and "__pycache__" not in p.parts and not p.name.endswith(".pyc")
            )
    for path in sorted(files):
        digest.update(str(path.relative_to(root)).encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def image_digest(image: str) -> str | None:
    """The source digest label of a local podman image, None when it is missing."""
    if shutil.which("podman") is None:
        return None
    result = subprocess.run(
        [*PODMAN, "image", "inspect", "--format", f'{{{{index .Labels "{DIGEST_LABEL}"}}}}', image],
        capture_output=True,
        text=True,
        check=False,
    )
    return result.stdout.strip() if result.returncode == 0 else None


if __name__ == "__main__":
    print(source_digest())
    sys.exit(0)
