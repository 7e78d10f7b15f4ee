"""The executor protocol: the one door through which railyard touches processes.

The live control plane and the simulator's virtual executor both speak it, so it imports the
standard library only. The control plane persists a :class:`LaunchSpec` before it calls
:meth:`Executor.start` and the returned :class:`JobHandle` right after, so that a restarted
control plane can call :meth:`Executor.adopt` with what it wrote and reconcile instead of guess.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from railyard.exec.containers.container import ContainerSpec
from railyard.exec.errors import ExecutorError as ExecutorError
from railyard.exec.task.identity import JOB_UMASK

DEFAULT_PREEMPT_SIGNAL = "SIGUSR1"


class Outcome(StrEnum):
    """How a job ended, from the control plane's point of view."""

    COMPLETED = "completed"  # every rank exited 0 and nobody asked it to stop
    FAILED = "failed"  # a rank exited non-zero or by a signal we did not send
    PREEMPTED = "preempted"  # asked to checkpoint and stop; every rank exited 0 in the grace
    KILLED = "killed"  # cancelled, or ignored the checkpoint signal and was terminated
    LOST = "lost"  # vanished while we were away; its exit code cannot be known


@dataclass(frozen=True)
class Output:
    """Where a job's output goes: Slurm ``--output``/``--error`` patterns (``%j %A %a %x %u
    %N %n %t %%``; relative to the working directory), opened as the job's user. ``stdout``
    None: each process writes its spool log (``railyard logs``). ``fields`` holds the values
    of ``%j %A %a %x %u``. ``append``: sbatch's ``--open-mode=append``, never truncated (else
    every attempt truncates, a requeued one too, as Slurm's)."""

    stdout: str | None = None
    stderr: str | None = None
    fields: Mapping[str, str] = field(default_factory=dict)
    append: bool = False


@dataclass(frozen=True, kw_only=True)
class LaunchSpec:
    """Everything needed to start one attempt (``restart_count``) of a job.

    ``placement`` maps node name to the GPU indices given to the job there (its first node
    first). A command job runs ``ntasks_per_node`` tasks per node (default: one per GPU there),
    each seeing all the job's GPUs of its node; a ``batch`` job runs ``command`` once on the
    first node and its ``srun`` starts the tasks (see :mod:`railyard.exec.task.launch`).

    Environment: ``env`` is the user's exported environment (with ``login_env`` the Unix
    account's login environment comes first, as for ``--export=NONE``); ``job_env`` holds the
    control plane's job variables (``SLURM_JOB_ID``...); ``nccl_env`` is derived by the caller
    from the blueprint (see :func:`railyard.exec.task.nccl.nccl_env`). ``user`` is the Unix account
    the processes run as (None: the executor's own). ``log_dir`` belongs to the executor
    (records, spool logs); ``checkpoint_dir`` and ``steps_dir`` to the user; ``script`` is
    written to ``script_path`` for the user before a batch job starts.
    ``records_dir`` keeps what makes a start happen at most once (start markers, exit records,
    the handle record); it should outlive ``log_dir`` (default: ``log_dir``), since losing
    those records is what could make an attempt run twice.
    """

    job_id: str
    command: tuple[str, ...]
    placement: Mapping[str, tuple[int, ...]]
    gpus_per_worker: int
    workers: int
    restart_count: int = 0
    env: Mapping[str, str] = field(default_factory=dict)
    job_env: Mapping[str, str] = field(default_factory=dict)
    login_env: bool = False
    user: str | None = None
    batch: bool = False
    ntasks_per_node: int | None = None
    workdir: Path = Path()
    log_dir: Path
    checkpoint_dir: Path
    steps_dir: Path | None = None
    script: str | None = None
    script_path: Path | None = None
    output: Output = field(default_factory=Output)
    cpus_per_task: int = 0
    cpus_per_node: int = 0  # cores booked on each node (all of them with --exclusive); 0: none
    tasks_given: bool = True  # False: no task count asked (sbatch counts one per booked CPU)
    ntasks_alone: bool = False  # --ntasks without --ntasks-per-node: no SLURM_NTASKS_PER_NODE
    gpus_per_task: int = 0  # each task sees its own GPUs (sbatch --gpus-per-task); 0: all
    mem_per_node_mb: int = 0
    preempt_signal: str = DEFAULT_PREEMPT_SIGNAL
    signal_batch_shell: bool = False
    umask: int = JOB_UMASK  # the submitter's: the processes' and their output files' (sbatch)
    nccl_env: Mapping[str, str] = field(default_factory=dict)
    records_dir: Path | None = None
    # Set by an executor spanning machines: the first node's address and a port free there
    # (None: this machine, a port the launch picks).
    master_addr: str | None = None
    master_port: int | None = None
    # An interactive job (`railyard run`): rank 0's stdio is a terminal ("pty") or pipes
    # ("pipes") relayed through a socket (railyard.exec.terminals.terminal), ended when no client
    # has
    # been connected for `terminal_linger_s`.
    terminal: str = ""
    terminal_linger_s: float = 30.0
    # A web app (`railyard jupyter`): the user's own directory where it puts its socket
    # (`control.usecases.apps`), made before it starts.
    app_dir: Path | None = None
    # A containerised job (`--container-image`): every process runs in this image
    # (railyard.exec.containers.container), with its mounts checked against `container_allowed`, the
    # prefixes its queue allowed at submit.
    container: ContainerSpec | None = None
    container_allowed: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.command:
            raise ValueError(f"job {self.job_id}: empty command")
        if self.workers < 1 or self.gpus_per_worker < 0 or self.restart_count < 0:
            raise ValueError(f"job {self.job_id}: workers >= 1, gpus and restarts >= 0")
        if self.terminal not in ("", "pipes", "pty"):
            raise ValueError(f"job {self.job_id}: terminal is '', 'pipes' or 'pty'")
        if self.ntasks_per_node is not None and self.ntasks_per_node < 1:
            raise ValueError(f"job {self.job_id}: ntasks_per_node must be >= 1")
        if (self.script is None) != (self.script_path is None):
            raise ValueError(f"job {self.job_id}: script and script_path go together")
        placed = sum(len(gpus) for gpus in self.placement.values())
        if self.gpus_per_worker and placed != self.workers * self.gpus_per_worker:
            raise ValueError(
                f"job {self.job_id}: placement has {placed} GPUs, "
                f"{self.workers} workers x {self.gpus_per_worker} need "
                f"{self.workers * self.gpus_per_worker}"
            )


