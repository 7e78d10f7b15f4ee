"""Across-node checks: all_reduce over groups of nodes, bisected to the slow ones (seed 004).

A sweep tests a set of nodes the way seed 004 hunts a bad node: one all_reduce over the whole
set; if it falls short, the halves, and so on down to pairs resolved against a node already
known good (`health.bisect`). Each test is a system job over every GPU of the group's nodes
(one rank on a node without GPUs) running `python -m railyard.health.across` through the
executor, so on a Ray cluster its ranks cross the real network between the machines.

A test is judged against, in order: the twin's all_reduce prediction for the group's placement
on the blueprint's fabric (`health.expect.group_busbw_gbps`: a pair under one leaf expects more
than a pair across the spine); else the admin's absolute floor (`--health-across-floor`, GB/s,
e.g. from `benchmarks/` on a known-good pair); else nothing (the figures are stored, no node is
judged). A test passes at `fraction` of its expectation (0.8 by default, as the node checks:
NCCL's own run-to-run spread at 1 GiB is a few percent, a bad link or throttled NIC costs 2x).

When the search ends, each blamed node gets a failing ``allreduce-across`` result with the
figure of its slowest group (drained, Slurm-style reason), every other node a passing one (a
node health had drained comes back). The sweep's nodes take no new job until it ends: the
scheduler sees them as being checked, so a group's test starts when its nodes are idle.
State is in memory (like checks in flight): a restart forgets a sweep; ask again.

The rules are shared with the simulator's sweeps (`sim.across`): gating in `sched.health`, the
search, the judging of a figure and each node's result in `health.bisect`.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session

from railyard.control.errors import Conflict, Invalid, NotFound
from railyard.control.health_schemas import AcrossOut, AcrossTestOut, HealthResultIn
from railyard.control.loop.healthjobs import SAFE_PATH, system_output
from railyard.control.store.paths import attempts_dir, checkpoint_dir, log_path, logs_dir
from railyard.control.store.tables import HOLDING_STATES, JobRow, NodeRow
from railyard.control.usecases.nodehealth import apply_run
from railyard.exec.protocol import Executor, ExitReport, LaunchSpec
from railyard.health.across import figure_of
from railyard.health.bisect import JOB_PREFIX, Bisection, node_result
from railyard.health.bisect import GroupTest as Test
from railyard.health.result import Expected
from railyard.sched.health import (
    ACROSS_TEST_LIMIT_S,
    across_test_overdue,
    group_blocked,
    periodic_sweep_nodes,
    sweep_nodes,
)
from railyard.sched.model import NodeState

log = logging.getLogger("railyard.health")
PREFIX = JOB_PREFIX  # system jobs' ids
REPORTER = "railyard (across-node sweep)"
Expect = Callable[[Sequence[str], int], Expected | None]  # (group, ranks per node)


@dataclass
class Sweep:
    nodes: list[str]
    by: str
    search: Bisection
    job_id: str | None = None  # the group test under way
    ranks_per_node: int = 1  # of the test under way: every GPU of its smallest node
    tests: list[Test] = field(default_factory=list)
    stopped: str = ""  # why it ended before its search did
    started_t_s: float = 0.0  # of the test under way
    cancelled: bool = False  # the test under way ran past its limit


def floor_expectation(floor_gbps: float) -> Expect:
    """The admin's absolute floor for any group (`--health-across-floor`)."""
    source = f"floor {floor_gbps:g} GB/s (--health-across-floor)"
    return lambda _group, _ranks: Expected(floor_gbps, source)


