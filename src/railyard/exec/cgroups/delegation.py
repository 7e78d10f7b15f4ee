"""Where railyard's cgroups go on a cgroup v2 host whose systemd delegated it a subtree.

systemd is the single writer of the cgroup v2 tree: a service that writes groups into its root
fights it (a ``daemon-reload`` or a unit start may move or remove them). With ``Delegate=yes``
(the units in ``railyard/data/systemd``, like Slurm's for ``slurmd``) systemd hands the
service's own group to it: ``/sys/fs/cgroup/system.slice/railyard.service``. railyard then
nests everything there: the server moves itself into the leaf ``supervisor`` (cgroup v2 lets
a group with processes in it hand no controller to its children) and the steps' ``railyard``
parent is made beside it. Elsewhere (cgroup v1, not under systemd, no delegation) today's
layout, ``/sys/fs/cgroup/railyard``, is kept.

Detected from ``/proc/self/cgroup`` (the ``0::`` line) and the ``trusted.delegate`` extended
attribute systemd (v251 and later) sets on a group it delegated.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from pathlib import Path

CGROUP_MOUNT = Path("/sys/fs/cgroup")
PROC_SELF_CGROUP = Path("/proc/self/cgroup")
SUPERVISOR = "supervisor"
DELEGATE_XATTRS = ("trusted.delegate", "user.delegate")


def own_v2_group(proc_cgroup_text: str) -> str | None:
    """This process's group in the unified hierarchy (``/system.slice/x.service``)."""
    for line in proc_cgroup_text.splitlines():
        if line.startswith("0::"):
            return line[3:].strip() or None
    return None


def marked_delegated(group: Path) -> bool:
    """Whether systemd marked ``group`` delegated to the service in it."""
    for name in DELEGATE_XATTRS:
        try:
            if os.getxattr(group, name).strip(b"\0") in (b"1", b"true", b"yes"):
                return True
        except OSError:
            continue
    return False


def delegated_group(
    mount: Path = CGROUP_MOUNT,
    proc_cgroup: Path = PROC_SELF_CGROUP,
    delegated: Callable[[Path], bool] = marked_delegated,
) -> Path | None:
    """The service group systemd delegated to this process, or None (today's layout)."""
    if not (mount / "cgroup.controllers").is_file():
        return None  # cgroup v1 or hybrid: systemd does not own the unified tree's root here
    try:
        relative = own_v2_group(proc_cgroup.read_text())
    except OSError:
        return None
    if relative is None or relative == "/":
        return None
    group = mount / relative.lstrip("/")
    if group.name == SUPERVISOR:  # moved there already (an executor made twice)
        group = group.parent
    if not group.name.endswith(".service") or not delegated(group):
        return None
    if not os.access(group, os.W_OK):
        return None
    return group


def enter_supervisor(group: Path) -> Path:
    """Move this process into ``group/supervisor``, so that ``group`` holds no process and can
    hand controllers (cpu, memory) to the steps' groups beside it."""
    leaf = group / SUPERVISOR
    leaf.mkdir(exist_ok=True)
    (leaf / "cgroup.procs").write_text(str(os.getpid()))
    return leaf


@functools.cache
def nesting_root() -> Path | None:
    """The delegated group railyard nests its cgroups under (the server moved into its
    ``supervisor`` leaf), or None where today's layout holds; decided once per process."""
    group = delegated_group()
    if group is None:
        return None
    try:
        enter_supervisor(group)
    except OSError:
        return None  # the group exists but will not take us: keep today's layout
    return group
