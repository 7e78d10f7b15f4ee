"""What admins and the cluster pages speak: nodes, queues (partitions), users and tokens;
the jobs' vocabulary is :mod:`railyard.control.schemas`, whose bases and field types these
share."""

from __future__ import annotations

from pydantic import Field

from railyard.client.bounds import MAX_GRACE_S, MAX_TOKEN_LIFETIME_S, MAX_WALLTIME_S
from railyard.control.containerschema import MountPrefixes
from railyard.control.jobspec import UNIX_NAME_RE
from railyard.control.schemas import Priority, Request, Response
from railyard.control.store.limits import (
    Label,
    Name,
    PoolName,
    QueueName,
    Quota,
    UserName,
    Weight,
)
from railyard.control.store.tables import DEFAULT_MAX_PRIORITY
from railyard.sched.model import NodeState


class NodeOut(Response):
    name: str
    flavor: str
    gpus: int
    gpus_used: int
    state: NodeState
    reason: str
    path: list[str]
    health: str | None = None  # the verdict of its last health run
    health_t_s: float | None = None
    features: list[str] = Field(default_factory=list)  # Slurm's node features (--constraint)
    cpus: int = 0  # CPU cores (sinfo's CPUS); 0: not known
    memory_mb: int = 0  # memory (sinfo's MEMORY); 0: not known


class NodeAction(Request):
    reason: Name = ""


_DEFAULT_PARTITION = (
    "a job for its parent (a job that names no partition: `default`) comes here instead "
    "(Slurm's Default=YES); one per parent"
)


class QueueCreate(Request):
    """A queue; quotas are whole GPUs per flavor (>= 0), ``weight`` its fair-share weight."""

    name: QueueName
    parent: QueueName | None = None
    nominal_gpus: Quota = Field(default_factory=dict)
    borrowing_limit_gpus: Quota = Field(default_factory=dict)
    lending_limit_gpus: Quota = Field(default_factory=dict)
    weight: Weight = 1.0
    priority_preemption: bool = Field(
        False, description="its jobs may preempt lower-priority jobs (off, as in Slurm)"
    )
    default_time_s: float | None = Field(
        None, gt=0, le=MAX_WALLTIME_S, description="limit of jobs that give none (DefaultTime)"
    )
    max_time_s: float | None = Field(
        None, gt=0, le=MAX_WALLTIME_S, description="largest limit a job may ask (MaxTime)"
    )
    max_min_runtime_s: float | None = Field(
        None, ge=0, le=MAX_WALLTIME_S, description="bound on the min_runtime_s its jobs claim"
    )
    max_checkpoint_grace_s: float | None = Field(
        None, ge=0, le=MAX_GRACE_S, description="bound on the checkpoint grace its jobs claim"
    )
    idle_limit_s: float | None = Field(
        None, gt=0, le=MAX_WALLTIME_S,
        description="an interactive job (run, alloc, a notebook) unused this long is stopped",
    )  # fmt: skip
    pool: PoolName | None = Field(
        None, description="its jobs run on this node pool's flavors only (none: unpooled ones)"
    )
    container_mounts: MountPrefixes | None = Field(
        None, description="paths its jobs' containers may mount (beyond home and workdir)"
    )
    is_default: bool = Field(False, description=_DEFAULT_PARTITION)
    max_priority: Priority = Field(
        DEFAULT_MAX_PRIORITY,
        description="the most priority a plain member may ask (admins any): an integer or "
        "low|normal|high|critical; default normal, the class a job gets by default",
    )


class QueueUpdate(Request):
    """Fields left out keep their value; ``"parent": null`` makes the queue a root. The same
    bounds as :class:`QueueCreate`."""

    parent: QueueName | None = None
    nominal_gpus: Quota | None = None
    borrowing_limit_gpus: Quota | None = None
    lending_limit_gpus: Quota | None = None
    weight: Weight | None = None
    priority_preemption: bool | None = None
    default_time_s: float | None = Field(None, gt=0, le=MAX_WALLTIME_S)
    max_time_s: float | None = Field(None, gt=0, le=MAX_WALLTIME_S)
    max_min_runtime_s: float | None = Field(None, ge=0, le=MAX_WALLTIME_S)
    max_checkpoint_grace_s: float | None = Field(None, ge=0, le=MAX_GRACE_S)
    idle_limit_s: float | None = Field(None, gt=0, le=MAX_WALLTIME_S)
    pool: PoolName | None = None
    container_mounts: MountPrefixes | None = None
    is_default: bool | None = Field(None, description=_DEFAULT_PARTITION)
    max_priority: Priority | None = None


class QueueOut(Response):
    name: str
    parent: str | None
    nominal_gpus: dict[str, int]
    borrowing_limit_gpus: dict[str, int]
    lending_limit_gpus: dict[str, int]
    weight: float
    priority_preemption: bool = False
    default_time_s: float | None = None
    max_time_s: float | None = None
    max_min_runtime_s: float | None = None
    max_checkpoint_grace_s: float | None = None
    idle_limit_s: float | None = None
    pool: str | None = None
    container_mounts: list[str] | None = None
    is_default: bool = False
    max_priority: int = DEFAULT_MAX_PRIORITY
    members: list[str]
    used_gpus: dict[str, int]
    borrowed_gpus: dict[str, int]
    usage_gpu_s: float
    pending_jobs: int
    running_jobs: int


class MemberChange(Request):
    user: UserName


class UserCreate(Request):
    """``unix_user``: the Unix account the user's jobs run as (default: the same name)."""

    name: UserName
    is_admin: bool = False
    unix_user: str | None = Field(None, max_length=33, pattern=UNIX_NAME_RE)


class UserUpdate(Request):
    unix_user: str | None = Field(None, max_length=33, pattern=UNIX_NAME_RE)
    is_admin: bool | None = None


class UserOut(Response):
    id: int
    name: str
    is_admin: bool
    unix_user: str = ""
    created_t_s: float
    queues: list[str] = Field(default_factory=list)


class TokenCreate(Request):
    user: UserName
    label: Label = ""
    expires_in_s: float | None = Field(
        None, gt=0, le=MAX_TOKEN_LIFETIME_S, description="lifetime; none: never expires"
    )


class TokenOut(Response):
    id: int
    user: str
    label: str
    created_t_s: float
    revoked: bool
    expires_t_s: float | None = None


class TokenCreated(TokenOut):
    token: str = Field(description="the bearer token; shown once, stored only as a hash")
