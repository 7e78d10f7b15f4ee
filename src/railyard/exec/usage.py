"""What a job's processes use on this node, read from ``/proc``: CPU time and resident
memory, summed over the step's tracked processes (`exec.cgroups.proctrack`).

CPU time is ``utime + stime + cutime + cstime`` (fields 14-17 of ``/proc/<pid>/stat``, in
clock ticks): a process's own time and that of the children it reaped, so a short-lived
``srun`` task still counts once it is waited for, and nothing counts twice (a reaped child is
no longer listed). Resident memory is ``statm``'s second field in pages. See proc(5),
https://man7.org/linux/man-pages/man5/proc.5.html. Slurm's ``jobacct_gather/linux`` sums the
same fields (``sstat``'s AveCPU and MaxRSS).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from railyard.exec import procfs
from railyard.probe import GpuReading

TICKS_PER_S = os.sysconf("SC_CLK_TCK")
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")


@dataclass(frozen=True)
class ProcessUsage:
    """A step's processes at one instant: cumulative CPU seconds, resident bytes now."""

    cpu_s: float
    rss_bytes: int
    processes: int


@runtime_checkable
class MeasuresUsage(Protocol):
    """An executor that can say what a running job's processes on this node use."""

    def usage(self, job_id: str) -> ProcessUsage | None:
        """None when the job is not running here."""
        ...


@dataclass(frozen=True)
class NodeReading:
    """A running job's share of one node at one instant: its processes there (None: not
    measured) and the GPUs it holds there as NVML reads them."""

    node: str
    usage: ProcessUsage | None
    gpus: tuple[GpuReading, ...] = ()


Placements = Mapping[str, Mapping[str, Sequence[int]]]  # job -> node -> its GPU indices


@runtime_checkable
class ReadsNodes(Protocol):
    """An executor whose jobs run on machines the server cannot read (Ray's): each node
    reads its share and answers."""

    def read_jobs(self, placements: Placements) -> dict[str, list[NodeReading]]:
        """Job -> a reading per node that answered in time (jobs not running here: none)."""
        ...


def _read(pid: int) -> tuple[float, int] | None:
    try:
        stat = (procfs.PROC / str(pid) / "stat").read_text()
        statm = (procfs.PROC / str(pid) / "statm").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None  # ended between the listing and the read
    fields = stat[stat.rindex(")") + 2 :].split()  # field 3 (state) is fields[0]
    ticks = sum(int(f) for f in fields[11:15])
    return ticks / TICKS_PER_S, int(statm.split()[1]) * PAGE_BYTES


def measure(pids: Iterable[int]) -> ProcessUsage:
    """The sum over ``pids`` that still exist (each counted once)."""
    cpu_s, rss_bytes, count = 0.0, 0, 0
    for pid in set(pids):
        read = _read(pid)
        if read is not None:
            cpu_s, rss_bytes, count = cpu_s + read[0], rss_bytes + read[1], count + 1
    return ProcessUsage(cpu_s=cpu_s, rss_bytes=rss_bytes, processes=count)


def descendants(pids: Iterable[int]) -> Iterator[int]:
    """``pids`` and every live process below them (without a cgroup: the ranks' trees)."""
    stack = list(pids)
    seen: set[int] = set()
    while stack:
        pid = stack.pop()
        if pid in seen:
            continue
        seen.add(pid)
        yield pid
        stack.extend(procfs.children(pid))
