"""The durable schema: what must survive a crash of the control plane.

The service loop writes a decision here (job state, placement, attempt) and commits before it
asks the executor to act; on restart it reconciles from these rows. Times are Unix epoch
seconds (``_t_s``). JSON columns hold small maps and lists (quotas, commands, handles).
Changes to this file need a new Alembic revision in ``migrations/versions``.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    false,
    true,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from railyard.client.values import PRIORITY_CLASSES


class Base(DeclarativeBase):
    pass


class JobState(StrEnum):
    """Life of a job. STARTING and PREEMPTING/CANCELLING are written before the executor acts."""

    PENDING = "pending"
    STARTING = "starting"
    RUNNING = "running"
    PREEMPTING = "preempting"
    CANCELLING = "cancelling"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    TIMEOUT = "timeout"
    NODE_FAIL = "node_fail"
    DEADLINE = "deadline"  # it could no longer end by its --deadline: it never started

    @property
    def finished(self) -> bool:
        return self in _FINISHED

    @property
    def holds_gpus(self) -> bool:
        return self in (
            JobState.STARTING,
            JobState.RUNNING,
            JobState.PREEMPTING,
            JobState.CANCELLING,
        )


_FINISHED = frozenset(
    {
        JobState.COMPLETED,
        JobState.FAILED,
        JobState.CANCELLED,
        JobState.TIMEOUT,
        JobState.NODE_FAIL,
        JobState.DEADLINE,
    }
)
ACTIVE_STATES = tuple(s.value for s in JobState if not s.finished)
# JobRow.hold -> Slurm's reason for a held job (an admin's hold only an admin releases)
HOLD_REASONS = {"user": "JobHeldUser", "admin": "JobHeldAdmin"}
HOLDING_STATES = tuple(s.value for s in JobState if s.holds_gpus)
# a queue's bound on its members' priority unless an admin sets one: the class a job gets by
# default, so a plain member may not go above what every job asks
DEFAULT_MAX_PRIORITY = PRIORITY_CLASSES["normal"]


def _same_as_name(context: Any) -> str:
    return str(context.get_current_parameters()["name"])


class User(Base):
    """A railyard user; ``unix_user`` is the Unix account their jobs run as (default: the same
    name), as a Slurm user is an account on the cluster's nodes."""

    __tablename__ = "users"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    is_admin: Mapped[bool] = mapped_column(Boolean, default=False)
    unix_user: Mapped[str] = mapped_column(String(64), default=_same_as_name)
    created_t_s: Mapped[float] = mapped_column(Float)


class Token(Base):
    """Bearer tokens, stored as SHA-256 hashes: the plaintext is shown once, at creation."""

    __tablename__ = "tokens"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    label: Mapped[str] = mapped_column(String(128), default="")
    created_t_s: Mapped[float] = mapped_column(Float)
    revoked: Mapped[bool] = mapped_column(Boolean, default=False)
    expires_t_s: Mapped[float | None] = mapped_column(Float, nullable=True)  # None: never


class QueueRow(Base):
    """A node of the tenancy tree; quotas are GPUs per flavor (JSON maps)."""

    __tablename__ = "queues"

    name: Mapped[str] = mapped_column(String(128), primary_key=True)
    parent: Mapped[str | None] = mapped_column(ForeignKey("queues.name"), nullable=True)
    nominal_gpus: Mapped[dict[str, int]] = mapped_column(JSON, default=dict)
    borrowing_limit_gpus: Mapped[dict[str, int]] = mapped_column(JSON, default=dict)
    lending_limit_gpus: Mapped[dict[str, int]] = mapped_column(JSON, default=dict)
    weight: Mapped[float] = mapped_column(Float, default=1.0)
    priority_preemption: Mapped[bool] = mapped_column(Boolean, default=False)
    default_time_s: Mapped[float | None] = mapped_column(Float, nullable=True)
    max_time_s: Mapped[float | None] = mapped_column(Float, nullable=True)
    max_min_runtime_s: Mapped[float | None] = mapped_column(Float, nullable=True)
    max_checkpoint_grace_s: Mapped[float | None] = mapped_column(Float, nullable=True)
    # an interactive job unused this long is stopped (`sched.Queue.idle_limit_s`); None: never
    idle_limit_s: Mapped[float | None] = mapped_column(Float, nullable=True)
    # its jobs run on this node pool's flavors only (`blueprint.pools`); None: unpooled ones
    pool: Mapped[str | None] = mapped_column(String(64), nullable=True)
    # what its jobs' containers may mount beyond home and workdir; None: the parent's (none)
    container_mounts: Mapped[list[str] | None] = mapped_column(JSON, nullable=True)
    # Slurm's Default=YES: a job for its parent (`default`, as a job that names no partition)
    # comes here instead (`queuerules.default_partition`); one per parent
    is_default: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    # the most priority a plain member may ask (admins any)
    max_priority: Mapped[int] = mapped_column(
        Integer, default=DEFAULT_MAX_PRIORITY, server_default=str(DEFAULT_MAX_PRIORITY)
    )
    created_t_s: Mapped[float] = mapped_column(Float)


