"""A job step's cgroups as one thing: made before its processes start, ended with it.

Per step (job, attempt, node) the executor makes a tracking group
(:mod:`railyard.exec.cgroups.proctrack`), a devices group confining it to its GPUs
(:mod:`railyard.exec.cgroups.devices`) and, where cgroup v2 takes them, a CPU/memory limits group
(:mod:`railyard.exec.cgroups.cgroup`, the same directory as the tracking group on a v2-only host);
the wrapper joins them all before it runs anything as the user. The names are derived from
the step, never stored, so an executor that adopts a step after a restart ends it the same
way.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from railyard.exec.cgroups import cgroup, devices, proctrack

PARENT = proctrack.PARENT
STALE_AFTER_S = 600.0  # an empty step group this old is no start in flight
RETRY_TIMEOUT_S = 0.05  # the loop's thread must not wait long on a stuck process


@dataclass(frozen=True)
class StepGroups:
    """What the wrapper of a step is told: the groups it joins, whether it must reap orphans
    itself, and the header lines that say what holds."""

    paths: tuple[str, ...]
    subreaper: bool
    limits_line: str
    devices_line: str


@dataclass
class Containment:
    """This machine's tracking and device confinement, chosen once (at start-up)."""

    tracking: proctrack.Tracking = field(default_factory=proctrack.choose)
    confinement: devices.Confinement | None = None  # None: chosen for this tracking
    limits_root: Path = field(default_factory=cgroup.limits_root)
    leftover: set[str] = field(default_factory=set)  # steps whose groups are not gone yet

    def __post_init__(self) -> None:
        if self.confinement is None:
            v2 = self.tracking.parent if self.tracking.kind == "cgroup2" else None
            self.confinement = devices.choose(v2_parent=v2)

    @property
    def device_guard(self) -> devices.Confinement:
        assert self.confinement is not None  # set in __post_init__
        return self.confinement

    def lines(self) -> list[str]:
        """What ``railyard up`` says."""
        return [self.tracking.describe(), self.device_guard.describe()]

    def enter(
        self,
        step: str,
        gpu_minors: Iterable[int],
        limits: cgroup.Limits,
        *,
        container: bool = False,
        container_steps: bool = False,
    ) -> StepGroups:
        """Make the step's groups; an OSError leaves nothing half made. ``container``: the
        step's processes run in containers, whose runtime makes their groups below these and
        confines their devices itself (:meth:`devices.Confinement.make`); ``container_steps``:
        its processes run bare, and ``srun`` may start containers below (`exec.task.stepd`)."""
        made: list[Path] = []
        try:
            group = self.tracking.make(step)
            if group is not None:
                made.append(group)
            devices_line = self.device_guard.describe()
            if container and self.device_guard.kind == "v1" and self.device_guard.parent:
                devices_line = ("devices: each job reaches only its own GPUs (the devices cgroup "
                                "its container runtime makes, under the step's)")  # fmt: skip
            if self.device_guard.parent is not None:
                confined = self.device_guard.make(step, gpu_minors, runtime_confines=container,
                                                  tasks_apart=container_steps)  # fmt: skip
                if confined not in made:  # bpf: the tracking group itself
                    made.append(confined)
            limits_group, limits_line = cgroup.prepare(step, limits, self.limits_root)
        except OSError:
            self.end(step)
            raise
        if limits_group is not None and limits_group not in made:
            made.append(limits_group)
        return StepGroups(
            paths=tuple(str(p) for p in made),
            subreaper=group is None,
            limits_line=limits_line,
            devices_line=devices_line,
        )

    def cgroup_parent(self, step: str) -> str | None:
        """The step's tracking group as a container runtime names a cgroup parent (its path
        below the hierarchy's root); None without a tracking group."""
        group = self.tracking.group(step)
        if group is None or self.tracking.parent is None:
            return None
        return f"/{self.tracking.parent.name}/{group.name}"

    def signal(self, step: str, sig: int, skip_pgids: Collection[int] = ()) -> None:
        """``sig`` to every tracked process of the step outside ``skip_pgids``."""
        self.tracking.signal(step, sig, skip_pgids)

    def kill(self, step: str) -> None:
        """SIGKILL every tracked process of the step (the groups stay until :meth:`end`)."""
        self.tracking.kill(step)

    def end(self, step: str, timeout_s: float = proctrack.KILL_TIMEOUT_S) -> bool:
        """Kill every process of the step and remove its groups; False (and retried by
        :meth:`retry`) when a process would not die, or a group would not go, in time."""
        deadline = time.monotonic() + timeout_s
        if self.tracking.kill(step, timeout_s) and proctrack.until(
            lambda: self._remove(step), deadline
        ):
            self.leftover.discard(step)
            return True
        self.leftover.add(step)
        return False

    def _remove(self, step: str) -> bool:
        """Remove every group of the step, each as far as it goes; True once all are gone.
        A container runtime's monitor (Podman's ``conmon``, root) joins the step's groups of
        the v1 hierarchies but not its tracking group: it is killed here, with anything else
        left in them (``podman rm`` cleans up after it, in ``exec.local``)."""
        devices_parent = self.device_guard.parent
        own = (self.tracking.group(step), devices_parent and devices_parent / step,
               self.limits_root / cgroup.PARENT / step)  # fmt: skip
        groups = dict.fromkeys(
            [*(g for g in own if g is not None), *(h / PARENT / step for h in _hierarchies())]
        )
        for pid in {pid for group in groups for pid in proctrack.all_procs(group)}:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return all([cgroup.remove_tree(group) for group in groups])

    def sweep(self, min_age_s: float = STALE_AFTER_S) -> list[str]:
        """Remove empty step groups older than ``min_age_s``, and the empty groups below them:
        left by a server whose jobs were
        ended behind its back (killed with it, then killed by hand). A young empty group may
        be a start in flight of another server on this machine, so it stays."""
        removed = []
        now = time.time()
        for parent in dict.fromkeys((self.tracking.parent, self.device_guard.parent)):
            for group in parent.iterdir() if parent is not None else ():
                try:
                    if not group.is_dir() or now - group.stat().st_mtime < min_age_s:
                        continue
                    # with the groups a runtime made below it (a batch step's `batch`)
                    if not proctrack.all_procs(group) and cgroup.remove_tree(group):
                        removed.append(str(group))
                except OSError:  # gone meanwhile
                    continue
        return removed

    def retry(self, timeout_s: float = RETRY_TIMEOUT_S) -> bool:
        """End the steps an earlier :meth:`end` could not (a process stuck in the kernel);
        True when none is left."""
        for step in list(self.leftover):
            self.end(step, timeout_s=timeout_s)
        return not self.leftover


def _hierarchies() -> list[Path]:
    """The mounted cgroup hierarchies (v1 controllers, and v2 where mounted beside them)
    whose ``railyard`` parent this server may use: a plain server made no group in root's."""
    try:
        return [p for p in proctrack.CGROUP_MOUNT.iterdir()
                if (p / PARENT).is_dir() and os.access(p / PARENT, os.W_OK | os.X_OK)]  # fmt: skip
    except OSError:
        return []
