"""Reading processes through ``/proc``: how we recognise our workers without being their parent.

A pid alone is not an identity: the kernel reuses pids. A pid together with its start time
(field 22 of ``/proc/<pid>/stat``, in clock ticks since boot) is. See proc(5):
https://man7.org/linux/man-pages/man5/proc.5.html
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")


@dataclass(frozen=True)
class ProcStat:
    """The few fields of ``/proc/<pid>/stat`` we use."""

    pid: int
    state: str  # R, S, D, T, Z (zombie: exited, not yet reaped), X, ...
    pgid: int
    start_time_ticks: int
    ppid: int = 0

    @property
    def exited(self) -> bool:
        return self.state in ("Z", "X")


def read_stat(pid: int) -> ProcStat | None:
    """The process's stat, or None when no process has this pid."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # The command name (field 2) is in parentheses and may hold spaces or ")": split after the
    # last ")". Fields from 3 on are then space-separated.
    rest = text[text.rindex(")") + 2 :].split()
    return ProcStat(
        pid=pid, state=rest[0], pgid=int(rest[2]), start_time_ticks=int(rest[19]), ppid=int(rest[1])
    )


def start_time_ticks(pid: int) -> int:
    """The start time of a live process; raises ProcessLookupError when it is gone."""
    stat = read_stat(pid)
    if stat is None:
        raise ProcessLookupError(pid)
    return stat.start_time_ticks


def is_alive(pid: int, start_ticks: int) -> bool:
    """True while the process that had this pid and start time has not exited."""
    stat = read_stat(pid)
    return stat is not None and stat.start_time_ticks == start_ticks and not stat.exited


def group_is_ours(pgid: int, leader_start_ticks: int) -> bool:
    """Whether signalling process group ``pgid`` reaches only the group we started.

    While any member lives the kernel cannot hand the id to a new process, so the id is ours
    unless a process with pid == pgid exists and started at another time (a reused id).
    """
    stat = read_stat(pgid)
    return stat is None or stat.start_time_ticks == leader_start_ticks


def _live() -> Iterator[ProcStat]:
    """Every live (non-zombie) process, by scanning ``/proc``."""
    for entry in PROC.iterdir():
        if entry.name.isdigit():
            try:
                stat = read_stat(int(entry.name))
            except (OSError, ValueError, IndexError):
                continue  # vanished or unreadable between listing and reading
            if stat is not None and not stat.exited:
                yield stat


def group_members(pgid: int) -> list[int]:
    """Pids of live (non-zombie) processes in group ``pgid``."""
    return [stat.pid for stat in _live() if stat.pgid == pgid]


def children(pid: int) -> list[int]:
    """Pids of ``pid``'s live children: ``/proc/<pid>/task/<pid>/children`` (Linux 3.5+, with
    CONFIG_PROC_CHILDREN), else a scan of ``/proc`` for their parent."""
    try:
        listed = (PROC / str(pid) / "task" / str(pid) / "children").read_text()
        return [int(c) for c in listed.split()]
    except FileNotFoundError:
        return [stat.pid for stat in _live() if stat.ppid == pid]


def signal_children(pid: int, start_ticks: int, sig: int) -> bool:
    """Send ``sig`` to the children of process ``pid`` (the wrapper: its child is the batch
    shell) and not to their own children, if ``pid`` is still the process we started."""
    if not is_alive(pid, start_ticks):
        return False
    sent = False
    for child in children(pid):
        try:
            os.kill(child, sig)
            sent = True
        except ProcessLookupError:
            continue
    return sent


def _program(pid: int) -> str | None:
    """The executable process ``pid`` runs (``/proc/<pid>/exe``), None when unreadable."""
    try:
        return os.readlink(PROC / str(pid) / "exe")
    except OSError:
        return None


def signal_group_but_shells(pgid: int, leader: int, leader_start_ticks: int, sig: int) -> bool:
    """``sig`` to the group led by ``leader`` (the wrapper, which notes it) but not to the
    batch shell (the leader's child) nor to its subshells: processes running the shell's own
    program whose parents, up to the shell, all do too. A ``srun ... &`` in a script that set
    a ``trap`` runs under such a forked copy of the shell, which died of the signal and ended
    the script's ``wait``. Steps' tasks and whatever they start get it (Slurm signals the
    steps, not the batch step); srun notes it and waits on."""
    if not group_is_ours(pgid, leader_start_ticks):
        return False
    parent = {stat.pid: stat.ppid for stat in _live() if stat.pgid == pgid}
    shells = set(children(leader))
    # the shell's program, not the wrapper's (its step launcher is a fork of it, a child too)
    programs = {_program(pid) for pid in shells} - {None, _program(leader)}
    spared: dict[int, bool] = dict.fromkeys(shells, True)

    def is_shell(pid: int) -> bool:
        chain: list[int] = []
        while pid not in spared:
            if pid not in parent or _program(pid) not in programs:
                answer = False
                break
            chain.append(pid)
            pid = parent[pid]
        else:
            answer = spared[pid]
        spared.update(dict.fromkeys(chain, answer))
        return answer

    sent = False
    for pid in parent:
        if is_shell(pid):
            continue
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
            sent = True
    return sent


def signal_group(pgid: int, leader_start_ticks: int, sig: int) -> bool:
    """Send ``sig`` to the group if it is still ours; True when something received it."""
    if not group_is_ours(pgid, leader_start_ticks):
        return False
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    return True
