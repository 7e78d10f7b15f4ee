"""Process tracking: every process of a job step ends with it, however it detached.

A process group is not enough: ``setsid nohup sleep &`` or a fork-setsid-fork daemon leaves
it and outlives a ``killpg``. Like Slurm's ``proctrack/cgroup``, each job step (job, attempt,
node: the batch step and its ``srun`` steps alike) gets a cgroup that its wrapper joins
before it runs anything as the user, so every descendant is born inside and none can leave
(moving a process out needs write access to a cgroup it does not own). Ending the step kills
the cgroup, and the cgroup is removed after. Chosen once per executor, best first:

- ``cgroup2``: a writable cgroup v2 hierarchy whose groups have ``cgroup.kill`` (Linux 5.14):
  one write kills every process in the group atomically;
- ``freezer``: the cgroup v1 freezer: freeze, SIGKILL every pid in ``cgroup.procs``, thaw,
  until the group is empty (frozen processes cannot fork away between the read and the kill);
- ``subreaper``: no cgroup can be made; the wrapper marks itself a child subreaper
  (``PR_SET_CHILD_SUBREAPER``), so orphaned descendants are reparented to it rather than to
  init, and when the command ends it kills and reaps them. A SIGKILL of the wrapper itself
  (the last step of a cancel) leaves them to init: this mode is weaker, and ``railyard up``
  says so.

Kernel references: https://docs.kernel.org/admin-guide/cgroup-v2.html (cgroup.kill),
https://docs.kernel.org/admin-guide/cgroup-v1/freezer-subsystem.html, prctl(2).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import signal
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path

from railyard.exec.cgroups import cgroup, delegation

CGROUP_MOUNT = Path("/sys/fs/cgroup")
V2_CANDIDATES = (CGROUP_MOUNT, CGROUP_MOUNT / "unified")
FREEZER = CGROUP_MOUNT / "freezer"
PARENT = "railyard"
KILL_TIMEOUT_S = 5.0
FREEZE_WAIT_S = 1.0
POLL_S = 0.01


def step_name(job_id: str, restart_count: int, records_dir: Path) -> str:
    """The cgroup name of one job step: readable, and unique per server (job ids repeat across
    state directories, the records directory does not) and per node (a node's records dir)."""
    import hashlib  # here, not at the top: every rank's wrapper imports this module

    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", job_id)[:64]
    digest = hashlib.sha256(str(records_dir).encode()).hexdigest()[:12]
    return f"job_{safe}_{restart_count}_{digest}"


@dataclass(frozen=True)
class Tracking:
    """How this machine tracks a step's processes: ``kind`` is ``cgroup2``, ``freezer`` or
    ``subreaper``; ``parent`` the directory the steps' cgroups go in (None for subreaper);
    ``why`` why the better kinds were not used (empty when the best one was)."""

    kind: str
    parent: Path | None = None
    why: str = ""

    def describe(self) -> str:
        """One line for ``railyard up``."""
        if self.kind == "cgroup2":
            return f"process tracking: cgroup v2 with cgroup.kill ({self.parent})"
        if self.kind == "freezer":
            how = f"process tracking: cgroup v1 freezer ({self.parent})"
        else:
            how = (
                "process tracking: the wrapper as child subreaper only, weaker than a cgroup "
                "(a process that outlives a SIGKILLed wrapper escapes)"
            )
        return f"{how}; {self.why}" if self.why else how

    def group(self, step: str) -> Path | None:
        return None if self.parent is None else self.parent / step

    def make(self, step: str) -> Path | None:
        """Create the step's cgroup (None when this kind has none)."""
        group = self.group(step)
        if group is not None:
            group.mkdir(exist_ok=True)
        return group

    def pids(self, step: str) -> list[int]:
        group = self.group(step)
        return [] if group is None else procs(group)

    def signal(self, step: str, sig: int, skip_pgids: Collection[int] = ()) -> None:
        """Send ``sig`` to every process of the step outside ``skip_pgids`` (the groups the
        caller signalled already: a handler must not run twice)."""
        for pid in self.pids(step):
            if _pgid(pid) not in skip_pgids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)

    def kill(self, step: str, timeout_s: float = KILL_TIMEOUT_S) -> bool:
        """SIGKILL every process of the step; True once the group is empty (or absent)."""
        group = self.group(step)
        if group is None or not group.is_dir():
            return True
        if self.kind == "cgroup2":
            return kill_v2(group, timeout_s)
        return kill_frozen(group, timeout_s)

    def end(self, step: str, timeout_s: float = KILL_TIMEOUT_S) -> bool:
        """Kill the step and remove its cgroup; False when something is left (retry later)."""
        deadline = time.monotonic() + timeout_s
        if not self.kill(step, timeout_s):
            return False
        group = self.group(step)
        return group is None or until(lambda: cgroup.remove_tree(group), deadline)


def until(done: Callable[[], bool], deadline: float) -> bool:
    """Call ``done`` until it says True or ``deadline`` (monotonic) passes. Removing a group
    right after its last process was killed can be refused for a moment: the kernel counts a
    task until its exit completes, after it left ``cgroup.procs``."""
    while not done():
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL_S)
    return True


