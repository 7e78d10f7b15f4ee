"""The virtual executor: the `Executor` protocol on the virtual clock.

It is the simulated world's side of the door. It knows how much work each job has left (from
the trace), turns a start into a finish event, a checkpoint-stop request into a stop within
the grace (or a kill at its deadline), a node failure into failed attempts, and reports exits
through `poll` exactly as a live executor would, so the driver can mirror the live service.

System jobs (a sweep's all_reduce test, not in the trace) are run by `system`: it says how
long one runs and what its rank 0 prints at its end, from the world's truth; the output is
read back as a live one is, through `read_log` (a test killed before its end printed nothing).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from railyard.exec.exits import NODE_FAIL_SIGNAL
from railyard.exec.protocol import ExitReport, JobHandle, LaunchSpec, Outcome
from railyard.sim.checkpoints import Attempt, CheckpointPolicy
from railyard.sim.engine import Engine, Event, EventKind
from railyard.sim.workload import FinalState

_END_OUTCOME = {
    FinalState.COMPLETED: (Outcome.COMPLETED, 0, None),
    FinalState.FAILED: (Outcome.FAILED, 1, None),
    FinalState.CANCELLED: (Outcome.KILLED, None, "SIGTERM"),
}


@dataclass(frozen=True)
class SystemRun:
    """A system job as the world runs it: how long it takes, and what its rank 0 prints."""

    run_s: float
    output: str


SystemJobs = Callable[[LaunchSpec, float], SystemRun | None]
"""The world's system jobs: (spec, its slowest node's speed) -> its run (None: not one)."""


@dataclass(slots=True)
class Work:
    """A job's work as the world sees it, across attempts (GPU figures are GPU-seconds)."""

    total_s: float
    gpus: int
    end_state: FinalState = FinalState.COMPLETED
    saved_s: float = 0.0
    attempts: int = 0
    checkpoints: int = 0
    lost_gpu_s: float = 0.0
    allocated_gpu_s: float = 0.0
    exit_t_s: float | None = None
    slowed_gpu_s: float = 0.0  # GPU time added by slow nodes in its placements


@dataclass(slots=True)
class _Live:
    spec: LaunchSpec
    attempt: Attempt
    stop_requested: bool = False
    stop_saved_s: float = 0.0
    checkpoints_done: int = 0
    nodes: tuple[str, ...] = field(default_factory=tuple)


