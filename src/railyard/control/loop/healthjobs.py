"""Health checks the scheduler runs: a system job per due node, its results stored and judged.

`sched.health` decides which idle nodes are due (the same choice the simulator makes); this
module starts `railyard health --json` on each through the executor, holding all the node's
GPUs so no user's job overlaps it (the lifecycle keeps the cycle off a node being checked),
and when the job exits reads its JSON, stores the run and applies the health rule, exactly as
a run reported through the API. A check that prints no results is a failed check.

System jobs are not rows in the jobs table: they belong to no user or queue and take no quota.
They run as the server's own account, with a minimal environment (never the server's). A
restart forgets checks in flight; their nodes are checked again when next due.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from pydantic import ValidationError
from sqlalchemy import select
from sqlalchemy.orm import Session

from railyard.control.health_schemas import HealthResultIn
from railyard.control.store.paths import attempts_dir, checkpoint_dir, log_path, logs_dir
from railyard.control.store.tables import NodeRow
from railyard.control.usecases.nodehealth import apply_run
from railyard.exec.protocol import Executor, ExitReport, LaunchSpec
from railyard.sched.health import HealthInput, HealthPolicy

log = logging.getLogger("railyard.health")
PREFIX = "health-"  # system jobs' ids: health-<node>-<ms>
REPORTER = "railyard (scheduled)"
SAFE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def health_input(
    session: Session, policy: HealthPolicy, checking: frozenset[str] = frozenset()
) -> HealthInput:
    """What the step needs to know of checks: each node's last check and its reason (the
    rule tells health's own holds from an admin's by it)."""
    rows = session.execute(select(NodeRow.name, NodeRow.reason, NodeRow.health_t_s)).all()
    return HealthInput(
        policy,
        checking,
        {name: t for name, _, t in rows if t is not None},
        {name: reason for name, reason, _ in rows if reason},
    )


def system_output(executor: Executor, path: Path, node: str) -> str:
    """A system job's rank log (its printed results): on this machine's disk, or read on the
    node it ran on through the executor (Ray); OSError when there is none."""
    read = getattr(executor, "read_log", None)
    if read is not None:
        found = read(node, str(path), 0, 1 << 20, anchor=str(path.parent))
        if found is None:
            raise OSError(f"no output of {path.name} on {node}")
        return bytes(found[0]).decode("utf-8", "replace")
    return path.read_text(encoding="utf-8", errors="replace")


class ScheduledChecks:
    """Checks under way, started and finished by the loop's thread only."""

    def __init__(
        self,
        policy: HealthPolicy,
        executor: Executor,
        *,
        state_dir: Path,
        spool_dir: Path,
        checks: Sequence[str] = (),
        python: str = sys.executable,
    ) -> None:
        self.policy = policy
        self.executor = executor
        self.state_dir = state_dir
        self.spool = spool_dir / "system"
        self.checks = tuple(checks)
        self.python = python
        self.running: dict[str, str] = {}  # system job id -> node
        self._ended: list[ExitReport] = []

    def input(self, session: Session) -> HealthInput:
        return health_input(session, self.policy, frozenset(self.running.values()))

    def start(self, session: Session, nodes: Sequence[str], now_t_s: float) -> list[str]:
        """Launch a check on each node (all its GPUs); returns the system jobs started."""
        started = []
        for name in nodes:
            row = session.get(NodeRow, name)
            if row is None or name in self.running.values():
                continue
            job_id = f"{PREFIX}{name}-{int(now_t_s * 1000)}"
            try:
                self.executor.start(self._spec(job_id, name, row.gpus, row.flavor))
            except Exception:  # a check that cannot start must not wedge the loop
                log.exception("health check of %s could not start", name)
                continue
            self.running[job_id] = name
            started.append(job_id)
        return started

    def _spec(self, job_id: str, node: str, gpus: int, flavor: str) -> LaunchSpec:
        command = [self.python, "-m", "railyard", "health", "--node", node, "--json",
                   "--gpus", str(gpus), "--flavor", flavor]  # fmt: skip
        baseline = self.state_dir / "health" / f"{node}.json"
        if baseline.exists():  # else the account's own (`railyard health --record-baseline`)
            command += ["--baseline", str(baseline)]
        if self.checks:
            command += ["--checks", ",".join(self.checks)]
        return LaunchSpec(
            job_id=job_id,
            command=tuple(command),
            placement={node: tuple(range(gpus))},
            gpus_per_worker=gpus,
            workers=1,
            ntasks_per_node=1,
            env={"PATH": SAFE_PATH},
            log_dir=logs_dir(self.spool, job_id),
            checkpoint_dir=checkpoint_dir(self.spool, job_id),
            records_dir=attempts_dir(self.state_dir, job_id),
        )

    def take(self, reports: list[ExitReport]) -> list[ExitReport]:
        """Reports of users' jobs; the system jobs' ones are kept for `finish`."""
        self._ended = [r for r in reports if r.job_id in self.running]
        return [r for r in reports if r.job_id not in self.running]

    def finish(self, session: Session, now_t_s: float) -> list[str]:
        """Store and judge the runs of the checks that ended; returns one line per node."""
        done = []
        for report in self._ended:
            node = self.running.pop(report.job_id)
            results = self._results(report, node)
            out = apply_run(
                session, node, results, now_t_s, REPORTER,
                fail_requeues=self.policy.fail_requeues,
            )  # fmt: skip
            done.append(out.action)
        self._ended = []
        return done

    def _results(self, report: ExitReport, node: str) -> list[HealthResultIn]:
        path = log_path(self.spool, report.job_id, 0)
        try:
            text = system_output(self.executor, path, node)
            found = json.loads(text[text.index("{") :])["results"]
            return [
                HealthResultIn.model_validate(
                    {k: v for k, v in r.items() if k not in ("node", "ratio")}
                )
                for r in found
            ]
        except (OSError, ValueError, KeyError, TypeError, ValidationError) as exc:
            why = f"the check printed no results (exit {report.exit_code}): {exc}"[:500]
            return [HealthResultIn(check="health-run", status="fail", detail=why)]
