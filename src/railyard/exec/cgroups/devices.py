"""GPU device confinement: a job opens only its own GPUs' device files.

``CUDA_VISIBLE_DEVICES`` is a hint a job may ignore; the device files are not. Like Slurm's
``ConstrainDevices=yes``, each job step gets a cgroup v1 ``devices`` group that its wrapper
joins before it runs anything as the user: every NVIDIA GPU (``/dev/nvidiaN``: major 195,
minor N) is denied except the job's own, and ``nvidia-caps`` (MIG capabilities) is denied;
``nvidiactl`` (195:255), ``nvidia-modeset`` (195:254) and ``nvidia-uvm``, which CUDA opens
in every process, stay allowed, as does every other device. The group starts from its
parent's (allow everything) and gets one deny line per excluded minor: under a default-allow
list a later allow cannot punch a hole in a wildcard deny (Linux's devices controller only
removes exact exceptions).

Cgroup v2 has no devices controller: there the same rule is an eBPF program attached to the
step's tracking group (:mod:`railyard.exec.cgroups.devfilter`). Where neither can be had, one line
says that GPUs are not confined.
Kernel reference: https://docs.kernel.org/admin-guide/cgroup-v1/devices.html
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from railyard.exec.cgroups import cgroup, devfilter

DEVICES = Path("/sys/fs/cgroup/devices")
PROC_DEVICES = Path("/proc/devices")
PARENT = "railyard"
NVIDIA_MAJOR = 195  # /dev/nvidia0.. (the GPUs), 254 nvidia-modeset, 255 nvidiactl
MODESET_MINOR = 254
CTL_MINOR = 255
DENIED_MAJORS = ("nvidia-caps",)  # MIG capabilities; nvidia-uvm stays allowed (CUDA needs it)


def char_majors(proc_devices: Path = PROC_DEVICES) -> dict[str, int]:
    """Character device majors by driver name, from /proc/devices."""
    majors: dict[str, int] = {}
    try:
        text = proc_devices.read_text()
    except OSError:
        return majors
    section = ""
    for line in text.splitlines():
        if line.endswith("devices:"):
            section = line
            continue
        parts = line.split()
        if section.startswith("Character") and len(parts) == 2 and parts[0].isdigit():
            majors.setdefault(parts[1], int(parts[0]))
    return majors


def deny_rules(allowed_minors: Iterable[int], majors: dict[str, int]) -> list[str]:
    """The ``devices.deny`` lines of a step allowed only ``allowed_minors`` of major 195."""
    allowed = set(allowed_minors) | {MODESET_MINOR, CTL_MINOR}
    rules = [f"c {NVIDIA_MAJOR}:{m} rwm" for m in range(CTL_MINOR + 1) if m not in allowed]
    rules += [f"c {majors[name]}:* rwm" for name in DENIED_MAJORS if name in majors]
    return rules


@dataclass(frozen=True)
class Confinement:
    """Where step device groups go (``parent``; None: GPUs are not confined, ``why``) and how
    they deny: ``v1`` writes ``devices.deny``, ``bpf`` attaches a device program to the step's
    cgroup v2 group (the tracking group, so ``parent`` is the tracking parent)."""

    parent: Path | None
    why: str = ""
    kind: str = "v1"

    def describe(self) -> str:
        """One line for ``railyard up`` and each job's log header."""
        if self.parent is None:
            return f"devices: GPUs not confined ({self.why})"
        how = "cgroup v2 eBPF device filter" if self.kind == "bpf" else "cgroup v1 devices"
        return f"devices: each job reaches only its own GPUs ({how}, {self.parent})"

    def make(
        self,
        step: str,
        minors: Iterable[int],
        proc_devices: Path = PROC_DEVICES,
        *,
        runtime_confines: bool = False,
        tasks_apart: bool = False,
    ) -> Path:
        """The step's devices group, denying every NVIDIA device but ``minors``.
        ``runtime_confines``: a container runtime makes the step's processes a devices group
        of their own below this one (denying all but the job's GPUs); a v1 parent with deny
        lines would refuse it its base rules (``c *:* m``), so a v1 group is left open.
        ``tasks_apart``: both at once (a bare batch step whose ``srun`` may start
        containers): a v1 group stays open for the runtime and the step's own processes
        join a ``batch`` group below it that holds the deny lines (returned)."""
        assert self.parent is not None
        group = self.parent / step
        group.mkdir(exist_ok=True)
        if runtime_confines and self.kind == "v1":
            return group
        if tasks_apart and self.kind == "v1":
            group = group / "batch"
            group.mkdir(exist_ok=True)
        if self.kind == "bpf":
            majors = char_majors(proc_devices)
            denied = [majors[name] for name in DENIED_MAJORS if name in majors]
            allowed = set(minors) | {MODESET_MINOR, CTL_MINOR}
            devfilter.attach(group, devfilter.program(NVIDIA_MAJOR, allowed, denied))
            return group
        # One rule per write(2), as the controller wants, but one open for all 250 of them:
        # a launch paid an open and a close per rule (about 25 ms a job on a busy machine).
        fd = os.open(group / "devices.deny", os.O_WRONLY)
        try:
            for rule in deny_rules(minors, char_majors(proc_devices)):
                os.write(fd, rule.encode())
        finally:
            os.close(fd)
        return group

    def remove(self, step: str) -> None:
        """Remove the step's group once its processes are gone (the kernel refuses before)."""
        if self.parent is not None:
            cgroup.remove_tree(self.parent / step)


def choose(root: Path = DEVICES, v2_parent: Path | None = None) -> Confinement:
    """The v1 devices controller if this server can make groups in it, else a device program
    on the steps' cgroup v2 groups (``v2_parent``: where process tracking makes them)."""
    if not (root / "devices.allow").is_file():
        why = f"no cgroup v1 devices controller at {root}"
        if v2_parent is None:
            return Confinement(None, f"{why} and no cgroup v2 tracking")
        refused = devfilter.available()
        if refused:
            return Confinement(None, f"{why}; {refused}")
        return Confinement(v2_parent, kind="bpf")
    parent = root / PARENT
    try:
        parent.mkdir(exist_ok=True)
    except OSError as exc:
        return Confinement(None, f"cannot make {parent}: {exc.strerror or exc}")
    if not os.access(parent, os.W_OK):  # made by root earlier; this server is not root
        return Confinement(None, f"{parent} is not writable by this server")
    return Confinement(parent)
