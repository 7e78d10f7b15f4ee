"""A job reaches only its GPUs (the trust boundary: "every process of a job ... reaches only the
job's GPUs"), not just the ones ``CUDA_VISIBLE_DEVICES`` names.

As one tests Slurm's gres without a GPU: root makes NVIDIA device files with ``mknod`` (major
195: ``nvidia0``..``nvidia3`` for the site's four virtual GPUs, ``nvidia-modeset`` 254,
``nvidiactl`` 255) and bob's job ignores its hint and opens them all. With no driver behind
major 195, a file the job may use fails with ENXIO; one its cgroup denies fails with EPERM.
"""

from __future__ import annotations

import os
import shlex
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from railyard.exec.cgroups import devices
from railyard.exec.cgroups.containment import Containment
from tests.integration.tenants import NEEDS_ROOT, Site, finished, submit

pytestmark = [
    *NEEDS_ROOT,
    pytest.mark.skipif(
        Containment().device_guard.parent is None, reason="GPUs cannot be confined here"
    ),
]

NODES = {f"nvidia{i}": i for i in range(4)} | {"nvidia-modeset": 254, "nvidiactl": 255}
OPEN_ALL = """
import errno, os, sys
for name in sys.argv[2:]:
    try:
        os.close(os.open(os.path.join(sys.argv[1], name), os.O_RDWR))
        print(name, "opened")
    except OSError as exc:
        print(name, errno.errorcode[exc.errno])
print("visible", os.environ.get("CUDA_VISIBLE_DEVICES", "unset"))
"""


@pytest.fixture(scope="module")
def dev(site: Site) -> Iterator[Path]:
    """NVIDIA device files, made by root where bob can reach them (mode 0666)."""
    path = site.scratch / "dev"
    path.mkdir(mode=0o755)
    for name, minor in NODES.items():
        os.mknod(path / name, 0o666 | 0o020000, os.makedev(devices.NVIDIA_MAJOR, minor))
        (path / name).chmod(0o666)
    yield path
    shutil.rmtree(path)


def opened(site: Site, dev: Path, gpus: int, name: str) -> dict[str, str]:
    """What each device file gave bob's job of ``gpus`` GPUs."""
    out = site.bob.home / f"{name}.txt"
    code = f"{shlex.quote(site.python)} -c {shlex.quote(OPEN_ALL)} {dev} {' '.join(NODES)}"
    job_id = submit(site.server, site.bob.token, command=["bash", "-c", f"{code} > {out}"],
                    gpus=gpus, workdir=str(site.bob.home))  # fmt: skip
    assert finished(site.server, job_id)["state"] == "completed"
    return dict(line.split(" ", 1) for line in out.read_text().splitlines())


def test_a_job_opens_only_its_own_gpu(site: Site, dev: Path) -> None:
    seen = opened(site, dev, 1, "one-gpu")
    mine = f"nvidia{seen.pop('visible')}"
    assert seen.pop(mine) == "ENXIO"  # allowed: the (absent) driver answers
    assert seen.pop("nvidiactl") == "ENXIO"  # CUDA opens it in every process
    assert seen.pop("nvidia-modeset") == "ENXIO"
    assert seen == {name: "EPERM" for name in seen}, seen  # the three others: denied
    assert len(seen) == 3


def test_a_cpu_job_opens_no_gpu(site: Site, dev: Path) -> None:
    seen = opened(site, dev, 0, "no-gpu")
    assert seen.pop("visible") == ""
    assert {seen.pop("nvidiactl"), seen.pop("nvidia-modeset")} == {"ENXIO"}
    assert seen == {f"nvidia{i}": "EPERM" for i in range(4)}