class QueueMember(Base):
    """Who may submit to a queue (and, through it, to every queue below it)."""

    __tablename__ = "queue_members"

    queue: Mapped[str] = mapped_column(
        ForeignKey("queues.name", ondelete="CASCADE"), primary_key=True
    )
    user_id: Mapped[int] = mapped_column(
        ForeignKey("users.id", ondelete="CASCADE"), primary_key=True
    )


class Counter(Base):
    """Monotonic counters (job numbers), incremented inside the submitting transaction."""

    __tablename__ = "counters"

    name: Mapped[str] = mapped_column(String(32), primary_key=True)
    value: Mapped[int] = mapped_column(Integer, default=0)


class JobRow(Base):
    """One job, or one element of a job array (id ``<number>_<index>``; ``task_number`` is the
    element's own numeric id, Slurm's ``SLURM_JOB_ID``).

    ``env`` is the environment the submitter exported (``export`` says how: ``ALL``, ``NONE``
    or a list); ``unix_user`` the account the job runs as, fixed at submit. ``cpus_per_worker``
    and ``mem_per_worker_gb`` are what the scheduler accounts per chunk, derived from
    ``--cpus-per-task``/``--mem``/``--ntasks-per-node`` (kept as asked, for the launch).
    """

    __tablename__ = "jobs"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    number: Mapped[int] = mapped_column(Integer, index=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"), index=True)
    queue: Mapped[str] = mapped_column(ForeignKey("queues.name"), index=True)
    name: Mapped[str] = mapped_column(String(256), default="")
    state: Mapped[str] = mapped_column(String(16), index=True, default=JobState.PENDING.value)
    reason: Mapped[str] = mapped_column(String(256), default="")
    command: Mapped[list[str]] = mapped_column(JSON)
    script: Mapped[str | None] = mapped_column(Text, nullable=True)
    workdir: Mapped[str] = mapped_column(String(1024), default="")
    env: Mapped[dict[str, str]] = mapped_column(JSON, default=dict)
    flavor: Mapped[str] = mapped_column(String(64))
    workers: Mapped[int] = mapped_column(Integer, default=1)
    gpus_per_worker: Mapped[int] = mapped_column(Integer, default=1)
    priority: Mapped[int] = mapped_column(Integer, default=0)  # after nice
    nice: Mapped[int] = mapped_column(Integer, default=0, server_default="0")  # Slurm's --nice
    preemptible: Mapped[bool] = mapped_column(Boolean, default=False)
    walltime_s: Mapped[float | None] = mapped_column(Float, nullable=True)
    topology_level: Mapped[str | None] = mapped_column(String(32), nullable=True)
    topology_mode: Mapped[str | None] = mapped_column(String(16), nullable=True)
    min_runtime_s: Mapped[float] = mapped_column(Float, default=0.0)
    checkpoint_grace_s: Mapped[float] = mapped_column(Float, default=30.0)
    preempt_signal: Mapped[str] = mapped_column(String(16), default="SIGUSR1")
    requeue_on_failure: Mapped[bool] = mapped_column(Boolean, default=False)
    max_restarts: Mapped[int] = mapped_column(Integer, default=3)
    restart_count: Mapped[int] = mapped_column(Integer, default=0)
    array_parent: Mapped[str | None] = mapped_column(String(64), nullable=True, index=True)
    array_index: Mapped[int | None] = mapped_column(Integer, nullable=True)
    array_max_running: Mapped[int | None] = mapped_column(Integer, nullable=True)
    hold: Mapped[str | None] = mapped_column(String(16), nullable=True)  # "user" | "admin"
    array_spec: Mapped[str | None] = mapped_column(String(1024), nullable=True)
    task_number: Mapped[int | None] = mapped_column(Integer, nullable=True, index=True)
    unix_user: Mapped[str] = mapped_column(String(64), default="")
    export: Mapped[str] = mapped_column(String(1024), default="ALL")
    submit_dir: Mapped[str] = mapped_column(String(1024), default="")
    submit_host: Mapped[str] = mapped_column(String(256), default="")
    ntasks_per_node: Mapped[int | None] = mapped_column(Integer, nullable=True)
    # False: no task count was asked for (sbatch then counts a task per booked CPU)
    tasks_given: Mapped[bool] = mapped_column(Boolean, default=True, server_default=true())
    # --ntasks without --ntasks-per-node: sbatch and srun leave SLURM_NTASKS_PER_NODE unset
    ntasks_alone: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    # sbatch --kill-on-invalid-dep=yes: cancelled once its dependency can never be met
    kill_on_invalid_dep: Mapped[bool] = mapped_column(
        Boolean, default=False, server_default=false()
    )
    # --gpus-per-node as given ([TYPE:]N), sbatch's SLURM_GPUS_PER_NODE; None: not asked so
    # (--gres=gpu:N sets none)
    gpus_per_node_asked: Mapped[str | None] = mapped_column(String(80), nullable=True)
    cpus_per_task: Mapped[int] = mapped_column(Integer, default=0)
    mem_per_node_mb: Mapped[int] = mapped_column(Integer, default=0)
    cpus_per_worker: Mapped[int] = mapped_column(Integer, default=0)
    mem_per_worker_gb: Mapped[float] = mapped_column(Float, default=0.0)
    distinct_nodes: Mapped[bool] = mapped_column(Boolean, default=False)
    output: Mapped[str | None] = mapped_column(String(1024), nullable=True)
    error: Mapped[str | None] = mapped_column(String(1024), nullable=True)
    # sbatch --open-mode: "append" or "truncate"; None: truncate on a first attempt only
    open_mode: Mapped[str | None] = mapped_column(String(8), nullable=True)
    dependency: Mapped[str | None] = mapped_column(String(1024), nullable=True)
    # the --dependency the loop found met (and cleared above): SLURM_JOB_DEPENDENCY keeps it
    met_dependency: Mapped[str | None] = mapped_column(String(1024), nullable=True)
    requeue: Mapped[bool] = mapped_column(Boolean, default=False)
    signal_batch_shell: Mapped[bool] = mapped_column(Boolean, default=False)
    umask: Mapped[int | None] = mapped_column(Integer, nullable=True)  # None: 0022
    terminal: Mapped[str] = mapped_column(String(8), default="")  # railyard run: pipes | pty
    # when its user last sent an interactive job anything (`control.usecases.activity`)
    active_t_s: Mapped[float | None] = mapped_column(Float, nullable=True)
    # --container-image and its options, with the mount prefixes its queue allowed at submit
    container: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    # the container image alone (the scheduler reads it: placement prefers nodes holding it)
    image: Mapped[str | None] = mapped_column(String(1024), nullable=True)
    # when its image was on every node of this attempt: its time limit runs from then
    run_t_s: Mapped[float | None] = mapped_column(Float, nullable=True)
    # sbatch's --begin: not before this time (reason BeginTime until then)
    begin_t_s: Mapped[float | None] = mapped_column(Float, nullable=True)
    # sbatch's --deadline: ends DEADLINE once it could no longer end by then
    deadline_t_s: Mapped[float | None] = mapped_column(Float, nullable=True)
    # sbatch's --mem-per-cpu / --mem-per-gpu as asked (its environment says them); the
    # scheduler books mem_per_worker_gb, the cgroup mem_per_node_mb
    mem_per_cpu_mb: Mapped[int | None] = mapped_column(Integer, nullable=True)
    mem_per_gpu_mb: Mapped[int | None] = mapped_column(Integer, nullable=True)
    # sbatch's --gpus-per-task: each task sees its own GPUs (None: all of its node's)
    gpus_per_task: Mapped[int | None] = mapped_column(Integer, nullable=True)
    # sbatch's --nodelist / --exclude, expanded: its nodes are among the first (None: any)
    # and none of the second
    only_nodes: Mapped[list[str] | None] = mapped_column(JSON, nullable=True)
    never_nodes: Mapped[list[str] | None] = mapped_column(JSON, nullable=True)
    # a signal its user asked for (scancel --signal, "SIGUSR1") that the loop has not sent
    signal_request: Mapped[str | None] = mapped_column(String(16), nullable=True)
    submit_t_s: Mapped[float] = mapped_column(Float)
    start_t_s: Mapped[float | None] = mapped_column(Float, nullable=True)
    end_t_s: Mapped[float | None] = mapped_column(Float, nullable=True, index=True)
    placement: Mapped[dict[str, list[int]] | None] = mapped_column(JSON, nullable=True)
    handle: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    exit_code: Mapped[int | None] = mapped_column(Integer, nullable=True)
    exit_signal: Mapped[str | None] = mapped_column(String(16), nullable=True)  # e.g. SIGKILL
    outcome: Mapped[str | None] = mapped_column(String(16), nullable=True)
    preempt_for: Mapped[str | None] = mapped_column(String(64), nullable=True)
    preempt_deadline_t_s: Mapped[float | None] = mapped_column(Float, nullable=True)
    # why a started job is being stopped (`sched.StopCause`), written with the stop; the
    # reason is for display only
    stop_cause: Mapped[str | None] = mapped_column(String(16), nullable=True)
    last_checkpoint_t_s: Mapped[float | None] = mapped_column(Float, nullable=True)
    warn_before_s: Mapped[float | None] = mapped_column(Float, nullable=True)
    warned: Mapped[bool] = mapped_column(Boolean, default=False)
    attained_gpu_s: Mapped[float] = mapped_column(Float, default=0.0)
    nominated: Mapped[bool] = mapped_column(Boolean, default=False)
    updated_t_s: Mapped[float] = mapped_column(Float)
    # set by the store's triggers on every write but the loop's reasons, in commit order
    # (migration 0028): the loop reads the rows changed since its last step (`store.jobchanges`)
    change_seq: Mapped[int] = mapped_column(BigInteger, index=True, default=0, server_default="0")


class NodeRow(Base):
    """A node the control plane schedules on; ``path`` holds its topology labels."""

    __tablename__ = "nodes"

    name: Mapped[str] = mapped_column(String(128), primary_key=True)
    flavor: Mapped[str] = mapped_column(String(64))
    gpus: Mapped[int] = mapped_column(Integer)
    cpu_cores: Mapped[int] = mapped_column(Integer, default=0)
    mem_gb: Mapped[float] = mapped_column(Float, default=0.0)
    path: Mapped[list[str]] = mapped_column(JSON, default=list)
    state: Mapped[str] = mapped_column(String(16), default="ready")
    reason: Mapped[str] = mapped_column(String(256), default="")
    updated_t_s: Mapped[float] = mapped_column(Float)
    # the verdict of the node's last health run (pass, warn, fail, fatal) and when it came
    health: Mapped[str | None] = mapped_column(String(8), nullable=True)
    health_t_s: Mapped[float | None] = mapped_column(Float, nullable=True)
    # container images jobs brought here, most recent last (`control.loop.apply.IMAGES_KEPT`)
    images: Mapped[list[str] | None] = mapped_column(JSON, nullable=True)
    # Slurm's node features from the blueprint, written at every start (--constraint)
    features: Mapped[list[str] | None] = mapped_column(JSON, nullable=True)


class HealthRow(Base):
    """One check's result in one health run of a node (``run_id`` groups a run's checks)."""

    __tablename__ = "health_results"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(String(32), index=True)
    node: Mapped[str] = mapped_column(String(128), index=True)
    t_s: Mapped[float] = mapped_column(Float, index=True)
    check: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(8))
    fatal: Mapped[bool] = mapped_column(Boolean, default=False)
    measured: Mapped[float | None] = mapped_column(Float, nullable=True)
    expected: Mapped[float | None] = mapped_column(Float, nullable=True)
    unit: Mapped[str] = mapped_column(String(32), default="")
    fail_below: Mapped[float | None] = mapped_column(Float, nullable=True)
    warn_below: Mapped[float | None] = mapped_column(Float, nullable=True)
    source: Mapped[str] = mapped_column(String(256), default="")
    detail: Mapped[str] = mapped_column(String(512), default="")
    reporter: Mapped[str] = mapped_column(String(64), default="")


