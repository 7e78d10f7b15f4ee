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
    """One submission. GPU shape: ``gpus`` (one worker per GPU, torchrun-style), or ``nodes``
    with ``gpus_per_node``, or explicit ``workers`` and ``gpus_per_worker``; default 1 GPU."""

    command: list[str] | None = None
    script: str | None = None
    name: str = Field("", max_length=256)
    queue: str = "default"
    gpus: int | None = Field(None, ge=1)
    nodes: int | None = Field(None, ge=1)
    gpus_per_node: int | None = Field(None, ge=1)
    workers: int | None = Field(None, ge=1)
    gpus_per_worker: int | None = Field(None, ge=1)
    flavor: str | None = None
    priority: int | str | None = None
    time: str | int | None = None
    preemptible: bool = False
    array: str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    workdir: str = Field("", max_length=1024)
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

    @model_validator(mode="after")
    def _one_command_one_shape(self) -> Self:
        if (self.command is None) == (self.script is None):
            raise ValueError("give exactly one of command or script")
        if self.command is not None and not self.command:
            raise ValueError("command must not be empty")
        self.shape()  # raises on a contradictory shape
        return self

    def shape(self) -> tuple[int, int]:
        """(workers, gpus_per_worker) from whichever spelling was used."""
        by_node = self.nodes is not None or self.gpus_per_node is not None
        explicit = self.workers is not None or self.gpus_per_worker is not None
        if explicit and (by_node or self.gpus is not None):
            raise ValueError("give workers/gpus_per_worker, or gpus, or nodes/gpus_per_node")
        if explicit:
            return self.workers or 1, self.gpus_per_worker or 1
        if by_node:
            if self.nodes is not None and self.gpus_per_node is None:
                if self.gpus is None or self.gpus % self.nodes:
                    raise ValueError("nodes needs gpus_per_node (or gpus divisible by nodes)")
                return self.gpus, 1
            total = (self.nodes or 1) * (self.gpus_per_node or 1)
            if self.gpus is not None and self.gpus != total:
                raise ValueError(f"gpus={self.gpus} but nodes x gpus_per_node = {total}")
            return total, 1
        return self.gpus or 1, 1

    def walltime_s(self) -> float | None:
        return None if self.time is None else parse_walltime(self.time)

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
    flavor: str
    gpus: int
    workers: int
    gpus_per_worker: int
    priority: int
    preemptible: bool
    placement: dict[str, list[int]] | None
    command: list[str]
    workdir: str
    walltime_s: float | None
    topology: str | None
    array_parent: str | None
    array_index: int | None
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
        return cls(
            id=row.id,
            name=row.name,
            state=row.state,
            reason=row.reason,
            queue=row.queue,
            user=user,
            flavor=row.flavor,
            gpus=row.workers * row.gpus_per_worker,
            workers=row.workers,
            gpus_per_worker=row.gpus_per_worker,
            priority=row.priority,
            preemptible=row.preemptible,
            placement=row.placement,
            command=row.command,
            workdir=row.workdir,
            walltime_s=row.walltime_s,
            topology=topology,
            array_parent=row.array_parent,
            array_index=row.array_index,
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
    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.@-]+$")
    is_admin: bool = False


class UserOut(Response):
    id: int
    name: str
    is_admin: bool
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
