"""Request and response models of the REST API; a submission's is
:mod:`railyard.control.submission`.

Requests use ``extra="forbid"`` so a typo (``gpu`` for ``gpus``) is an error, not a silent
default, and every field is bounded (:mod:`railyard.control.store.limits`): what is accepted
can be stored on both stores and launched. Responses ignore unknown fields so an older client
keeps working against a newer server. The value parsers (walltime, signal, priority) are those
of :mod:`railyard.client.values`, so the API, batch-script directives and CLI flags accept
exactly the same spellings.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    field_validator,
)

from railyard.client.bounds import INT32_MAX, MAX_CANCEL_IDS
from railyard.client.values import (
    parse_dependency,
    parse_priority,
    parse_signal,
    parse_time_change,
    parse_walltime,
)
from railyard.control.store.limits import Name, Short
from railyard.control.store.tables import JobState


def _priority_in(value: object) -> object:
    """A class name or an integer to the integer (other types fail pydantic's int check)."""
    if isinstance(value, int | str) and not isinstance(value, bool):
        return parse_priority(value)
    return value


Priority = Annotated[int, BeforeValidator(_priority_in), Field(ge=0, le=INT32_MAX)]
"""A priority as ``--priority`` spells it (an integer or low|normal|high|critical), stored as
the integer."""


def _parsed_by(parse: Callable[[Any], object]) -> AfterValidator:
    """A field ``parse`` must accept (None passes); the value is kept as the user wrote it."""

    def check(value: Any) -> Any:
        if value is not None:
            parse(value)
        return value

    return AfterValidator(check)


TimeIn = Annotated[Short | int | None, _parsed_by(parse_walltime)]
"""``--time`` as written: MM, HH:MM:SS, D-HH:MM:SS... (minutes when an integer, as Slurm)."""
TimeChangeIn = Annotated[Short | int | None, _parsed_by(parse_time_change)]
"""A time limit as ``--time`` writes it, or ``+T``/``-T``: that much more or less."""
PriorityIn = Annotated[int | Short | None, _parsed_by(parse_priority)]
"""``--priority`` as written: an integer or low|normal|high|critical."""


class Request(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class Response(BaseModel):
    model_config = ConfigDict(extra="ignore")


def _signal_alone(value: str) -> str:
    """scancel's ``--signal``: a name or number alone (no ``B:``, no ``@TIME``), as SIGNAME."""
    if ":" in value or "@" in value:
        raise ValueError(f"bad signal {value!r} (hint: a name or number, e.g. USR1 or 10)")
    return parse_signal(value)[0]


class JobSignal(Request):
    """``scancel --signal``: send ``signal`` to a running job's processes (every task of an
    array's running ones), once, with no escalation."""

    signal: Annotated[Short, AfterValidator(_signal_alone)]
    batch: bool = Field(
        False, description="the batch script's shell alone (scancel --batch); else its steps"
    )


class JobUpdate(Request):
    """``scontrol update``: change a pending job (or every pending task of an array), or a
    running job's time limit. A plain user may lower the time limit, not raise it, and ask a
    priority up to the queue's bound; an admin may do either. ``time`` "+30" adds 30 minutes
    to the limit, "-30" takes them off. ``dependency`` "" removes it. ``nice`` replaces the
    job's (its priority moves by the difference; below 0 is an admin's), ``name`` its name."""

    time: TimeChangeIn = None
    priority: PriorityIn = None
    dependency: str | None = Field(None, max_length=1024)
    nice: int | None = Field(None, ge=-INT32_MAX, le=INT32_MAX, description="below 0: admins")
    name: Name | None = None
    array_throttle: int | None = Field(
        None, ge=0, le=INT32_MAX, description="an array's tasks running at once (%N); 0: no limit"
    )

    @field_validator("dependency")
    @classmethod
    def _dependency(cls, v: str | None) -> str | None:
        return v if not v else parse_dependency(v)


class JobCancel(Request):
    """Cancel many jobs (or arrays) in one transaction, as ``scancel 12 13 14`` expects: the
    loop never starts one of them between two others' cancels."""

    ids: list[Annotated[str, Field(max_length=64)]] = Field(min_length=1, max_length=MAX_CANCEL_IDS)


class Refused(Response):
    id: str
    status: int
    detail: str


class JobOut(Response):
    id: str
    name: str
    state: JobState
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
    nice: int = 0
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
    array: str | None = Field(None, description="the array's tasks as submitted: 0-9999%2")
    task_number: int | None = None
    submit_t_s: float
    start_t_s: float | None
    end_t_s: float | None
    age_s: float
    elapsed_s: float | None
    restart_count: int
    exit_code: int | None
    exit_signal: str | None = Field(None, description="the signal that ended it (Slurm's 0:9)")
    outcome: str | None
    hold: str | None = Field(None, description="user or admin while held (scontrol hold)")
    interactive: str | None = Field(
        None, description="pipes or pty for an interactive job (railyard run, alloc)"
    )
    batch: bool = Field(False, description="a batch script: its shell is the job's batch step")
    active_t_s: float | None = Field(
        None, description="an interactive job: when its user last sent it anything"
    )
    container_image: str | None = Field(None, description="the image its processes run in")
    run_t_s: float | None = Field(
        None,
        description="when its image was on every node of this attempt and its processes began "
        "(its time limit runs from then); null for a job without an image, or while it pulls",
    )
    begin_t_s: float | None = Field(None, description="not started before this (--begin)")
    deadline_t_s: float | None = Field(None, description="to end by this (--deadline)")
    only_nodes: list[str] | None = Field(None, description="its nodes are among these")
    never_nodes: list[str] | None = Field(None, description="none of these")
    fair_share: str | None = Field(
        None, description="a pending job's fair-share figures, by level (GET of one job)"
    )

    @classmethod
    def from_row(cls, row: Any, user: str, now_t_s: float) -> JobOut:
        """From a ``JobRow``, or anything with its columns as attributes (a Core row, a
        ``bulk.JobView``). Not validated again: the store's columns already have these types
        (an array's cancel answers 10,000 of them)."""
        topology = f"{row.topology_mode}:{row.topology_level}" if row.topology_level else None
        elapsed = None if row.start_t_s is None else (row.end_t_s or now_t_s) - row.start_t_s
        limits = row.handle.get("limits") if row.handle else None
        return cls.model_construct(
            id=row.id,
            name=row.name,
            state=JobState(row.state),
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
            nice=row.nice,
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
            array=row.array_spec,
            task_number=row.task_number,
            submit_t_s=row.submit_t_s,
            start_t_s=row.start_t_s,
            end_t_s=row.end_t_s,
            age_s=max(0.0, now_t_s - row.submit_t_s),
            elapsed_s=elapsed,
            restart_count=row.restart_count,
            exit_code=row.exit_code,
            exit_signal=row.exit_signal,
            outcome=row.outcome,
            hold=row.hold,
            interactive=getattr(row, "terminal", "") or None,
            batch=getattr(row, "script", None) is not None,
            active_t_s=getattr(row, "active_t_s", None),
            container_image=(getattr(row, "container", None) or {}).get("image"),
            run_t_s=getattr(row, "run_t_s", None),
            begin_t_s=getattr(row, "begin_t_s", None),
            deadline_t_s=getattr(row, "deadline_t_s", None),
            only_nodes=getattr(row, "only_nodes", None),
            never_nodes=getattr(row, "never_nodes", None),
        )

    @classmethod
    def from_submitted(cls, rows: Sequence[Any], user: str, now_t_s: float) -> JobOut:
        """The record of one submit (``jobs.submit``'s rows): the job, or for an array the
        array itself, as squeue shows a pending one and sbatch prints one id: its id is the
        array's (``1234``, what cancel, hold and ``?array=`` take), ``array`` its tasks
        (``0-9999%2``). 10,000 task records (7 MB) cost more than the tasks' insert."""
        first = cls.from_row(rows[0], user, now_t_s)
        if first.array_parent is None:
            return first
        return first.model_copy(
            update={"id": first.array_parent, "array_index": None, "task_number": None}
        )


class CancelOut(Response):
    """The jobs a many-job cancel reached, as they are now, and the ids it refused, each with
    the status and line a single cancel would have answered."""

    jobs: list[JobOut]
    refused: list[Refused]


class EventOut(Response):
    """One entry of a job's history: a decision or a state change (``events`` table)."""

    t_s: float
    kind: str
    message: str


class LogChunk(Response):
    job_id: str
    rank: int
    text: str
    offset: int
    state: JobState
    finished: bool


class ExpectedStart(Response):
    """A pending job and when the twin expects it to start (None: not within the horizon,
    or a job without GPUs, which the twin does not simulate)."""

    id: str
    queue: str
    user: str
    gpus: int
    start_in_s: float | None
    start_t_s: float | None


class TestOnly(Response):
    """When a submission would start (None: not within the twin's horizon); a job without
    GPUs is taken to start at once (the twin simulates GPU jobs)."""

    queue: str
    gpus: int
    start_in_s: float | None
    start_t_s: float | None


class Health(Response):
    """``ok``; ``degraded`` (200) when jobs are held for a ``SchedulerError`` (the loop could
    not handle them and went on for the others); or ``failing`` (503) with the reason: the
    store does not answer, the scheduler loop's last step failed, the loop is behind, no job
    started for the stall time while some could, or jobs are stuck in a transient state
    (starting, cancelling, preempting) past their deadline."""

    status: str = Field(json_schema_extra={"enum": ["ok", "degraded", "failing"]})
    version: str
    reason: str | None = None
    last_step_t_s: Annotated[float | None, Field(description="end of the last good step")] = None
    failing_steps: int = 0
    last_failed_t_s: Annotated[float | None, Field(description="when a step last failed")] = None
    behind_s: Annotated[float | None, Field(description="seconds since a step ended")] = None
    stuck_jobs: Annotated[int, Field(description="jobs past a transient state's deadline")] = 0
    stuck: Annotated[list[str], Field(description="the oldest stuck jobs' ids (20 at most)")] = []
    held_jobs: Annotated[int, Field(description="jobs held for a SchedulerError")] = 0
    held: Annotated[list[str], Field(description="the oldest held jobs' ids (20 at most)")] = []


class ErrorOut(Response):
    """Every refusal: a one-line ``detail`` (the field, what is wrong, a hint) plus the field
    and the hint alone, when there are any."""

    detail: str
    field: str | None = None
    hint: str | None = None