class AcrossChecks:
    """The sweep under way, if any. `request` is called from the API's threads; the rest from
    the loop's thread only."""

    def __init__(
        self,
        executor: Executor,
        expect: Expect | None,
        *,
        state_dir: Path,
        spool_dir: Path,
        fail_requeues: bool = False,
        python: str = sys.executable,
        interval_s: float | None = None,
    ) -> None:
        """`interval_s`: sweep the idle ready nodes this often (None: on request only)."""
        self.executor = executor
        self.interval_s = interval_s
        self._next_t_s = 0.0  # the first periodic sweep: at the first step
        self.expect = expect
        self.state_dir = state_dir
        self.spool = spool_dir / "system"
        self.fail_requeues = fail_requeues
        self.python = python
        self.sweep: Sweep | None = None
        self.last: Sweep | None = None  # the last sweep that ended, for its status
        self._lock = threading.Lock()
        self._asked: list[tuple[list[str], str]] = []
        self._ended: list[ExitReport] = []

    # -- asking (API thread) ------------------------------------------------------------------

    def request(self, session: Session, nodes: Sequence[str], by: str) -> list[str]:
        """Queue a sweep over `nodes` (all checkable nodes when empty); the nodes it covers."""
        rows = {r.name: r for r in session.scalars(select(NodeRow))}
        for name in nodes:
            if name not in rows:
                raise NotFound(f"no node {name!r}", hint="`railyard nodes` lists them")
        names = list(sweep_nodes(_states(rows.values()), nodes))
        if not names:
            raise Invalid(
                "nodes", "an across-node check needs 2 nodes or more that are ready (or held "
                "by health)", hint="name them, or resume drained nodes first",
            )  # fmt: skip
        with self._lock:
            if self.sweep is not None or self._asked:
                raise Conflict("an across-node sweep is under way; ask again when it ends")
            self._asked.append((names, by))
        return names

    # -- driving (loop thread) ----------------------------------------------------------------

    def held(self, session: Session, now_t_s: float) -> frozenset[str]:
        """Nodes the sweep holds (none take a new job until it ends)."""
        if self.interval_s is not None and self.sweep is None and now_t_s >= self._next_t_s:
            self._periodic(session, now_t_s)
        self._begin()
        if self.sweep is not None:
            self._watch(session, self.sweep, now_t_s)
        return frozenset(self.sweep.nodes) if self.sweep else frozenset()

    def _watch(self, session: Session, sweep: Sweep, now_t_s: float) -> None:
        """Acts on the rules of `sched.health`: an overdue test is cancelled; a group that can
        never be tested stops the sweep."""
        if sweep.job_id is not None:
            if across_test_overdue(sweep.started_t_s, now_t_s) and not sweep.cancelled:
                log.warning("across-node test %s ran past %.0f s: cancelled",
                            sweep.job_id, ACROSS_TEST_LIMIT_S)  # fmt: skip
                self.executor.cancel(sweep.job_id)
                sweep.cancelled = True
            return
        group = sweep.search.group or []
        rows = session.scalars(select(NodeRow).where(NodeRow.name.in_(group)))
        why = group_blocked(group, {r.name: (NodeState(r.state), r.reason) for r in rows})
        if why is not None:
            self._abort(why)

    def _periodic(self, session: Session, now_t_s: float) -> None:
        """Queue a sweep over the nodes `sched.health.periodic_sweep_nodes` picks now."""
        assert self.interval_s is not None
        busy = {
            node
            for placement in session.scalars(
                select(JobRow.placement).where(JobRow.state.in_(HOLDING_STATES))
            )
            for node in placement or {}
        }
        nodes = periodic_sweep_nodes(_states(session.scalars(select(NodeRow))), busy)
        with self._lock:
            if nodes and not self._asked:
                self._asked.append((list(nodes), "the schedule (--health-across-interval)"))
        self._next_t_s = now_t_s + self.interval_s

    def wanted(self) -> tuple[str, ...]:
        """The group to test next, when no test is under way."""
        sweep = self.sweep
        if sweep is None or sweep.job_id is not None or sweep.search.group is None:
            return ()
        return tuple(sweep.search.group)

    def _begin(self) -> None:
        with self._lock:
            if self.sweep is None and self._asked:
                nodes, by = self._asked.pop(0)
                self.sweep = Sweep(nodes, by, Bisection(nodes))
                log.info("across-node sweep over %d nodes, asked by %s", len(nodes), by)

    def start(self, session: Session, group: Sequence[str], now_t_s: float) -> str | None:
        """Launch the group's test (the scheduler found its nodes idle); its system job id."""
        sweep = self.sweep
        if sweep is None or sweep.job_id is not None or list(group) != sweep.search.group:
            return None
        rows = [session.get(NodeRow, n) for n in group]
        if any(r is None for r in rows):
            self._abort(f"a node of {list(group)} left the inventory")
            return None
        job_id = f"{PREFIX}{int(now_t_s * 1000)}"
        found = [r for r in rows if r is not None]
        sweep.ranks_per_node = max(1, min(r.gpus for r in found))
        try:
            self.executor.start(self._spec(job_id, found))
        except Exception as exc:  # the sweep cannot go on; its nodes are let go
            self._abort(f"the test could not start: {exc}")
            return None
        sweep.job_id, sweep.started_t_s, sweep.cancelled = job_id, now_t_s, False
        return job_id

    def _spec(self, job_id: str, rows: Sequence[NodeRow]) -> LaunchSpec:
        per_node = max(1, min(r.gpus for r in rows))
        command = (self.python, "-m", "railyard.health.across")
        return LaunchSpec(
            job_id=job_id,
            command=command,
            placement={r.name: tuple(range(r.gpus and per_node)) for r in rows},
            gpus_per_worker=1 if rows[0].gpus else 0,
            workers=per_node * len(rows),
            ntasks_per_node=per_node,
            env={"PATH": SAFE_PATH},
            log_dir=logs_dir(self.spool, job_id),
            checkpoint_dir=checkpoint_dir(self.spool, job_id),
            records_dir=attempts_dir(self.state_dir, job_id),
        )

    @property
    def ended(self) -> bool:
        """A test ended and waits for `finish`."""
        return bool(self._ended)

    def take(self, reports: list[ExitReport]) -> list[ExitReport]:
        """Reports of other jobs; the sweep's test's is kept for `finish`."""
        mine = self.sweep.job_id if self.sweep else None
        self._ended += [r for r in reports if r.job_id == mine]
        return [r for r in reports if r.job_id != mine]

    def finish(self, session: Session, now_t_s: float) -> list[str]:
        """Judge the test that ended and, when the search is over, apply its verdicts."""
        sweep, lines = self.sweep, []
        for report in self._ended:
            assert sweep is not None
            group = list(sweep.search.group or [])
            test = self._judge(report, group, sweep.ranks_per_node)
            sweep.tests.append(test)
            sweep.job_id = None
            sweep.search.record(test.ok)
            figure = f"{test.busbw_gbps:.3g} GB/s" if test.busbw_gbps is not None else "no figure"
            lines.append(f"across {','.join(group)}: {figure} ({'ok' if test.ok else 'slow'})")
        self._ended = []
        if sweep is not None and sweep.search.group is None:
            lines += self._conclude(session, sweep, now_t_s)
            self.sweep, self.last = None, sweep
        return lines

    def _judge(self, report: ExitReport, group: list[str], ranks: int) -> Test:
        expected = self.expect(group, ranks) if self.expect is not None else None
        try:
            path = log_path(self.spool, report.job_id, 0)  # rank 0 prints the figure
            text = system_output(self.executor, path, group[0])
            return Test(group, figure_of(text), expected)
        except (OSError, StopIteration, ValueError, KeyError, TypeError) as exc:
            why = f"the test printed no figure (exit {report.exit_code}): {exc}"
            return Test(group, None, expected, why[:300])

    def _conclude(self, session: Session, sweep: Sweep, now_t_s: float) -> list[str]:
        blamed = set(sweep.search.blamed)
        lines = []
        for node in sweep.nodes:
            if session.get(NodeRow, node) is None:
                continue
            mine = [t for t in sweep.tests if node in t.group]
            result = self._result(node, mine, sweep.search.blamed)
            out = apply_run(
                session, node, [result], now_t_s, f"{REPORTER}, asked by {sweep.by}",
                fail_requeues=self.fail_requeues,
            )  # fmt: skip
            lines.append(out.action)
        tests = len(sweep.tests)
        lines.append(f"across-node sweep over {len(sweep.nodes)} nodes: {tests} tests, "
                     f"slow: {', '.join(sorted(blamed)) or 'none'}")  # fmt: skip
        return lines

    @staticmethod
    def _result(node: str, tests: list[Test], blamed: Sequence[str]) -> HealthResultIn:
        """The node's result by `health.bisect.node_result` (the simulator's rule too)."""
        result = node_result(node, tests, blamed)
        return HealthResultIn(
            check=result.check,
            status=result.status.value,
            measured=result.measured,
            expected=result.expected,
            unit=result.unit,
            fail_below=result.fail_below,
            source=result.source,
            detail=result.detail,
        )

    def _abort(self, why: str) -> None:
        log.warning("across-node sweep stopped: %s", why)
        if self.sweep is not None:
            self.sweep.stopped = why[:300]
        self.sweep, self.last = None, self.sweep


