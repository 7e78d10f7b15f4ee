"""Request and response models of the REST API, and the parsers for Slurm-style values.

Requests use ``extra="forbid"`` so a typo (``gpu`` for ``gpus``) is an error, not a silent
default, and every field is bounded (:mod:`railyard.control.store.limits`): what is accepted can be
stored on both stores and launched. Responses ignore unknown fields so an older client keeps
working against a newer server. The value parsers (walltime, signal, array, priority,
topology) are those of :mod:`railyard.client.values`, so the API, batch-script directives and
CLI flags accept exactly the same spellings.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Annotated, Any, Literal, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from railyard.client.bounds import (
    INT32_MAX,
    MAX_ARG_BYTES,
    MAX_CANCEL_IDS,
    MAX_COMMAND_ARGS,
    MAX_COMMAND_BYTES,
    MAX_ENV_BYTES,
    MAX_GRACE_S,
    MAX_JOB_GPUS,
    MAX_QUEUE_NAME,
    MAX_SCRIPT_BYTES,
)
from railyard.client.values import (
    MAX_HOSTLIST_TEXT,
    parse_array,
    parse_constraint,
    parse_dependency,
    parse_hostlist,
    parse_mem,
    parse_priority,
    parse_signal,
    parse_topology,
    parse_walltime,
)
from railyard.control.containerschema import ContainerIn
from railyard.control.jobspec import (
    Shape,
    check_env,
)
from railyard.control.store.limits import (
    Arg,
    ArraySpec,
    Count,
    EnvName,
    Flavor,
    Name,
    OutputPath,
    Script,
    Seconds,
    Short,
    Text,
    Workdir,
    utf8_len,
)
from railyard.control.store.tables import JobState
from railyard.sched.model import PriorityClass


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


MAX_PARTITIONS = 16  # sbatch -p a,b,...: each is tried at submit, so the list is bounded
_PARTITION = re.compile(r"[A-Za-z0-9_.-]+")


def _partition_list(value: str) -> str:
    """One queue, or sbatch's comma-separated partition list (``gpu,debug``)."""
    names = value.split(",")
    bad = next((n for n in names if not _PARTITION.fullmatch(n)), None)
    if bad is not None:
        raise ValueError(
            f"{bad!r} is not a queue name (hint: letters, digits, '_', '.' and '-'; "
            "several partitions as gpu,debug)"
        )
    if len(names) > MAX_PARTITIONS:
        raise ValueError(f"{len(names)} partitions (hint: at most {MAX_PARTITIONS})")
    return value


PartitionList = Annotated[
    str,
    Field(min_length=1, max_length=MAX_PARTITIONS * (MAX_QUEUE_NAME + 1)),
    AfterValidator(_partition_list),
]
"""A queue, or sbatch's ``-p gpu,debug``: the job goes to the first that admits it."""
HostList = Annotated[str, Field(max_length=MAX_HOSTLIST_TEXT), _parsed_by(parse_hostlist)]
"""Slurm's hostlist as written (``gpu[01-04,07]``); the names are expanded at submit."""
TimeIn = Annotated[Short | int | None, _parsed_by(parse_walltime)]
"""``--time`` as written: MM, HH:MM:SS, D-HH:MM:SS... (minutes when an integer, as Slurm)."""
PriorityIn = Annotated[int | Short | None, _parsed_by(parse_priority)]
"""``--priority`` as written: an integer or low|normal|high|critical."""


