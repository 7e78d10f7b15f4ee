"""A container image built offline for the tests: no registry, no download.

Its root file system holds only what makes it an image of its own (an ``/etc/os-release``
that the host does not have, a setuid-root copy of ``id`` in ``/opt``, the usual empty
directories) and links ``/bin``, ``/lib`` and ``/lib64`` into ``/usr``; a job mounts the
host's ``/usr`` read-only over it, so the host's own interpreter (and this checkout's
virtual environment, mounted too) runs inside. ``podman import`` makes the image from a tar
written here.
"""

from __future__ import annotations

import io
import shutil
import subprocess
import tarfile
from pathlib import Path

IMAGE = "localhost/railyard-test:usr-2"
OS_NAME = "railyard test image"
SUID_ID = "/opt/suid-id"


def _add_dir(tar: tarfile.TarFile, name: str, mode: int = 0o755) -> None:
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE
    info.mode = mode
    tar.addfile(info)


def _add_file(tar: tarfile.TarFile, name: str, data: bytes, mode: int = 0o644) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = mode
    tar.addfile(info, io.BytesIO(data))


def _add_link(tar: tarfile.TarFile, name: str, target: str) -> None:
    info = tarfile.TarInfo(name)
    info.type = tarfile.SYMTYPE
    info.linkname = target
    tar.addfile(info)


def rootfs_tar(os_name: str = OS_NAME) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name in ("etc", "opt", "usr", "home", "proc", "sys", "dev", "run", "var", "root"):
            _add_dir(tar, name)
        _add_dir(tar, "tmp", 0o1777)
        _add_dir(tar, "var/tmp", 0o1777)
        for link in ("bin", "sbin", "lib", "lib64"):
            _add_link(tar, link, f"usr/{link}")
        _add_file(tar, "etc/os-release", f'NAME="{os_name}"\nID=railyard-test\n'.encode())
        _add_file(tar, "etc/passwd", b"root:x:0:0:root:/root:/bin/sh\n")
        _add_file(tar, "etc/group", b"root:x:0:\n")
        id_path = shutil.which("id") or "/usr/bin/id"
        _add_file(tar, SUID_ID.lstrip("/"), Path(id_path).read_bytes(), 0o4755)
    return buffer.getvalue()


def imported_image(name: str = IMAGE, os_name: str = OS_NAME) -> str:
    """The image's name, imported on first use (idempotent: a second import re-tags)."""
    exists = subprocess.run(["podman", "image", "exists", name], check=False)
    if exists.returncode != 0:
        subprocess.run(
            ["podman", "import", "--quiet", "-", name],
            input=rootfs_tar(os_name),
            check=True,
            capture_output=True,
        )
    return name
