"""``LocalExecutor``: this machine as one node, each rank a process group of its own.

Each process of a job (every task of a command job, or the one batch step of a script) runs
under :mod:`railyard.exec.task.wrapper` in a new session (``start_new_session``), so one ``killpg``
reaches it and everything it spawned (a batch script's ``srun`` tasks included). The wrapper
runs the command as the job's Unix account with the job's environment (never this
process's), inside the step's cgroups (:mod:`railyard.exec.cgroups.containment`): every process it
starts, however it detaches, is killed when the step ends (cancel, time limit, preemption,
requeue, a rank's exit), and reaches only the job's GPUs' device files.
Our own children are reaped with ``waitpid``; ranks adopted after a restart are not our
children, so they are watched through ``/proc`` (pid plus start time) and their exit codes
come from the wrapper's exit file.

At most once: each rank's wrapper claims its start marker before it runs the command
(:mod:`railyard.exec.attempt`), so a rank of an attempt runs once even if the control plane
is killed mid-launch and starts the attempt again. :meth:`LocalExecutor.start` is idempotent
per ``(job_id, restart_count)``, within one executor and across executors: it returns the
handle record written right after a launch, and otherwise launches only the ranks nobody has
claimed, adopting the others by the pid their marker names, on the port the first launch
recorded. All of these records live in ``LaunchSpec.records_dir``.
Dropping an executor leaves its ranks running, so that a new one can adopt them.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from railyard.exec import procfs
from railyard.exec import usage as procusage
from railyard.exec.attempt import (
    exit_record_path,
    read_claim,
    read_ready,
    ready_marker_path,
    start_marker_path,
)
from railyard.exec.cgroups import cgroup, proctrack
from railyard.exec.cgroups.containment import Containment
from railyard.exec.cleanup import Cleaner, Leftovers
from railyard.exec.containers.container import container_name
from railyard.exec.containers.containerlaunch import container_task, step_launcher
from railyard.exec.exitwatch import SUPPORTED as CAN_WATCH_EXITS
from railyard.exec.exitwatch import ExitWatcher
from railyard.exec.jobstate import JobState, RankState, Stage
from railyard.exec.protocol import (
    Executor,
    ExecutorError,
    ExitReport,
    JobHandle,
    LaunchSpec,
    NotifiesExits,
    SaysTimeLimits,
)
from railyard.exec.task import jobfiles
from railyard.exec.task.exitfile import NOTED_SIGNALS
from railyard.exec.task.identity import resolve
from railyard.exec.task.launch import (
    RankSlot,
    job_allocation,
    rank_layout,
)
from railyard.exec.task.outputs import time_limit_cue_path
from railyard.exec.task.rankexit import (
    claimant,
    exit_of,
    launch_port,
    read_handle,
    report,
    write_handle,
)
from railyard.exec.task.rankstart import (
    MASTER_ADDR,
    claimed_worker,
    launch_rank,
    workdir,
)
from railyard.probe import gpu_minors, resolve_gpus

log = logging.getLogger("railyard.exec")
KILL_NOW_S = 0.2  # the poll's own kill of an ended step's stragglers; longer: the cleanup's
MIB = 1 << 20


def handle_record_path(records_dir: Path, restart_count: int) -> Path:
    return records_dir / f"handle-{restart_count}.json"


def launch_record_path(records_dir: Path, restart_count: int) -> Path:
    """The port a launch chose, written before any rank starts, so a relaunch reuses it."""
    return records_dir / f"launch-{restart_count}.json"


def records_dir(spec: LaunchSpec) -> Path:
    return spec.records_dir or spec.log_dir


class LocalExecutor:
    """Runs jobs on this machine; implements :class:`railyard.exec.protocol.Executor`.

    ``gpus`` is the declared GPU count (NVML's count when None). Signals are sent at once;
    the SIGTERM and SIGKILL that follow a grace are sent by :meth:`poll` once it is due.
    Meant for one calling thread (the control plane's loop). After :meth:`on_exit` a watcher
    thread (:class:`~railyard.exec.exitwatch.ExitWatcher`) calls back when a rank exits; it
    touches nothing else.
    """

    def __init__(
        self,
        node_name: str,
        gpus: int | None = None,
        *,
        term_grace_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        one_node_of_many: bool = False,
        containment: Containment | None = None,
    ) -> None:
        """``one_node_of_many``: this executor runs this node's share of jobs placed on many
        (the ranks placed here, wired to ``LaunchSpec.master_addr``/``master_port``), as a
        node agent of :mod:`railyard.exec.ray.rayexec` does; else it runs whole jobs here.
        ``containment``: how steps are tracked and confined (chosen here when None)."""
        self.node_name = node_name
        self.one_node_of_many = one_node_of_many
        self.gpus = resolve_gpus(gpus)
        self.gpu_minors = gpu_minors(self.gpus)
        self.containment = containment if containment is not None else Containment()
        self.containment.sweep()
        self.term_grace_s = term_grace_s
        self.dev_dir = Path("/dev")  # where the GPUs' device files are (a test's own elsewhere)
        self._clock = clock
        self._jobs: dict[str, JobState] = {}
        self._started: dict[tuple[str, int], JobHandle] = {}  # until the attempt is reported
        self._pending: list[ExitReport] = []
        self._released: list[ExitReport] = []  # reports the cleanup thread let go (its lock)
        self._released_lock = threading.Lock()
        self._ended_ready: dict[str, tuple[int, float]] = {}  # see `_keep_ready`
        self._watcher: ExitWatcher | None = None
        self._exited: Callable[[], None] | None = None  # the caller's "poll me", if any
        # ended steps' groups and containers, and the reports waiting for their kill
        self.cleaner = Cleaner(self.containment, released=self._release)

    # -- the protocol -------------------------------------------------------------------------

    def start(self, spec: LaunchSpec) -> JobHandle:
        """Launch every rank, or return the handle of this attempt if it was launched before.

        After a crash mid-launch, ranks whose wrapper claimed its start marker are adopted,
        not launched again; the others are launched on the port the first launch recorded.
        A wrapper of the crashed launch that had not claimed yet races the new one for the
        marker, and the loser stands down (:meth:`poll` then watches the winner).
        """
        key = (spec.job_id, spec.restart_count)
        if key in self._started:
            return self._started[key]
        records = self._records(spec)
        record = handle_record_path(records, spec.restart_count)
        previous = read_handle(record)
        if previous is not None and previous.job_id == spec.job_id:
            self._pending.extend(self.adopt([previous]))  # kept in `_started` while it runs
            return previous
        if spec.job_id in self._jobs:
            raise ExecutorError(f"job {spec.job_id} is still running another attempt")
        self._check(spec)
        account = resolve(spec.user)
        jobfiles.prepare(spec, account)
        records.mkdir(parents=True, exist_ok=True)
        here = next(a for a in job_allocation(spec) if a.name == self.node_name)
        limits = cgroup.Limits(spec.cpus_per_task * here.ntasks, spec.mem_per_node_mb * MIB)
        step = proctrack.step_name(spec.job_id, spec.restart_count, records)
        minors = [self.gpu_minors[g] for g in spec.placement[self.node_name]]
        bare_batch = spec.batch and spec.container is None  # its srun may start containers
        groups = self.containment.enter(step, minors, limits, container=bool(spec.container),
                                        container_steps=bare_batch)  # fmt: skip
        parent = self.containment.cgroup_parent(step) if spec.container or bare_batch else None
        launcher = step_launcher(spec, step=step, gpu_minors=minors, account=account,
                                 cwd=workdir(spec, account), containment=self.containment,
                                 records=records, ntasks=here.ntasks, dev=self.dev_dir)  # fmt: skip
        record_path = launch_record_path(records, spec.restart_count)
        port = spec.master_port or launch_port(record_path, MASTER_ADDR)
        ranks: list[RankState] = []
        try:
            for slot in self._slots(spec):
                exit_path = exit_record_path(records, spec.restart_count, slot.rank)
                claimed = read_claim(start_marker_path(exit_path))
                if claimed is None:
                    ctask = None
                    if spec.container is not None:
                        ctask = container_task(
                            spec, step=step, rank=slot.rank, gpu_minors=minors, account=account,
                            cwd=workdir(spec, account), cgroup_parent=parent, dev=self.dev_dir,
                            ready_file=str(ready_marker_path(exit_path)),
                        )  # fmt: skip
                    ranks.append(
                        launch_rank(
                            spec,
                            slot,
                            port,
                            account,
                            groups,
                            node=self.node_name,
                            records=records,
                            container=ctask,
                            steps=launcher,
                        )
                    )
                elif claimed.sealed:
                    raise ExecutorError(
                        f"job {spec.job_id}: attempt {spec.restart_count} was sealed when it "
                        "ended; it is not started again"
                    )
                else:
                    worker = claimed_worker(
                        spec, slot, account, claimed, node=self.node_name, records=records
                    )
                    ranks.append(RankState(worker, None))
        except BaseException:
            for rank in ranks:  # no half-started gangs
                procfs.signal_group(rank.handle.pgid, rank.handle.start_time_ticks, signal.SIGKILL)
                if rank.proc is not None:
                    rank.proc.wait()
            if not self.containment.end(step):  # a process that would not die: later
                self.cleaner.submit(Leftovers(step, None, spec.restart_count))
            raise
        handle = JobHandle(
            job_id=spec.job_id,
            restart_count=spec.restart_count,
            workers=tuple(r.handle for r in ranks),
            master_port=port,
            preempt_signal=spec.preempt_signal,
            limits=groups.limits_line.removeprefix("limits: "),
            containers=(
                tuple(container_name(step, r.handle.rank) for r in ranks) if spec.container else ()
            ),
            signal_shell_only=spec.batch and spec.signal_batch_shell,
            batch=spec.batch,
        )
        write_handle(record, handle)
        self._jobs[spec.job_id] = JobState(handle, ranks)
        self._started[key] = handle
        self._watch(ranks)
        return handle

    def request_checkpoint_stop(self, job_id: str, grace_s: float) -> None:
        """Send the preempt signal to every rank's group; a repeat, or a job already stopping
        or unknown, is a no-op."""
        job = self._jobs.get(job_id)
        if job is None or job.stage != Stage.RUNNING or job.first_failure is not None:
            return
        job.stop_requested = True
        self._signal_live(job, signal.Signals[job.handle.preempt_signal])
        job.stage = Stage.PREEMPTING
        job.deadline = self._clock() + grace_s

    def cancel(self, job_id: str) -> None:
        """SIGTERM every rank's group, SIGKILL after ``term_grace_s``; a repeat is a no-op."""
        job = self._jobs.get(job_id)
        if job is None or job.cancelled:
            return
        job.cancelled = job.first_failure is None  # a job already failing stays failed
        if job.stage < Stage.TERMINATING:
            self._terminate(job)

    def time_out(self, job_id: str, why: str = "TIME LIMIT") -> None:
        """:meth:`cancel` at the time limit (or for a requeue: ``why`` JOB REQUEUE): each live
        rank's wrapper is told first, by a cue beside its exit record holding ``why``, so
        that it writes slurmstepd's line in the job's output."""
        job = self._jobs.get(job_id)
        if job is None or job.cancelled:
            return
        for rank in job.live():  # one line per job, as slurmstepd's: rank 0 (the batch shell)
            if rank.handle.rank != 0:
                continue
            cue = time_limit_cue_path(Path(rank.handle.exit_path))
            with contextlib.suppress(OSError):  # no cue, no line: the stop goes on regardless
                fd = os.open(cue, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
                try:
                    os.write(fd, why.encode())
                finally:
                    os.close(fd)
        self.cancel(job_id)

    def discard(self, job_id: str, timeout_s: float = proctrack.KILL_TIMEOUT_S) -> bool:
        """End what runs here of ``job_id`` at once, with no grace and no report: SIGKILL its
        step, remove the step's groups and containers, and finish steps an earlier end left
        (waiting up to ``timeout_s`` for the cleanup thread). For a node's share of a gang
        that did not start on every node (the control plane reports that attempt itself) and
        for an agent about to go, whose grace would end in a poll that never comes. True when
        nothing is left."""
        job = self._jobs.pop(job_id, None)
        if job is not None:
            self._signal_live(job, signal.SIGKILL)
            self._forget(job.handle)
            self._end_step(job.handle)
        return self.cleaner.drain(timeout_s)

    def signal(self, job_id: str, signal_name: str | None = None) -> None:
        """Send one signal to every live rank's group (a batch script's: to its steps, or
        with ``B:NAME`` to its shell alone); unknown or ended jobs are a no-op."""
        job = self._jobs.get(job_id)
        if job is None:
            return
        name = signal_name or job.handle.preempt_signal
        shell = name.startswith("B:")
        self._signal_live(job, signal.Signals[name.removeprefix("B:")], shell=shell)

    def poll(self) -> list[ExitReport]:
        """Reap exited ranks, terminate the gang of a failed rank, escalate overdue stops, and
        report each job whose last rank has exited. Never blocks: a report is taken first,
        and what the step left (its groups, its containers) is ended after, by the cleanup
        thread (`exec.cleanup`), so no cleanup's wait or failure delays or loses a report.
        A job whose watching fails (a signal refused, its records unreadable) is logged and
        watched again at the next poll; the other jobs' reports still go out."""
        reports, self._pending = self._pending, []
        with self._released_lock:
            reports += self._released
            self._released = []
        for job in list(self._jobs.values()):
            try:
                self._observe(job)
                self._advance(job)
                if not job.done():
                    continue
                ended = report(job)
            except Exception:  # that job's alone: the others are reported
                log.exception("job %s: watching its ranks failed; again at the next poll",
                              job.handle.job_id)  # fmt: skip
                continue
            del self._jobs[job.handle.job_id]
            self._forget(job.handle)
            self._keep_ready(job)
            if self._end_step(job.handle, ended):  # its stragglers killed: settled now
                reports.append(ended)
        return reports

    def _release(self, report: ExitReport) -> None:
        """From the cleanup thread: a report whose step's kill it tried in full; the next
        poll hands it over (the caller is told to poll)."""
        with self._released_lock:
            self._released.append(report)
        if self._exited is not None:
            self._exited()

    def _forget(self, handle: JobHandle) -> None:
        """The attempt is reported (or discarded): its handle is no longer kept here, so the
        map of started attempts holds running ones only. A start of it again finds its
        handle record and adopts it, as an executor after a restart does."""
        self._started.pop((handle.job_id, handle.restart_count), None)

    def _keep_ready(self, job: JobState) -> None:
        """A container job that ended before `ready` was asked still says when its image was
        ready (once, at the next call), so a short job's pull shows in its history."""
        found = self._ready_of(job)
        if found is not None:
            self._ended_ready[job.handle.job_id] = (job.handle.restart_count, found)

    def adopt(self, handles: Sequence[JobHandle]) -> list[ExitReport]:
        """Watch the ranks of ``handles`` whose pid and start time still match; jobs with no
        such rank are reported now (from their exit files, else ``lost``). A job already
        watched is skipped."""
        for handle in handles:
            for worker in handle.workers:
                if worker.node != self.node_name:
                    raise ExecutorError(f"job {handle.job_id}: rank on {worker.node}, not here")
        reports = []
        for handle in handles:
            if handle.job_id in self._jobs:
                continue
            job = JobState(handle, [RankState(claimant(w), None) for w in handle.workers])
            self._observe(job)
            if job.done():
                ended = report(job)
                if self._end_step(handle, ended):
                    reports.append(ended)
            else:
                self._started.setdefault((handle.job_id, handle.restart_count), handle)
                self._jobs[handle.job_id] = job
                self._watch(job.live())
        return reports

    def running(self) -> set[str]:
        return set(self._jobs)

    def usage(self, job_id: str) -> procusage.ProcessUsage | None:
        """What the job's processes here use (see `exec.usage`), less the ranks' wrappers
        (railyard's, not the user's); callable from another thread (the sampler's): it reads
        the job table once and /proc, and changes nothing."""
        job = self._jobs.get(job_id)
        if job is None:
            return None
        wrappers = {r.handle.pid for r in job.ranks if r.exit is None}
        step = self._step(job.handle)
        group = None if step is None else self.containment.tracking.group(step)
        if group is not None and group.is_dir():
            pids = proctrack.all_procs(group)
        else:
            pids = list(procusage.descendants(wrappers))
        return procusage.measure(p for p in pids if p not in wrappers)

    def ready(self) -> dict[str, tuple[int, float]]:
        """Job -> (attempt, when its image was on the node for every rank here), for the
        container jobs running here whose every rank said so (see `ReportsReady`)."""
        out, self._ended_ready = self._ended_ready, {}
        for job_id, job in self._jobs.items():
            found = self._ready_of(job)
            if found is not None:
                out[job_id] = (job.handle.restart_count, found)
        return out

    def _ready_of(self, job: JobState) -> float | None:
        if not job.handle.containers:
            return None
        if job.ready_t_s is None:
            times = [read_ready(ready_marker_path(r.handle.exit_path)) for r in job.ranks]
            if not times or None in times:
                return None
            job.ready_t_s = max(t for t in times if t is not None)
        return job.ready_t_s

    def process_groups(self) -> list[int]:
        """The process group of every live rank (a node agent's tests kill them with it)."""
        return [r.handle.pgid for job in self._jobs.values() for r in job.live()]

    def on_exit(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` (from a watcher thread) when any rank exits; see
        :class:`~railyard.exec.protocol.NotifiesExits`. A no-op without pidfds."""
        self._exited = callback  # a report the cleanup thread lets go says so too
        if not CAN_WATCH_EXITS:
            return
        if self._watcher is not None:
            self._watcher.close()
        self._watcher = ExitWatcher(callback)
        for job in self._jobs.values():
            for rank in job.live():
                self._watcher.watch(rank.handle.pid)

    def _step(self, handle: JobHandle) -> str | None:
        """The step's cgroup name, from where its records are (as :meth:`start` named it)."""
        if not handle.workers:
            return None
        records = handle.workers[0].exit_path.parent
        return proctrack.step_name(handle.job_id, handle.restart_count, records)

    def _end_step(self, handle: JobHandle, report: ExitReport | None = None) -> bool:
        """Kill what the step left for a moment (``KILL_NOW_S``) and hand the rest to the
        cleanup thread: its groups, its containers (a killed runtime leaves these), and the
        step containers `srun --container-image` started (recorded under its records). True
        when nothing of it runs any more; else ``report`` waits with the leftovers until the
        thread's kill (up to its timeout) has been tried, so a job is never settled, and its
        GPUs given to another, while a process of it still runs."""
        step = self._step(handle)
        gone = step is None or self.containment.tracking.kill(step, KILL_NOW_S)
        records = handle.workers[0].exit_path.parent if handle.workers else None
        self.cleaner.submit(Leftovers(step, records, handle.restart_count, handle.containers,
                                      report=None if gone else report))  # fmt: skip
        return gone

    def _watch(self, ranks: Sequence[RankState]) -> None:
        if self._watcher is not None:
            for rank in ranks:
                self._watcher.watch(rank.handle.pid)

    # -- launching ----------------------------------------------------------------------------

    def _records(self, spec: LaunchSpec) -> Path:
        """Records of this node's ranks (per node when nodes share a file system)."""
        base = records_dir(spec)
        return base / self.node_name if self.one_node_of_many else base

    def _slots(self, spec: LaunchSpec) -> list[RankSlot]:
        slots = rank_layout(spec)
        return [s for s in slots if s.node == self.node_name] if self.one_node_of_many else slots

    def _check(self, spec: LaunchSpec) -> None:
        if self.one_node_of_many:
            if self.node_name not in spec.placement:
                raise ExecutorError(f"job {spec.job_id}: nothing placed on {self.node_name}")
        elif set(spec.placement) != {self.node_name}:
            raise ExecutorError(
                f"job {spec.job_id}: placed on {sorted(spec.placement)}, this is {self.node_name}"
            )
        bad = [g for g in spec.placement[self.node_name] if not 0 <= g < self.gpus]
        if bad:
            raise ExecutorError(f"job {spec.job_id}: GPUs {bad} not on a {self.gpus}-GPU node")
        if spec.preempt_signal not in signal.Signals.__members__:
            raise ExecutorError(f"job {spec.job_id}: unknown signal {spec.preempt_signal}")

    # -- watching and signalling --------------------------------------------------------------

    def _observe(self, job: JobState) -> None:
        for rank in job.live():
            rank.exit = exit_of(rank)
            failed = rank.exit is not None and not rank.exit.clean
            if failed and job.first_failure is None and job.stage < Stage.TERMINATING:
                job.first_failure = rank

    def _advance(self, job: JobState) -> None:
        if not job.live():
            return
        if job.first_failure is not None and job.stage < Stage.TERMINATING:
            self._terminate(job)  # like torchrun: one rank failed, stop the gang
        elif job.deadline is not None and self._clock() >= job.deadline:
            if job.stage == Stage.PREEMPTING:
                job.escalated = True
                self._terminate(job)
            elif job.stage == Stage.TERMINATING:
                self._signal_live(job, signal.SIGKILL)
                step = self._step(job.handle)
                if step is not None:
                    self.containment.kill(step)
                job.stage = Stage.KILLING
                job.deadline = None

    def _terminate(self, job: JobState) -> None:
        self._signal_live(job, signal.SIGTERM)
        step = self._step(job.handle)
        if step is not None:  # a detached process gets its grace too, as in Slurm
            pgids = {rank.handle.pgid for rank in job.ranks}
            self.containment.signal(step, signal.SIGTERM, skip_pgids=pgids)
        job.stage = Stage.TERMINATING
        job.deadline = self._clock() + self.term_grace_s

    def _signal_live(self, job: JobState, sig: int, *, shell: bool = False) -> None:
        """``sig`` to every live rank's group. A batch script's: the warning or preempt
        signal of a ``--signal=B:`` job, or one asked for its shell (``shell``), to its
        wrapper (which records it) and the shell alone; any other but SIGTERM and SIGKILL
        to the rest of its group, its steps, and not the shell or its subshells (as Slurm's)."""
        warning = signal.Signals[job.handle.preempt_signal]
        shell_only = shell or (job.handle.signal_shell_only and sig == warning)
        steps_only = job.handle.batch and sig not in (signal.SIGTERM, signal.SIGKILL)
        for rank in job.live():
            worker = rank.handle
            if not shell_only and steps_only:
                procfs.signal_group_but_shells(worker.pgid, worker.pid,
                                               worker.start_time_ticks, sig)  # fmt: skip
                continue
            if not shell_only:
                procfs.signal_group(worker.pgid, worker.start_time_ticks, sig)
                continue
            if sig in NOTED_SIGNALS and procfs.is_alive(worker.pid, worker.start_time_ticks):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(worker.pid, sig)
            procfs.signal_children(worker.pid, worker.start_time_ticks, sig)


if TYPE_CHECKING:  # mypy proves that LocalExecutor honours the protocol
    _conforms: type[Executor] = LocalExecutor
    _says: type[SaysTimeLimits] = LocalExecutor
    _notifies: type[NotifiesExits] = LocalExecutor