class UsageRow(Base):
    """Decayed GPU-seconds per queue path (``queue:a/b/c``) and per user (``user:alice``)."""

    __tablename__ = "usage"

    key: Mapped[str] = mapped_column(String(256), primary_key=True)
    gpu_s: Mapped[float] = mapped_column(Float, default=0.0)
    updated_t_s: Mapped[float] = mapped_column(Float)


class AttemptRow(Base):
    """A job's attempt that held GPUs, one row per UTC day it ran in, written when it ended
    (requeued or final): what accounting reads at the edges of a window (``railyard report``,
    Slurm's ``sreport``). A job's own row keeps only its last attempt's times; a preempted
    attempt's GPU time would be lost without these. ``user_name`` and ``queue`` are names, so
    usage outlives a removed user. Cut by day, a window's rows are found by ``day_t_s`` alone
    (an interval of any length is never scanned for)."""

    __tablename__ = "attempts"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    day_t_s: Mapped[float] = mapped_column(Float, index=True)  # the UTC day's midnight
    job_id: Mapped[str] = mapped_column(String(64), index=True)
    attempt: Mapped[int] = mapped_column(Integer)  # the job's restart_count during it
    user_name: Mapped[str] = mapped_column(String(64))
    queue: Mapped[str] = mapped_column(String(64))
    gpus: Mapped[int] = mapped_column(Integer)
    start_t_s: Mapped[float] = mapped_column(Float)  # within the day
    end_t_s: Mapped[float] = mapped_column(Float)
    state: Mapped[str] = mapped_column(String(16))  # how it ended: requeue or the end state


