"""CPU and memory limits of a job through cgroup v2, where this machine lets us write them.

One cgroup per job and node, ``/sys/fs/cgroup/railyard/job_<id>``, with ``cpu.max`` (a quota
of ``cpus`` periods per period) and ``memory.max``; the wrapper of each process moves itself
in before it starts the command, so every child is counted. Where cgroup v2 is not mounted,
lacks the controllers, or is not writable (not root, a container without delegation), the
limits are recorded and said to be not enforced, in the job's log header and in
``railyard show``. Kernel reference: https://docs.kernel.org/admin-guide/cgroup-v2.html
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from railyard.exec.cgroups import delegation

CGROUP_ROOT = Path("/sys/fs/cgroup")
PARENT = "railyard"
CPU_PERIOD_US = 100_000  # the kernel's default period


@dataclass(frozen=True)
class Limits:
    """Per node: ``cpus`` cores (0: none asked) and ``mem_bytes`` (0: none asked)."""

    cpus: int = 0
    mem_bytes: int = 0

    def __bool__(self) -> bool:
        return bool(self.cpus or self.mem_bytes)

    def controllers(self) -> list[str]:
        return [name for name, want in (("cpu", self.cpus), ("memory", self.mem_bytes)) if want]

    def describe(self) -> str:
        parts = []
        if self.cpus:
            parts.append(f"{self.cpus} CPUs")
        if self.mem_bytes:
            parts.append(f"{self.mem_bytes // (1 << 20)} MiB")
        return " and ".join(parts) + " per node" if parts else "none requested"


def limits_root() -> Path:
    """Where the limit groups go: the group systemd delegated to this service (the
    ``railyard`` parent beside the server's ``supervisor`` leaf), else the mount's root."""
    return delegation.nesting_root() or CGROUP_ROOT


def unavailable(limits: Limits, root: Path = CGROUP_ROOT) -> str | None:
    """Why limits cannot be enforced under ``root``, or None when they can be tried."""
    try:
        available = set((root / "cgroup.controllers").read_text().split())
    except OSError:
        return f"cgroup v2 is not mounted at {root}"
    missing = [c for c in limits.controllers() if c not in available]
    if missing:
        return f"cgroup v2 at {root} lacks the {' and '.join(missing)} controller"
    if not os.access(root, os.W_OK):
        return f"{root} is not writable by this server"
    return None


def prepare(name: str, limits: Limits, root: Path = CGROUP_ROOT) -> tuple[Path | None, str]:
    """Create the job's cgroup with ``limits``; return it (None when not enforced) and the
    line that says so."""
    if not limits:
        return None, "limits: none requested"
    why = unavailable(limits, root)
    if why is None:
        try:
            group = _write(name, limits, root)
        except OSError as exc:
            why = f"cannot set up {root / PARENT}: {exc.strerror or exc}"
        else:
            return group, f"limits: {limits.describe()}, enforced (cgroup v2 {group})"
    return None, f"limits: {limits.describe()}, not enforced ({why})"


def _write(name: str, limits: Limits, root: Path) -> Path:
    enable = " ".join(f"+{c}" for c in limits.controllers())
    parent = root / PARENT
    for level in (root, parent):
        level.mkdir(exist_ok=True)
        active = set((level / "cgroup.subtree_control").read_text().split())
        if not set(limits.controllers()) <= active:
            (level / "cgroup.subtree_control").write_text(enable)
    group = parent / name
    group.mkdir(exist_ok=True)
    if limits.cpus:
        (group / "cpu.max").write_text(f"{limits.cpus * CPU_PERIOD_US} {CPU_PERIOD_US}")
    if limits.mem_bytes:
        (group / "memory.max").write_text(str(limits.mem_bytes))
    return group


def join(group: Path) -> None:
    """Move the calling process into ``group``; its children are born there."""
    (group / "cgroup.procs").write_text(str(os.getpid()))


def remove_tree(group: Path) -> bool:
    """Remove a cgroup and the groups a runtime made below it, deepest first; False when one
    still holds a process (the kernel refuses). A group another process removes meanwhile (a
    container runtime's own cleanup) counts as removed: the walk skips what vanished."""
    ok = True
    for level, _, _ in os.walk(group, topdown=False):
        try:
            os.rmdir(level)
        except FileNotFoundError:
            continue
        except OSError:
            ok = False
    return ok