def _states(rows: Iterable[NodeRow]) -> list[tuple[str, NodeState, str]]:
    return [(r.name, NodeState(r.state), r.reason) for r in rows]


def describe(checks: AcrossChecks) -> AcrossOut:
    """The sweep under way, else the last one that ended (its verdicts), else none."""
    with checks._lock:
        asked = list(checks._asked)
    if checks.sweep is None and asked:  # the loop takes it at its next step
        nodes, by = asked[0]
        return AcrossOut(active=True, nodes=nodes, detail=f"asked by {by}, starts next step")
    sweep = checks.sweep or checks.last
    if sweep is None:
        return AcrossOut(active=False, detail="no across-node sweep has run since the start")
    tests = [
        AcrossTestOut(
            group=t.group,
            busbw_gbps=t.busbw_gbps,
            expected_gbps=t.expected.value if t.expected else None,
            source=t.expected.source if t.expected else "no expectation (not judged)",
            ok=t.ok,
            detail=t.detail,
        )
        for t in list(sweep.tests)
    ]
    active = sweep is checks.sweep
    blamed = ", ".join(sweep.search.blamed) or "none"
    return AcrossOut(
        active=active,
        nodes=sweep.nodes,
        group=list(sweep.search.group or []),
        running=sweep.job_id is not None,
        tests=tests,
        detail=f"under way, asked by {sweep.by}"
        if active
        else f"stopped: {sweep.stopped}"
        if sweep.stopped
        else f"ended; slow: {blamed}",
    )