class VirtualExecutor:
    """Starts, signals and watches simulated jobs; deadlines are events on `engine`.

    Idempotent like the protocol asks: a repeated `start` of the same attempt returns the same
    handle, repeated stop requests neither resend nor move the deadline.
    """

    def __init__(
        self, engine: Engine, checkpoint: CheckpointPolicy, system: SystemJobs | None = None
    ) -> None:
        self.engine = engine
        self.checkpoint = checkpoint
        self.system = system
        self.outputs: dict[str, str] = {}  # system jobs' rank-0 output, by log dir
        self._printing: dict[str, tuple[str, str]] = {}  # printed if the job completes
        self.work: dict[str, Work] = {}
        self._live: dict[str, _Live] = {}
        self._by_node: dict[str, set[str]] = {}
        self._reports: list[ExitReport] = []
        self.speed: dict[str, float] = {}  # slow nodes: the fraction of full speed they run
        self.system_ids: set[str] = set()

    # -- the world's side: what the trace says each job needs ----------------------------------

    def register(self, job_id: str, work_s: float, gpus: int, end_state: FinalState) -> None:
        self.work[job_id] = Work(work_s, gpus, end_state)

    # -- the protocol ----------------------------------------------------------------------------

    def start(self, spec: LaunchSpec, setup_s: float = 0.0) -> JobHandle:
        """`setup_s`: seconds before its work begins (its image's pull), GPUs held."""
        live = self._live.get(spec.job_id)
        handle = JobHandle(
            job_id=spec.job_id, restart_count=spec.restart_count, workers=(), master_port=0
        )
        if live is not None and live.spec.restart_count == spec.restart_count:
            return handle
        now = self.engine.now_t_s
        nodes = tuple(spec.placement)
        speed = min((self.speed.get(n, 1.0) for n in nodes), default=1.0) if self.speed else 1.0
        work = self.work.get(spec.job_id) or self._system_work(spec, speed)
        system = spec.job_id in self.system_ids
        if system:  # a test runs its fixed time; the slow node shows in its figure
            speed = 1.0
        attempt = Attempt(
            start_t_s=now,
            overhead_s=(self.checkpoint.restart_s if work.attempts else 0.0) + setup_s,
            work_s=max(0.0, work.total_s - work.saved_s),
            interval_s=math.inf if system else self.checkpoint.interval_for(work.gpus),
            cost_s=self.checkpoint.cost_s,
            speed=speed,
        )
        if speed < 1.0:  # the gang runs at its slowest node's pace
            work.slowed_gpu_s += work.gpus * attempt.work_s * (1.0 / speed - 1.0)
        work.attempts += 1
        self._live[spec.job_id] = _Live(spec, attempt, nodes=nodes)
        for n in nodes:
            self._by_node.setdefault(n, set()).add(spec.job_id)
        tag = spec.restart_count
        self.engine.schedule(attempt.end_t_s, Event(EventKind.FINISH, spec.job_id, attempt=tag))
        if attempt.checkpoints:
            first = attempt.checkpoint_t_s(1)
            self.engine.schedule(first, Event(EventKind.CHECKPOINT, spec.job_id, attempt=tag))
        return handle

    def request_checkpoint_stop(self, job_id: str, grace_s: float) -> None:
        live = self._live.get(job_id)
        if live is None or live.stop_requested:
            return
        live.stop_requested = True
        now = self.engine.now_t_s
        tag = live.spec.restart_count
        stop = live.attempt.stop_on_signal(now, grace_s)
        if stop is None:
            self.engine.schedule(now + grace_s, Event(EventKind.GRACE_EXPIRY, job_id, attempt=tag))
        else:
            t_s, saved = stop
            live.stop_saved_s = self._base(live) + saved  # counts once the write completes
            self.engine.schedule(t_s, Event(EventKind.PREEMPT_STOP, job_id, attempt=tag))

    def cancel(self, job_id: str) -> None:
        if job_id in self._live:
            self._end(job_id, Outcome.KILLED, None, "SIGTERM")

    def signal(self, job_id: str, signal_name: str | None = None) -> None:
        """A warning signal changes nothing in the simulated world (jobs checkpoint on their
        interval and when asked to stop)."""

    def poll(self) -> list[ExitReport]:
        out, self._reports = self._reports, []
        return out

    def adopt(self, handles: Sequence[JobHandle]) -> list[ExitReport]:
        """Nothing outlives the simulator, so there is never anything to re-attach."""
        return []

    def running(self) -> set[str]:
        return set(self._live)

    def has_reports(self) -> bool:
        return bool(self._reports)

    def read_log(
        self, node: str, path: str, offset: int, limit: int, *, anchor: str | None = None
    ) -> tuple[bytes, int] | None:
        """A system job's output, read as the live judge reads a rank's log on its node (any
        file of the job's log directory: rank 0's output is the only one kept)."""
        found = self.outputs.get(str(Path(path).parent))
        if found is None:
            return None
        data = found.encode()
        return data[offset : offset + limit], len(data)

    def _system_work(self, spec: LaunchSpec, speed: float) -> Work:
        """Register a system job the world knows how to run (KeyError: no such job)."""
        run = self.system(spec, speed) if self.system is not None else None
        if run is None:
            raise KeyError(spec.job_id)
        self.system_ids.add(spec.job_id)
        self._printing[spec.job_id] = (str(spec.log_dir), run.output)
        work = self.work[spec.job_id] = Work(run.run_s, spec.workers * spec.gpus_per_worker)
        return work

    # -- events the engine delivers ------------------------------------------------------------

    def on_event(self, event: Event) -> bool:
        """Apply a FINISH / CHECKPOINT / PREEMPT_STOP / GRACE_EXPIRY; False if it was stale."""
        live = self._live.get(event.job_id)
        if live is None or live.spec.restart_count != event.attempt:
            return False
        kind = event.kind
        if kind is EventKind.FINISH:
            printed = self._printing.pop(event.job_id, None)
            if printed is not None:  # a system job prints its figure as it ends
                self.outputs[printed[0]] = printed[1]
            work = self.work[event.job_id]
            work.saved_s = work.total_s
            outcome, code, signal = _END_OUTCOME[work.end_state]
            self._end(event.job_id, outcome, code, signal, keep_all=True)
        elif kind is EventKind.CHECKPOINT:
            if live.stop_requested:
                return False
            self._checkpoint(event.job_id, live)
        elif kind is EventKind.PREEMPT_STOP:
            work = self.work[event.job_id]
            work.saved_s = max(work.saved_s, live.stop_saved_s)
            self._end(event.job_id, Outcome.PREEMPTED, 0, None, keep_all=True)
        elif kind is EventKind.GRACE_EXPIRY:
            self._end(event.job_id, Outcome.KILLED, None, "SIGKILL")
        return True

    def fail_node(self, node: str) -> list[str]:
        """A node died: every attempt on it fails now. Returns the jobs hit."""
        hit = sorted(self._by_node.get(node, ()))
        for job_id in hit:
            self._end(job_id, Outcome.FAILED, None, NODE_FAIL_SIGNAL)
        return hit

    def last_checkpoint_t_s(self, job_id: str) -> float | None:
        live = self._live.get(job_id)
        if live is None:
            return None
        k = live.checkpoints_done
        return live.attempt.checkpoint_t_s(k) if k else None

    # -- internals -------------------------------------------------------------------------------

    def _base(self, live: _Live) -> float:
        """Work saved before this attempt began."""
        work = self.work[live.spec.job_id]
        return work.total_s - live.attempt.work_s

    def _checkpoint(self, job_id: str, live: _Live) -> None:
        """The next checkpoint of this attempt completed (counted, not recomputed from the
        clock, so rounding can never replay one)."""
        live.checkpoints_done += 1
        k = live.checkpoints_done
        work = self.work[job_id]
        work.saved_s = max(work.saved_s, self._base(live) + k * live.attempt.interval_s)
        work.checkpoints += 1
        if k < live.attempt.checkpoints:
            t_s = live.attempt.checkpoint_t_s(k + 1)
            tag = live.spec.restart_count
            self.engine.schedule(t_s, Event(EventKind.CHECKPOINT, job_id, attempt=tag))

    def _end(
        self,
        job_id: str,
        outcome: Outcome,
        code: int | None,
        signal: str | None,
        *,
        keep_all: bool = False,
    ) -> None:
        live = self._live.pop(job_id)
        for n in live.nodes:
            self._by_node[n].discard(job_id)
        now = self.engine.now_t_s
        work = self.work[job_id]
        gpus = live.spec.workers * live.spec.gpus_per_worker
        work.allocated_gpu_s += gpus * (now - live.attempt.start_t_s)
        if not keep_all:
            progressed = self._base(live) + live.attempt.progress_at(now)
            work.lost_gpu_s += gpus * max(0.0, progressed - work.saved_s)
        work.exit_t_s = now
        self._reports.append(
            ExitReport(
                job_id=job_id,
                exit_code=code,
                signal=signal,
                outcome=outcome,
                restart_count=live.spec.restart_count,
            )
        )