class UsageDayRow(Base):
    """GPU-seconds of ended attempts per UTC day, user and queue (the sum of their
    ``attempts`` rows): a year of accounting reads days x users x queues rows, not every
    attempt."""

    __tablename__ = "usage_days"

    day_t_s: Mapped[float] = mapped_column(Float, primary_key=True)
    user_name: Mapped[str] = mapped_column(String(64), primary_key=True)
    queue: Mapped[str] = mapped_column(String(64), primary_key=True)
    gpu_s: Mapped[float] = mapped_column(Float, default=0.0)


class GpuStepRow(Base):
    """How the cluster's busy GPUs and pending jobs changed in each minute (``t_s``: the whole
    minute a change counts from, its time rounded up), kept by the store's triggers on
    ``jobs`` (migration 0030) as rows are written: the overview's charts sum a window's few
    rows back from the live figures instead of reading every job that ended in it."""

    __tablename__ = "gpu_steps"

    t_s: Mapped[float] = mapped_column(Float, primary_key=True)
    busy_gpus: Mapped[int] = mapped_column(Integer, default=0)
    pending_jobs: Mapped[int] = mapped_column(Integer, default=0)


# the jobs list sorted by priority, next to start first: a walk of this index, not a top-N
# sort of every finished job (PostgreSQL's took 160 ms with 100,000)
Index("ix_jobs_priority_order", JobRow.priority.desc(), JobRow.number, JobRow.array_index)


