"""Across-node sweeps in the simulated world: the live sweep's steps on the virtual clock.

A `SweepRequest` asks at its time for a sweep over nodes, as an admin's `POST
/v1/health/across` does live (`control.loop.sweeps`). Everything that decides is the live
sweep's own code: the nodes it covers (`sched.health.sweep_nodes`), the hold on them and when
a group's test starts (`with_sweep`, then `group_ready` in the step), when a test is overdue
or the sweep must stop (`across_test_overdue`, `group_blocked`), the search
(`health.bisect.Bisection`), the judging and each node's result (`GroupTest`, `node_result`),
and the rule that drains a blamed node (`on_finding`, with the reason text live writes).

What the simulator adds is the world: a group's test is a system job on the virtual executor
(`world_tests`) that runs `across_test_s` and prints `across_busbw_gbps` x its slowest node's
speed, judged against `across_busbw_gbps`; a node failing under it ends it with no figure.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from railyard.exec.protocol import ExitReport, LaunchSpec
from railyard.health.across import figure_of
from railyard.health.bisect import JOB_PREFIX, Bisection, GroupTest, node_result
from railyard.health.result import Expected, Status
from railyard.sched.health import (
    Finding,
    NodeChange,
    across_test_overdue,
    group_blocked,
    sweep_nodes,
)
from railyard.sched.model import Node
from railyard.sim.executor import SystemJobs, SystemRun, VirtualExecutor
from railyard.sim.health import HealthState, HealthWorld

_COMMAND = ("railyard-sim", "health.across")
_DIR = Path("/nonexistent/railyard-sim")  # LaunchSpec needs paths; nothing is written


def world_tests(world: HealthWorld) -> SystemJobs:
    """The virtual executor's system jobs: a group test runs `across_test_s` and its rank 0
    prints the busbw the world gives the group (its slowest node's share of healthy)."""

    def run(spec: LaunchSpec, speed: float) -> SystemRun | None:
        if not spec.job_id.startswith(JOB_PREFIX):
            return None
        busbw_gbps = world.across_busbw_gbps * speed
        return SystemRun(world.across_test_s, json.dumps({"busbw_gbps": busbw_gbps}))

    return run


@dataclass
class Sweep:
    nodes: list[str]
    search: Bisection
    job_id: str | None = None  # the group test under way
    started_t_s: float = 0.0
    cancelled: bool = False  # the test under way ran past its limit
    tests: list[GroupTest] = field(default_factory=list)


@dataclass
class Counts:
    """What the run summary reports of sweeps."""

    asked: int = 0
    refused: int = 0  # one was under way, or fewer than 2 nodes were checkable
    stopped: int = 0  # ended before its search did (`group_blocked`)
    done: int = 0
    tests: int = 0
    blamed: int = 0  # nodes drained by a sweep's verdict


class AcrossSweeps:
    """The sweep under way in a run, if any; the driver calls these in its step's order."""

    def __init__(self, health: HealthState, executor: VirtualExecutor) -> None:
        self.health = health
        self.world = health.world
        self.executor = executor
        self.sweep: Sweep | None = None
        self.counts = Counts()
        self.expected = Expected(self.world.across_busbw_gbps, "the simulated world's busbw")
        self._ended: list[ExitReport] = []

    def request(self, nodes: Sequence[Node], asked: Sequence[str]) -> tuple[str, ...]:
        """Begin a sweep over `asked` (every checkable node when empty); the nodes it covers
        (empty: refused, as live refuses a second sweep or one over fewer than two nodes)."""
        reasons = self.health.reasons
        covered = sweep_nodes([(n.name, n.state, reasons.get(n.name, "")) for n in nodes], asked)
        if self.sweep is not None or not covered:
            self.counts.refused += 1
            return ()
        self.sweep = Sweep(list(covered), Bisection(covered))
        self.counts.asked += 1
        return covered

    def watch(self, nodes: Mapping[str, Node], now_t_s: float) -> str | None:
        """Cancel an overdue test; stop the sweep when its next group can never be tested
        (the reason, which the sweep's record keeps; None: it goes on)."""
        sweep = self.sweep
        if sweep is None:
            return None
        if sweep.job_id is not None:
            if across_test_overdue(sweep.started_t_s, now_t_s) and not sweep.cancelled:
                self.executor.cancel(sweep.job_id)
                sweep.cancelled = True
            return None
        reasons = self.health.reasons
        found = {n: (node.state, reasons.get(n, "")) for n, node in nodes.items()}
        why = group_blocked(sweep.search.group or [], found)
        if why is not None:
            self.sweep = None
            self.counts.stopped += 1
        return why

    def held(self) -> frozenset[str]:
        return frozenset(self.sweep.nodes) if self.sweep is not None else frozenset()

    def wanted(self) -> tuple[str, ...]:
        """The group to test next, when no test is under way."""
        sweep = self.sweep
        if sweep is None or sweep.job_id is not None or sweep.search.group is None:
            return ()
        return tuple(sweep.search.group)

    def start(self, group: Sequence[str], nodes: Mapping[str, Node], now_t_s: float) -> bool:
        """Launch the group's test (the step found its nodes idle), as live: every GPU of
        the group's smallest node on each node."""
        sweep = self.sweep
        if sweep is None or sweep.job_id is not None or list(group) != sweep.search.group:
            return False
        job_id = f"{JOB_PREFIX}{int(now_t_s * 1000)}"
        gpus = [nodes[n].gpus for n in group]
        per_node = max(1, min(gpus))
        self.executor.start(
            LaunchSpec(
                job_id=job_id,
                command=_COMMAND,
                placement={n: tuple(range(nodes[n].gpus and per_node)) for n in group},
                gpus_per_worker=1 if gpus[0] else 0,
                workers=per_node * len(group),
                ntasks_per_node=per_node,
                log_dir=_DIR / job_id / "logs",
                checkpoint_dir=_DIR / job_id / "checkpoints",
            )
        )
        sweep.job_id, sweep.started_t_s, sweep.cancelled = job_id, now_t_s, False
        self.counts.tests += 1
        return True

    def take(self, reports: list[ExitReport]) -> list[ExitReport]:
        """Reports of jobs; the sweep's test's is kept for `finish`."""
        mine = self.sweep.job_id if self.sweep is not None else None
        self._ended += [r for r in reports if r.job_id == mine]
        return [r for r in reports if r.job_id != mine]

    @property
    def ended(self) -> bool:
        return bool(self._ended)

    def finish(
        self, nodes: Mapping[str, Node], now_t_s: float
    ) -> tuple[list[GroupTest], list[NodeChange]]:
        """Judge the test that ended; when the search is over, each node's finding and the
        health rule's change to it."""
        sweep, judged = self.sweep, []
        for report in self._ended:
            assert sweep is not None
            test = self._judge(report, list(sweep.search.group or []))
            sweep.tests.append(test)
            sweep.job_id = None
            sweep.search.record(test.ok)
            judged.append(test)
        self._ended = []
        if sweep is None or sweep.search.group is not None:
            return judged, []
        self.sweep = None
        self.counts.done += 1
        changes = []
        for name in sweep.nodes:
            result = node_result(name, [t for t in sweep.tests if name in t.group],
                                 sweep.search.blamed)  # fmt: skip
            self.health.last_check_t_s[name] = now_t_s  # live: the node's health_t_s
            if result.status is Status.SKIP:
                continue
            finding = Finding(result.status.value)
            change = self.health.found(name, nodes[name].state, finding, result.reason(), now_t_s)
            if change is not None:
                changes.append(change)
                self.counts.blamed += finding is Finding.FAIL
        return judged, changes

    def _judge(self, report: ExitReport, group: list[str]) -> GroupTest:
        """The figure rank 0 printed, read back as live reads it (none: the test failed)."""
        log_path = _DIR / report.job_id / "logs" / "rank-0.log"
        found = self.executor.read_log(group[0], str(log_path), 0, 1 << 20)
        try:
            if found is None:
                raise ValueError("no output")
            return GroupTest(group, figure_of(found[0].decode()), self.expected)
        except (StopIteration, ValueError, KeyError, TypeError) as exc:
            why = f"the test printed no figure (exit {report.exit_code}): {exc}"
            return GroupTest(group, None, self.expected, why[:300])

    def gpu_s(self) -> float:
        """GPU time the sweeps' tests held their nodes."""
        work = self.executor.work
        return sum(work[j].allocated_gpu_s for j in self.executor.system_ids)


__all__ = ["AcrossSweeps", "Counts", "world_tests"]