@dataclass(frozen=True, kw_only=True)
class WorkerHandle:
    """One rank's process group: what identifies it across a control-plane restart.

    ``start_time_ticks`` is field 22 of ``/proc/<pid>/stat``; a pid whose start time differs is
    a reused pid, not our worker. ``exit_path`` is where the rank's wrapper writes how it ended.
    """

    job_id: str
    rank: int
    node: str
    pid: int
    pgid: int
    start_time_ticks: int
    log_path: Path
    exit_path: Path

    def to_dict(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id,
            "rank": self.rank,
            "node": self.node,
            "pid": self.pid,
            "pgid": self.pgid,
            "start_time_ticks": self.start_time_ticks,
            "log_path": str(self.log_path),
            "exit_path": str(self.exit_path),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> WorkerHandle:
        return cls(
            job_id=str(data["job_id"]),
            rank=int(data["rank"]),
            node=str(data["node"]),
            pid=int(data["pid"]),
            pgid=int(data["pgid"]),
            start_time_ticks=int(data["start_time_ticks"]),
            log_path=Path(data["log_path"]),
            exit_path=Path(data["exit_path"]),
        )


@dataclass(frozen=True, kw_only=True)
class JobHandle:
    """A started attempt: persist it right after :meth:`Executor.start` returns. ``workers``
    are the processes the executor started: every task of a command job, or the one batch
    step of a script (its ``srun`` tasks are the batch step's children)."""

    job_id: str
    restart_count: int
    workers: tuple[WorkerHandle, ...]
    master_port: int
    preempt_signal: str = DEFAULT_PREEMPT_SIGNAL
    limits: str = ""  # CPU/memory limits and whether they are enforced, in words
    containers: tuple[str, ...] = ()  # the names of its containers, removed when it ends
    # --signal=B:SIG: the signal goes to the batch shell alone, as Slurm's B: does, not to
    # the processes the script started (``python train.py & wait`` keeps running)
    signal_shell_only: bool = False
    # a batch script: a signal (but SIGTERM and SIGKILL) reaches its steps, not its shell
    batch: bool = False

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form for the control plane's store."""
        return {
            "containers": list(self.containers),
            "signal_shell_only": self.signal_shell_only,
            "batch": self.batch,
            "job_id": self.job_id,
            "restart_count": self.restart_count,
            "workers": [w.to_dict() for w in self.workers],
            "master_port": self.master_port,
            "preempt_signal": self.preempt_signal,
            "limits": self.limits,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> JobHandle:
        return cls(
            job_id=str(data["job_id"]),
            restart_count=int(data["restart_count"]),
            workers=tuple(WorkerHandle.from_dict(w) for w in data["workers"]),
            master_port=int(data["master_port"]),
            preempt_signal=str(data.get("preempt_signal", DEFAULT_PREEMPT_SIGNAL)),
            limits=str(data.get("limits", "")),
            containers=tuple(str(n) for n in data.get("containers", ())),
            signal_shell_only=bool(data.get("signal_shell_only", False)),
            batch=bool(data.get("batch", False)),
        )


@dataclass(frozen=True, kw_only=True)
class ExitReport:
    """A job's end, reported once.

    ``exit_code`` and ``signal`` are those of the rank that decided the outcome (the first to
    fail, else rank 0): an exit code, or the name of the signal that killed it (``exit_code``
    None), or both None when unknowable (a rank gone without an exit record).
    """

    job_id: str
    exit_code: int | None
    signal: str | None
    outcome: Outcome
    restart_count: int = 0
    reason: str | None = None  # the deciding rank's, when it could not start (ImagePullFailed)


class Executor(Protocol):
    """Starts, signals and watches jobs. No method blocks on a job's progress.

    Idempotent: :meth:`start` per ``(job_id, restart_count)``; :meth:`request_checkpoint_stop`
    and :meth:`cancel` per job (a repeat neither resends nor moves a deadline); :meth:`adopt`
    per handle. Deadlines are enforced on :meth:`poll`, so the caller polls regularly.
    """

    def start(self, spec: LaunchSpec) -> JobHandle:
        """Launch every rank, or return the handle of the attempt already launched."""
        ...

    def request_checkpoint_stop(self, job_id: str, grace_s: float) -> None:
        """Send the preempt signal to every rank's group; SIGTERM after ``grace_s``, then
        SIGKILL after a short term grace. A rank that has not yet installed its handler dies
        by the signal's default action, which reports as failed."""
        ...

    def cancel(self, job_id: str) -> None:
        """SIGTERM every rank's group now, SIGKILL after a short term grace."""
        ...

    def signal(self, job_id: str, signal_name: str | None = None) -> None:
        """Send a signal (the job's preempt signal when None) to every rank's group, once,
        with no escalation: the warning before a time limit (Slurm's ``--signal``). A batch
        script's shell is left out, as Slurm signals its steps; ``B:NAME`` (``scancel
        --batch``) reaches the shell alone."""
        ...

    def poll(self) -> list[ExitReport]:
        """Reports of jobs whose last rank has exited since the previous call; never blocks."""
        ...

    def adopt(self, handles: Sequence[JobHandle]) -> list[ExitReport]:
        """Re-attach to workers whose pid and start time match; report finished jobs now."""
        ...

    def running(self) -> set[str]:
        """Jobs started or adopted and not yet reported."""
        ...


@runtime_checkable
class SaysTimeLimits(Protocol):
    """Optional capability: stop a job at its time limit so that its output says so, as
    slurmstepd writes ``*** JOB N ON host CANCELLED AT ... DUE TO TIME LIMIT ***``. The line
    is written by the job's own wrapper as the job's user; an executor without this
    capability is told :meth:`Executor.cancel` and the line is missing."""

    def time_out(self, job_id: str, why: str = "TIME LIMIT") -> None:
        """:meth:`Executor.cancel`, after telling each rank why: the time limit, ``JOB
        REQUEUE`` (``scontrol requeue``), slurmstepd's words after ``DUE TO``, or ``CANCEL``
        (a user's cancel: the line without ``DUE TO``)."""
        ...


@runtime_checkable
class ReportsReady(Protocol):
    """Optional capability: say when a container job's image was on its nodes, so its time
    limit runs from then and not while the image was pulled (Pyxis imports the image before
    the task starts). The limit of a container job never reported starts an hour after the
    job at the latest (`sched.model.PULL_LIMIT_S`, when the wrapper gives up pulling)."""

    def ready(self) -> Mapping[str, tuple[int, float]]:
        """Job id -> (attempt, wall-clock time its image was ready on every node), for the
        running container jobs whose image is ready; it may repeat a job every call."""
        ...


@runtime_checkable
class NotifiesExits(Protocol):
    """Optional capability: say when a process of a job exits, so the caller polls at once
    instead of at its next interval (a freed GPU should not idle for seconds).

    The callback may run on any thread and takes no arguments; it means "poll me", and one call
    may stand for several exits. Everything else still happens on the caller's thread through
    :meth:`Executor.poll`. ``LocalExecutor`` implements it with pidfds; an executor without it
    is polled on its caller's interval.
    """

    def on_exit(self, callback: Callable[[], None]) -> None:
        """From now on call ``callback`` soon after any process of a started or adopted job
        exits, those already running included. A second call replaces the callback."""
        ...


@dataclass(frozen=True)
class SharesChanged:
    """What :meth:`KeepsLostShares.lost_shares` returns: shares newly lost with their agent,
    and lost shares whose ranks were since ended. A share is one node's part of an attempt
    (a :class:`JobHandle` whose workers all run on that node)."""

    lost: tuple[JobHandle, ...] = ()
    ended: tuple[JobHandle, ...] = ()


@runtime_checkable
class KeepsLostShares(Protocol):
    """Optional capability of an executor whose node agents can die while the ranks they
    started live on (Ray: an agent killed, a raylet restarted). The attempt is reported a node
    failure and runs again, but its old ranks still hold that node's GPUs until an agent there
    ends them. The executor remembers such shares and keeps the node out of use until it has
    ended them; the control plane writes what it remembers to its store and gives it back
    after a restart or a takeover (:meth:`remember_lost`), so a new process does not forget
    them and place a new attempt beside the old one's ranks."""

    def lost_shares(self) -> SharesChanged:
        """What changed since the last call (each share once)."""
        ...

    def remember_lost(self, shares: Sequence[JobHandle]) -> None:
        """Shares lost before this process started: their nodes take no job until each is
        ended there (they are not reported again by :meth:`lost_shares` as lost)."""
        ...