def _pgid(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat[stat.rindex(")") + 2 :].split()[2])


def _going(exc: OSError) -> bool:
    """Is this what a group's file answers once the group is gone, or going? A group being
    removed answers ENODEV, not ENOENT, for a moment."""
    return exc.errno in (errno.ENOENT, errno.ENODEV)


def procs(group: Path) -> list[int]:
    """The processes of ``group`` itself (not of the groups below it): none once it is gone,
    or going (a cancel that raced its own job's end failed on ENODEV in the main tier)."""
    try:
        return [int(line) for line in (group / "cgroup.procs").read_text().split()]
    except OSError as exc:
        if _going(exc):
            return []
        raise


def all_procs(group: Path) -> list[int]:
    """The processes of ``group`` and of every group below it (a container runtime makes
    its tasks' groups under the step's)."""
    found = procs(group)
    try:
        below = [p for p in group.iterdir() if p.is_dir()]
    except OSError:
        below = []
    for child in below:
        found += all_procs(child)
    return found


def kill_v2(group: Path, timeout_s: float) -> bool:
    """``cgroup.kill``: the kernel kills every process in the group, new forks included."""
    deadline = time.monotonic() + timeout_s
    try:
        (group / "cgroup.kill").write_text("1")
    except OSError as exc:  # gone or going: nothing left in it to kill (the main tier's
        if not _going(exc):  # teardown met ENODEV when a job's end raced its cancel)
            raise
    while all_procs(group):
        if time.monotonic() > deadline:
            return False
        time.sleep(POLL_S)
    return True


def kill_frozen(group: Path, timeout_s: float) -> bool:
    """The v1 freezer loop (Slurm's): freeze so nothing forks, SIGKILL each pid, thaw so the
    kills land, until the group is empty."""
    deadline = time.monotonic() + timeout_s
    state = group / "freezer.state"
    while all_procs(group):
        if time.monotonic() > deadline:
            return False
        state.write_text("FROZEN")
        frozen_by = time.monotonic() + FREEZE_WAIT_S
        while state.read_text().strip() != "FROZEN" and time.monotonic() < frozen_by:
            time.sleep(POLL_S)  # FREEZING: a task in the kernel; kill what is there anyway
        for pid in all_procs(group):  # freezing a group freezes the groups below it
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        state.write_text("THAWED")
        time.sleep(POLL_S)
    return True


def _is_v2(root: Path) -> bool:
    return (root / "cgroup.controllers").is_file()


def _try_parent(root: Path, probe: str) -> tuple[Path | None, str]:
    """``root/railyard`` made (or found) and holding ``probe``; else None and why not."""
    parent = root / PARENT
    try:
        parent.mkdir(exist_ok=True)
    except OSError as exc:
        return None, f"cannot make {parent}: {exc.strerror or exc}"
    try:
        found = (parent / probe).exists()
    except OSError as exc:  # made by root earlier, 0700: a plain server cannot look in
        return None, f"cannot look into {parent}: {exc.strerror or exc}"
    if not found:
        return None, f"{parent} has no {probe}"
    if not os.access(parent, os.W_OK):  # made by root earlier; this server is not root
        return None, f"{parent} is not writable by this server"
    return parent, ""


def choose(v2_roots: tuple[Path, ...] | None = None, freezer: Path = FREEZER) -> Tracking:
    """The best tracking this machine allows (makes the ``railyard`` parent groups): by
    default under the group systemd delegated to this service, else at the mount's root."""
    if v2_roots is None:
        nested = delegation.nesting_root()
        v2_roots = (nested,) if nested is not None else V2_CANDIDATES
    reasons = []
    for root in v2_roots:
        if not _is_v2(root):
            continue
        parent, why = _try_parent(root, "cgroup.kill")
        if parent is not None:
            return Tracking("cgroup2", parent)
        reasons.append(why)
    if not reasons:
        reasons.append("no cgroup v2 mount at " + " or ".join(str(r) for r in v2_roots))
    if (freezer / "cgroup.procs").is_file():
        parent, why = _try_parent(freezer, "freezer.state")
        if parent is not None:
            return Tracking("freezer", parent, "; ".join(reasons))
        reasons.append(why)
    else:
        reasons.append(f"no cgroup v1 freezer at {freezer}")
    return Tracking("subreaper", None, "; ".join(reasons))


# -- the subreaper fallback (run inside the wrapper) ------------------------------------------

PR_SET_CHILD_SUBREAPER = 36  # <linux/prctl.h>


def become_subreaper() -> bool:
    """Make orphaned descendants of this process its children (prctl(2)); False if refused."""
    import ctypes  # only a wrapper without a tracking group gets here

    libc = ctypes.CDLL(None, use_errno=True)
    return int(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0


def children(pid: int) -> list[int]:
    """Live children of ``pid``, from /proc (their parent pid is field 4 of stat)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[1]) == pid and fields[0] != "Z":
            found.append(int(entry.name))
    return found


def kill_descendants() -> int:
    """SIGKILL every child (orphans land here as they are freed) and reap, until none is
    left; the number reaped."""
    me, reaped = os.getpid(), 0
    while True:
        for pid in children(me):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return reaped
        if pid:
            reaped += 1
        else:
            time.sleep(POLL_S)
