"""Request and response models of the REST API, and the parsers for Slurm-style values.

Requests use ``extra="forbid"`` so a typo (``gpu`` for ``gpus``) is an error, not a silent
default. Responses ignore unknown fields so an older client keeps working against a newer
server. The value parsers (walltime, signal, array, priority, topology) are those of
:mod:`railyard.control.values`, so the API, batch-script directives and CLI flags accept
exactly the same spellings.
"""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING, Any, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from railyard.control.jobspec import (
    UNIX_NAME_RE,
    Shape,
    check_env,
    parse_dependency,
    parse_mem,
)
from railyard.control.values import (
    parse_array,
    parse_priority,
    parse_signal,
    parse_topology,
    parse_walltime,
)
from railyard.sched.model import PriorityClass

if TYPE_CHECKING:
    from railyard.control.tables import JobRow


class Request(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Response(BaseModel):
    model_config = ConfigDict(extra="ignore")


class JobSubmit(Request):
    """One submission. GPU shape: ``gpus`` (one-GPU chunks the scheduler may spread), or
    ``nodes`` with ``gpus_per_node`` (whole chunks on distinct nodes, Slurm's ``--nodes``), or
    explicit ``workers`` and ``gpus_per_worker``; no GPU unless one is asked for (Slurm's
    default). ``gpu_type`` picks the flavor by GPU type (``h100`` matches ``H100-SXM-80GB``).

    Environment: ``export`` is Slurm's ``--export`` as the submitter resolved it: ``ALL``
    (``env`` is their whole environment), ``NONE`` or a list (``env`` holds the listed
    variables, on top of the Unix account's login environment). ``railyard submit`` sends
    ``ALL`` and its environment by default; an API client that sends nothing gets ``NONE``.
    """

    command: list[str] | None = None
    script: str | None = None
    name: str = Field("", max_length=256)
    queue: str = "default"
    gpus: int | None = Field(None, ge=0)
    gpu_type: str | None = Field(None, max_length=64)
    nodes: int | None = Field(None, ge=1)
    gpus_per_node: int | None = Field(None, ge=1)
    workers: int | None = Field(None, ge=1)
    gpus_per_worker: int | None = Field(None, ge=0)
    ntasks: int | None = Field(None, ge=1)
    ntasks_per_node: int | None = Field(None, ge=1)
    cpus_per_task: int | None = Field(None, ge=1)
    mem: str | int | None = None
    flavor: str | None = None
    priority: int | str | None = None
    time: str | int | None = None
    preemptible: bool = False
    exclusive: bool = False
    array: str | None = None
    export: str = Field("NONE", min_length=1, max_length=1024)
    env: dict[str, str] = Field(default_factory=dict)
    workdir: str = Field("", max_length=1024)
    submit_dir: str = Field("", max_length=1024)
    submit_host: str = Field("", max_length=256)
    output: str | None = Field(None, min_length=1, max_length=1024)
    error: str | None = Field(None, min_length=1, max_length=1024)
    dependency: str | None = Field(None, max_length=1024)
    topology: str | None = None
    checkpoint_grace_s: float | None = Field(None, ge=0)
    min_runtime_s: float = Field(0.0, ge=0)
    signal: str | None = None
    requeue: bool = False

    @field_validator("time")
    @classmethod
    def _time(cls, v: str | int | None) -> str | int | None:
        if v is not None:
            parse_walltime(v)
        return v

    @field_validator("signal")
    @classmethod
    def _signal(cls, v: str | None) -> str | None:
        if v is not None:
            parse_signal(v)
        return v

    @field_validator("array")
    @classmethod
    def _array(cls, v: str | None) -> str | None:
        if v is not None:
            parse_array(v)
        return v

    @field_validator("priority")
    @classmethod
    def _priority(cls, v: int | str | None) -> int | str | None:
        if v is not None:
            parse_priority(v)
        return v

    @field_validator("topology")
    @classmethod
    def _topology(cls, v: str | None) -> str | None:
        if v is not None:
            parse_topology(v)
        return v

    @field_validator("mem")
    @classmethod
    def _mem(cls, v: str | int | None) -> str | int | None:
        if v is not None:
            parse_mem(v)
        return v

    @field_validator("dependency")
    @classmethod
    def _dependency(cls, v: str | None) -> str | None:
        return None if v is None else parse_dependency(v)

    @field_validator("env")
    @classmethod
    def _env(cls, v: dict[str, str]) -> dict[str, str]:
        check_env(v)
        return v

    @model_validator(mode="after")
    def _one_command_one_shape(self) -> Self:
        if (self.command is None) == (self.script is None):
            raise ValueError("give exactly one of command or script")
        if self.command is not None and not self.command:
            raise ValueError("command must not be empty")
        self.shape()  # raises on a contradictory shape
        return self

    def shape(self) -> Shape:
        """Chunks and tasks from whichever spelling was used."""
        by_node = self.nodes is not None or self.gpus_per_node is not None
        explicit = self.workers is not None or self.gpus_per_worker is not None
        if explicit and (by_node or self.gpus is not None):
            raise ValueError("give workers/gpus_per_worker, or gpus, or nodes/gpus_per_node")
        per_node = self.ntasks_per_node
        if explicit:
            if self.ntasks is not None:
                raise ValueError("ntasks needs gpus or nodes (hint: use ntasks_per_node)")
            per = 1 if self.gpus_per_worker is None else self.gpus_per_worker
            return Shape(self.workers or 1, per, False, per_node)
        if by_node:
            nodes = self.nodes or 1
            if self.gpus_per_node is not None:
                per = self.gpus_per_node
                if self.gpus is not None and self.gpus != nodes * per:
                    raise ValueError(f"gpus={self.gpus} but nodes x gpus_per_node = {nodes * per}")
            elif self.gpus is not None:
                if self.gpus % nodes:
                    raise ValueError(f"gpus={self.gpus} is not divisible by nodes={nodes}")
                per = self.gpus // nodes
            else:
                per = 0
            return Shape(nodes, per, True, self._tasks_per_node(nodes))
        if self.gpus:
            if self.ntasks not in (None, self.gpus) or per_node is not None:
                # Tasks that are not one per GPU need the GPUs on one node.
                return Shape(1, self.gpus, False, self._tasks_per_node(1))
            return Shape(self.gpus, 1, False, None)
        return Shape(1, 0, False, self._tasks_per_node(1))

    def _tasks_per_node(self, nodes: int) -> int | None:
        """``ntasks_per_node``, or ``ntasks`` spread evenly over ``nodes``."""
        if self.ntasks is None:
            return self.ntasks_per_node
        if self.ntasks_per_node is not None and self.ntasks != self.ntasks_per_node * nodes:
            raise ValueError(
                f"ntasks={self.ntasks} but ntasks_per_node x nodes = {self.ntasks_per_node * nodes}"
            )
        if self.ntasks % nodes:
            raise ValueError(
                f"ntasks={self.ntasks} is not a multiple of nodes={nodes} "
                "(hint: use ntasks_per_node)"
            )
        return self.ntasks // nodes

    def walltime_s(self) -> float | None:
        return None if self.time is None else parse_walltime(self.time)

    def mem_mb(self) -> int:
        return 0 if self.mem is None else parse_mem(self.mem)

    def login_env(self) -> bool:
        """Whether the job starts from its account's login environment (not ``ALL``)."""
        return self.export.split(",")[0].strip().upper() != "ALL"

    def priority_value(self) -> int:
        if self.priority is None:
            return PriorityClass.NORMAL.value
        return parse_priority(self.priority)


class JobBatch(Request):
    """Many submissions in one request and one transaction: all are stored, or none."""

    jobs: list[JobSubmit] = Field(min_length=1, max_length=1000)


class JobOut(Response):
    id: str
    name: str
    state: str
    reason: str
    queue: str
    user: str
    unix_user: str = ""
    flavor: str
    gpus: int
    workers: int
    gpus_per_worker: int
    distinct_nodes: bool = False
    ntasks_per_node: int | None = None
    cpus_per_task: int = 0
    mem_per_node_mb: int = 0
    limits: str | None = None
    priority: int
    preemptible: bool
    placement: dict[str, list[int]] | None
    command: list[str]
    workdir: str
    submit_dir: str = ""
    export: str = ""
    env_vars: int = 0
    output: str | None = None
    error: str | None = None
    dependency: str | None = None
    requeue: bool = False
    walltime_s: float | None
    topology: str | None
    array_parent: str | None
    array_index: int | None
    task_number: int | None = None
    submit_t_s: float
    start_t_s: float | None
    end_t_s: float | None
    age_s: float
    elapsed_s: float | None
    restart_count: int
    exit_code: int | None
    outcome: str | None
    hold: str | None = Field(None, description="user or admin while held (scontrol hold)")

    @classmethod
    def from_row(cls, row: JobRow, user: str, now_t_s: float) -> JobOut:
        topology = f"{row.topology_mode}:{row.topology_level}" if row.topology_level else None
        elapsed = None if row.start_t_s is None else (row.end_t_s or now_t_s) - row.start_t_s
        limits = row.handle.get("limits") if row.handle else None
        return cls(
            id=row.id,
            name=row.name,
            state=row.state,
            reason=row.reason,
            queue=row.queue,
            user=user,
            unix_user=row.unix_user,
            flavor=row.flavor,
            gpus=row.workers * row.gpus_per_worker,
            workers=row.workers,
            gpus_per_worker=row.gpus_per_worker,
            distinct_nodes=row.distinct_nodes,
            ntasks_per_node=row.ntasks_per_node,
            cpus_per_task=row.cpus_per_task,
            mem_per_node_mb=row.mem_per_node_mb,
            limits=str(limits) if limits else None,
            priority=row.priority,
            preemptible=row.preemptible,
            placement=row.placement,
            command=row.command,
            workdir=row.workdir,
            submit_dir=row.submit_dir,
            export=row.export,
            env_vars=len(row.env),
            output=row.output,
            error=row.error,
            dependency=row.dependency,
            requeue=row.requeue,
            walltime_s=row.walltime_s,
            topology=topology,
            array_parent=row.array_parent,
            array_index=row.array_index,
            task_number=row.task_number,
            submit_t_s=row.submit_t_s,
            start_t_s=row.start_t_s,
            end_t_s=row.end_t_s,
            age_s=max(0.0, now_t_s - row.submit_t_s),
            elapsed_s=elapsed,
            restart_count=row.restart_count,
            exit_code=row.exit_code,
            outcome=row.outcome,
            hold=row.hold,
        )


class LogChunk(Response):
    job_id: str
    rank: int
    text: str
    offset: int
    state: str
    finished: bool


class NodeOut(Response):
    name: str
    flavor: str
    gpus: int
    gpus_used: int
    state: str
    reason: str
    path: list[str]


class NodeAction(Request):
    reason: str = Field("", max_length=256)


class QueueCreate(Request):
    name: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.-]+$")
    parent: str | None = None
    nominal_gpus: dict[str, int] = Field(default_factory=dict)
    borrowing_limit_gpus: dict[str, int] = Field(default_factory=dict)
    lending_limit_gpus: dict[str, int] = Field(default_factory=dict)
    weight: float = Field(1.0, gt=0)
    priority_preemption: bool = Field(
        False, description="its jobs may preempt lower-priority jobs (off, as in Slurm)"
    )
    default_time_s: float | None = Field(
        None, gt=0, description="time limit of jobs that give none (Slurm DefaultTime)"
    )
    max_time_s: float | None = Field(
        None, gt=0, description="largest time limit a job may ask (Slurm MaxTime)"
    )
    max_min_runtime_s: float | None = Field(
        None, ge=0, description="bound on the min_runtime_s its jobs may claim"
    )
    max_checkpoint_grace_s: float | None = Field(
        None, ge=0, description="bound on the checkpoint grace its jobs may claim"
    )

    @field_validator("nominal_gpus", "borrowing_limit_gpus", "lending_limit_gpus")
    @classmethod
    def _non_negative(cls, v: dict[str, int]) -> dict[str, int]:
        for flavor, gpus in v.items():
            if gpus < 0:
                raise ValueError(f"{flavor}: GPUs must be >= 0")
        return v