class SampleRow(Base):
    """One reading of a running job's resources on one node (`control.metrics.sampler`): a
    GPU's (``gpu`` its index there) or, with ``gpu`` None, its processes' host CPU and memory.
    Kept for the retention window, then pruned: what the job page draws and exports, as the
    Ray dashboard and Determined do, without a Prometheus behind."""

    __tablename__ = "job_samples"
    __table_args__ = (
        Index("ix_job_samples_job_t", "job_id", "t_s"),
        Index("ix_job_samples_node_t", "node", "t_s"),  # a node's history (migration 0030)
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(String(64))
    attempt: Mapped[int] = mapped_column(Integer)
    t_s: Mapped[float] = mapped_column(Float, index=True)
    node: Mapped[str] = mapped_column(String(64))
    gpu: Mapped[int | None] = mapped_column(Integer, nullable=True)
    gpu_util_pct: Mapped[float | None] = mapped_column(Float, nullable=True)
    gpu_mem_used_bytes: Mapped[float | None] = mapped_column(Float, nullable=True)
    gpu_power_w: Mapped[float | None] = mapped_column(Float, nullable=True)
    gpu_temp_c: Mapped[float | None] = mapped_column(Float, nullable=True)
    cpu_pct: Mapped[float | None] = mapped_column(Float, nullable=True)  # 100: one core busy
    host_mem_bytes: Mapped[float | None] = mapped_column(Float, nullable=True)  # resident


class EventRow(Base):
    """The audit trail: every decision and state change, in order."""

    __tablename__ = "events"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    t_s: Mapped[float] = mapped_column(Float, index=True)
    job_id: Mapped[str | None] = mapped_column(String(64), nullable=True, index=True)
    kind: Mapped[str] = mapped_column(String(32))
    message: Mapped[str] = mapped_column(Text, default="")


class UiSession(Base):
    """A dashboard login: the SHA-256 of a random id (the cookie holds the id), the user and
    the token it was made from (revoking or deleting either ends it), and its times."""

    __tablename__ = "ui_sessions"

    id_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    token_id: Mapped[int] = mapped_column(ForeignKey("tokens.id", ondelete="CASCADE"), index=True)
    created_t_s: Mapped[float] = mapped_column(Float)
    last_seen_t_s: Mapped[float] = mapped_column(Float)
    expires_t_s: Mapped[float] = mapped_column(Float, index=True)  # absolute limit


class LeaseRow(Base):
    """Who is the active server of a PostgreSQL store (`control.store.lease`): one row,
    ``name = 'control'``. Its times are the database's clock (Unix seconds), never a
    server's; ``epoch`` only grows, one per takeover, and every job-changing commit checks it."""

    __tablename__ = "leases"

    name: Mapped[str] = mapped_column(String(32), primary_key=True)
    holder: Mapped[str] = mapped_column(String(200))  # host/pid/start time of the process
    owner: Mapped[str] = mapped_column(String(300))  # "pid N, URL": for a refusal's line
    url: Mapped[str] = mapped_column(String(300))  # where its API listens: for a standby's 503
    epoch: Mapped[int] = mapped_column(BigInteger)
    acquired_t_s: Mapped[float] = mapped_column(Float)
    expires_t_s: Mapped[float] = mapped_column(Float)


class LeaseEpochRow(Base):
    """One row per epoch ever taken: who took it and when (the database's clock), so a
    takeover can be timed and an epoch that went back would show."""

    __tablename__ = "lease_epochs"

    epoch: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    holder: Mapped[str] = mapped_column(String(200))
    owner: Mapped[str] = mapped_column(String(300))
    acquired_t_s: Mapped[float] = mapped_column(Float)
    previous_expires_t_s: Mapped[float | None] = mapped_column(Float, nullable=True)


class LostShareRow(Base):
    """One node's share of an attempt lost with its node agent while its ranks may live on
    (`exec.protocol.KeepsLostShares`): kept until an agent there has ended them, so a control
    plane restarted (or a standby that took over) keeps that node out of use meanwhile and
    never places a new attempt beside the old one's ranks."""

    __tablename__ = "lost_shares"

    job_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    restart_count: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    node: Mapped[str] = mapped_column(String(128), primary_key=True)
    handle: Mapped[dict[str, Any]] = mapped_column(JSON)  # that node's workers only
    lost_t_s: Mapped[float] = mapped_column(Float)
