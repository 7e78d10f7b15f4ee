"""Parts a test may need beyond the `dev` extra: torch, a GPU, Slurm, Chromium, Podman, sshd,
Prometheus, MkDocs (the `docs` extra). Where one is absent its tests skip, naming the part and
how to get it, so the README's test command passes on a fresh machine. Under ``CI=true`` a
part that ``.ci/run`` installs must be there: its absence fails the test instead, so CI cannot
pass by skipping, unless ``.ci/run`` said it could not install it (``RAILYARD_CI_WITHOUT``,
printed in its log).
``tests/test_parts.py`` checks that tests skip for these parts only through here.

``kernel-log`` and ``tracking-cgroup`` are what a non-root run lacks: their tests skip,
saying so, where the suite runs as a plain user (``.ci/run``'s non-root sample).

Use ``@needs("torch")`` (or ``pytestmark = needs(...)``) on tests, and ``require("torch")``
at the top of a module whose imports need the part.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

import pytest


def _module(name: str) -> Callable[[], bool]:
    return lambda: importlib.util.find_spec(name) is not None


def _commands(*names: str) -> Callable[[], bool]:
    return lambda: all(shutil.which(name) is not None for name in names)


SBIN = ("/usr/sbin", "/sbin")  # daemons live here, off a plain user's PATH


def _daemon(name: str) -> Callable[[], bool]:
    """A command looked for on PATH and in the sbin directories (sshd is /usr/sbin/sshd)."""
    path = os.pathsep.join([os.environ.get("PATH", os.defpath), *SBIN])
    return lambda: shutil.which(name, path=path) is not None


def _kernel_log() -> bool:
    """``dmesg`` answers for this account (kernel.dmesg_restrict=1 keeps it from non-root)."""
    try:
        done = subprocess.run(["dmesg", "--kernel"], capture_output=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def _tracking_group() -> bool:
    """A cgroup this account may make a job step's tracking group in (root, or delegation)."""
    from railyard.exec.cgroups import proctrack

    return proctrack.choose().kind != "subreaper"


def _gpu() -> bool:
    from railyard import probe

    return probe.nvml_problem() is None


def _slurm() -> bool:
    """A Slurm that answers with an idle node (benchmarks/slurm/setup_local_slurm.sh)."""
    try:
        ready = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True,
                               timeout=10)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return False
    return ready.returncode == 0 and ("idle" in ready.stdout or "mix" in ready.stdout)


@dataclass(frozen=True)
class Part:
    present: Callable[[], bool]
    hint: str  # how to get it, said in the skip reason
    ci: bool  # .ci/run installs it: under CI=true its absence is a failure


PARTS: dict[str, Part] = {
    "torch": Part(_module("torch"), "pip install torch==2.13.0 (the CPU build)", ci=True),
    "ray": Part(_module("ray"), "pip install 'railyard[ray]'", ci=True),
    "chromium": Part(
        lambda: _module("selenium")() and _commands("chromium", "chromedriver")(),
        "apt-get install chromium chromium-driver; pip install selenium",
        ci=True,
    ),
    "promtool": Part(_commands("promtool"), "apt-get install prometheus", ci=True),
    "prometheus": Part(_commands("prometheus"), "apt-get install prometheus", ci=True),
    "podman": Part(_commands("podman"), "apt-get install podman", ci=True),
    "sshd": Part(_daemon("sshd"), "apt-get install openssh-server", ci=True),
    "mkdocs": Part(
        lambda: _module("mkdocs")() and _module("material")(),
        "pip install -e '.[docs]' (MkDocs and its Material theme)",
        ci=True,
    ),
    "gpu": Part(_gpu, "an NVIDIA GPU, its driver and pip install 'railyard[gpu]'", ci=False),
    "slurm": Part(_slurm, "benchmarks/slurm/setup_local_slurm.sh (as root)", ci=False),
    # What a plain user's run lacks (README: the tests pass as root or not; CI runs both):
    "kernel-log": Part(
        _kernel_log,
        "a kernel log this account may read: root, or kernel.dmesg_restrict=0",
        ci=False,
    ),
    "tracking-cgroup": Part(
        _tracking_group,
        "a cgroup hierarchy this account may write (run as root) to track a job's processes",
        ci=False,
    ),
}


@cache
def present(name: str) -> bool:
    """Whether ``name`` (a key of PARTS) is on this machine; asked once per process."""
    return PARTS[name].present()


def missing(*names: str) -> str | None:
    """Why a test that needs ``names`` cannot run here, or None when it can."""
    absent = [name for name in names if not present(name)]
    if not absent:
        return None
    return "; ".join(f"needs {name}, which is not here ({PARTS[name].hint})" for name in absent)


def _ci_must_have(name: str) -> bool:
    if os.environ.get("CI", "").lower() != "true":
        return False
    without = os.environ.get("RAILYARD_CI_WITHOUT", "").split()
    return PARTS[name].ci and name not in without


def require(*names: str) -> None:
    """Skip the calling test (or, at module level, the module) when a part is absent; under
    CI=true fail instead for a part .ci/run installs."""
    reason = missing(*names)
    if reason is None:
        return
    if any(_ci_must_have(name) for name in names if not present(name)):
        pytest.fail(f"CI=true: {reason}", pytrace=False)
    pytest.skip(reason, allow_module_level=True)


def needs(*names: str) -> pytest.MarkDecorator:
    """A marker: the test runs only where ``names`` are present (checked at set-up by
    tests/conftest.py, which calls ``require``)."""
    unknown = set(names) - set(PARTS)
    assert not unknown, f"unknown parts {sorted(unknown)}: add them to tests/parts.py"
    return pytest.mark.needs(*names)