class QueueUpdate(Request):
    """Fields left out keep their value; ``parent: null`` is not a change (use "" for root)."""

    parent: str | None = None
    nominal_gpus: dict[str, int] | None = None
    borrowing_limit_gpus: dict[str, int] | None = None
    lending_limit_gpus: dict[str, int] | None = None
    weight: float | None = Field(None, gt=0)
    priority_preemption: bool | None = None
    default_time_s: float | None = Field(None, gt=0)
    max_time_s: float | None = Field(None, gt=0)
    max_min_runtime_s: float | None = Field(None, ge=0)
    max_checkpoint_grace_s: float | None = Field(None, ge=0)


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
    members: list[str]
    used_gpus: dict[str, int]
    borrowed_gpus: dict[str, int]
    usage_gpu_s: float
    pending_jobs: int
    running_jobs: int


class MemberChange(Request):
    user: str


class UserCreate(Request):
    """``unix_user``: the Unix account the user's jobs run as (default: the same name)."""

    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.@-]+$")
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
    user: str
    label: str = Field("", max_length=128)


class TokenOut(Response):
    id: int
    user: str
    label: str
    created_t_s: float
    revoked: bool


class TokenCreated(TokenOut):
    token: str = Field(description="the bearer token; shown once, stored only as a hash")


class Health(Response):
    status: str
    version: str


_REQUEST_FIELDS = sorted(
    {f for m in Request.__subclasses__() for f in m.model_fields} | {"user", "token"}
)


def validation_line(errors: list[Any]) -> tuple[str, str | None]:
    """The first pydantic error as ``field: message (hint: ...)``, plus the field name."""
    if not errors:
        return "invalid request", None
    first = errors[0]
    loc = [str(p) for p in first.get("loc", ()) if p not in ("body", "query", "path")]
    field = ".".join(loc) or None
    msg = str(first.get("msg", "invalid")).removeprefix("Value error, ")
    if first.get("type") == "extra_forbidden":
        close = difflib.get_close_matches(loc[-1] if loc else "", _REQUEST_FIELDS, n=1)
        msg = "unknown field" + (f" (hint: did you mean {close[0]!r}?)" if close else "")
    elif first.get("type") == "json_invalid":
        field, msg = None, "request body is not valid JSON"
    more = f" [+{len(errors) - 1} more]" if len(errors) > 1 else ""
    return (f"{field}: {msg}" if field else msg) + more, field