class Request(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


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

    command: list[Arg] | None = Field(None, min_length=1, max_length=MAX_COMMAND_ARGS)
    script: Script | None = None
    name: Name = ""
    queue: PartitionList = "default"
    gpus: int | None = Field(None, ge=0, le=MAX_JOB_GPUS)
    gpu_type: str | None = Field(None, max_length=64)
    nodes: Count | None = None
    gpus_per_node: Count | None = None
    workers: Count | None = None
    gpus_per_worker: int | None = Field(None, ge=0, le=MAX_JOB_GPUS)
    ntasks: Count | None = None
    ntasks_per_node: Count | None = None
    cpus_per_task: Count | None = None
    mem: Annotated[Short | int | None, _parsed_by(parse_mem)] = None
    gpus_per_task: Count | None = Field(
        None, description="GPUs each task sees, its own (sbatch --gpus-per-task)"
    )
    mem_per_cpu: Annotated[Short | int | None, _parsed_by(parse_mem)] = Field(
        None, description="memory per CPU (sbatch --mem-per-cpu; a task has 1 CPU unless told)"
    )
    mem_per_gpu: Annotated[Short | int | None, _parsed_by(parse_mem)] = Field(
        None, description="memory per GPU (sbatch --mem-per-gpu)"
    )
    flavor: Flavor | None = None
    priority: PriorityIn = Field(None, description=f"0..{INT32_MAX}, or low|normal|high|critical")
    nice: int = Field(
        0,
        ge=-INT32_MAX,
        le=INT32_MAX,
        description="lowers the priority by this much (Slurm's --nice; below 0: admins only)",
    )
    time: TimeIn = None
    preemptible: bool = False
    hold: bool = Field(False, description="submit held (sbatch -H): it waits, JobHeldUser, "
                       "until released")  # fmt: skip
    begin_t_s: float | None = Field(
        None, ge=0, le=1e11, description="Unix seconds: not started before this (sbatch --begin)"
    )
    deadline_t_s: float | None = Field(
        None,
        ge=0,
        le=1e11,
        description="Unix seconds: it must end by then; once it no longer could (now plus its "
        "time limit is later), it ends DEADLINE without starting (sbatch --deadline)",
    )
    exclusive: bool = False
    nodelist: HostList | None = Field(
        None, description="its nodes are among these (sbatch --nodelist: gpu[01-04],gpu07)"
    )
    exclude: HostList | None = Field(None, description="none of these (sbatch --exclude)")
    constraint: (
        Annotated[str, Field(max_length=MAX_HOSTLIST_TEXT), _parsed_by(parse_constraint)] | None
    ) = Field(None, description="node features it needs: ib&nvme, h100|a100 (sbatch -C)")
    array: Annotated[ArraySpec | None, _parsed_by(parse_array)] = None
    export: str = Field("NONE", min_length=1, max_length=1024)
    env: dict[EnvName, Text] = Field(default_factory=dict)  # bounded by check_env
    workdir: Workdir = Field(
        "", description="an existing absolute directory on the node ('' for the default)"
    )
    submit_dir: Workdir = ""
    submit_host: str = Field("", max_length=256)
    output: OutputPath | None = None
    error: OutputPath | None = None
    open_mode: Literal["append", "truncate"] | None = Field(
        None,
        description="sbatch --open-mode: append to the output files or truncate them (default: "
        "truncate on a first start, append after a requeue)",
    )
    dependency: str | None = Field(None, max_length=1024)
    topology: Annotated[Short | None, _parsed_by(parse_topology)] = None
    checkpoint_grace_s: float | None = Field(None, ge=0, le=MAX_GRACE_S)
    min_runtime_s: Seconds = 0.0
    signal: Annotated[Short | None, _parsed_by(parse_signal)] = None
    requeue: bool = False
    umask: int | None = Field(
        None,
        ge=0,
        le=0o777,
        description="the submitter's umask, which the job's processes and its output files "
        "get (railyard submit sends it, as sbatch does); none: 0022, Slurm's default",
    )
    terminal: Literal["", "pipes", "pty", "app"] = Field(
        "",
        description="railyard run: rank 0's stdio relayed to the client (pipes or a pty); "
        "app: a web app (railyard jupyter) served at /ui/jobs/N/app/ to its owner",
    )

    container: ContainerIn | None = Field(
        None, description="run every process in this image (Pyxis's --container-* options)"
    )

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
        begin, deadline = self.begin_t_s, self.deadline_t_s
        if begin is not None and deadline is not None and begin >= deadline:
            raise ValueError("begin_t_s is not before deadline_t_s (hint: begin earlier)")
        asked = [n for n in ("mem", "mem_per_cpu", "mem_per_gpu") if getattr(self, n) is not None]
        if len(asked) > 1:
            raise ValueError(f"give one of {', '.join(asked)} (as sbatch: they exclude each other)")
        workers, per_worker, _, _ = self.shape()  # raises on a contradictory shape
        if workers * per_worker > MAX_JOB_GPUS:
            raise ValueError(f"{workers * per_worker} GPUs: a job has at most {MAX_JOB_GPUS}")
        self._check_sizes()
        return self

    def _check_sizes(self) -> None:
        """What ``execve`` must take: each argument, all of them, the environment."""
        args = [utf8_len(a) for a in self.command or ()]
        if any(n > MAX_ARG_BYTES for n in args):
            raise ValueError(f"command: an argument is over {MAX_ARG_BYTES} bytes")
        if sum(args) + len(args) > MAX_COMMAND_BYTES:
            raise ValueError(f"command: arguments total over {MAX_COMMAND_BYTES} bytes")
        env_bytes = sum(utf8_len(k) + utf8_len(v) + 2 for k, v in self.env.items())
        if env_bytes > MAX_ENV_BYTES:
            raise ValueError(f"env: entries total over {MAX_ENV_BYTES} bytes")
        if self.script is not None and utf8_len(self.script) > MAX_SCRIPT_BYTES:
            raise ValueError(f"script: over {MAX_SCRIPT_BYTES} bytes")

    def stored_bytes(self) -> int:
        """Bytes one job row of this submission stores for its command, env and script."""
        command = sum(utf8_len(a) + 1 for a in self.command or ())
        env = sum(utf8_len(k) + utf8_len(v) + 2 for k, v in self.env.items())
        return command + env + (utf8_len(self.script) if self.script else 0)

    def shape(self) -> Shape:
        """Chunks and tasks from whichever spelling was used."""
        by_node = self.nodes is not None or self.gpus_per_node is not None
        explicit = self.workers is not None or self.gpus_per_worker is not None
        if explicit and (by_node or self.gpus is not None):
            raise ValueError("give workers/gpus_per_worker, or gpus, or nodes/gpus_per_node")
        per_node = self.ntasks_per_node
        if self.gpus_per_task is not None:
            return self._task_gpus(self.gpus_per_task, explicit)
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

    def _task_gpus(self, per_task: int, explicit: bool) -> Shape:
        """``--gpus-per-task``: a chunk per task of ``per_task`` GPUs that the scheduler may
        spread, or with ``--nodes`` each node's tasks together; tasks from ``--ntasks`` (or
        per node, or the GPUs over ``per_task``), one by default."""
        if explicit or self.gpus_per_node is not None:
            raise ValueError(
                "gpus_per_task: give it with ntasks (or nodes and ntasks_per_node), not with "
                "gpus_per_node or workers"
            )
        if self.nodes is not None:
            tasks_here = self._tasks_per_node(self.nodes) or 1
            total = self.nodes * tasks_here
        else:
            total = self.ntasks or self.ntasks_per_node or (self.gpus or per_task) // per_task
        if self.gpus is not None and self.gpus != total * per_task:
            raise ValueError(f"gpus={self.gpus} but tasks x gpus_per_task = {total * per_task}")
        if self.nodes is not None:
            return Shape(self.nodes, tasks_here * per_task, True, tasks_here)
        return Shape(total, per_task, False, None)

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
    """``scontrol update``: change a pending job (or every pending task of an array). A plain
    user may lower the time limit, not raise it, and ask a priority up to the queue's bound;
    an admin may do either. ``dependency`` "" removes it."""

    time: TimeIn = None
    priority: PriorityIn = None
    dependency: str | None = Field(None, max_length=1024)

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
