"""One submission, typed and validated once at the edge: the body of ``POST /v1/jobs`` (and
each of a batch's), as every way in reads it (the route, the raw-ASGI fast path, the group
commit, ``--test-only``).

Its Slurm-style fields keep what their parsers return (:mod:`railyard.control.submitfields`:
MiB, seconds, an array's indices, a signal's name...) and its GPU shape is worked out once
by the model's own check, so admission (:mod:`railyard.control.usecases.admission`) reads
values and never parses a field again. A new field goes here, with its parsed type.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, Self

from pydantic import AfterValidator, Field, PrivateAttr, field_validator, model_validator

from railyard.client.bounds import (
    INT32_MAX,
    MAX_ARG_BYTES,
    MAX_COMMAND_ARGS,
    MAX_COMMAND_BYTES,
    MAX_ENV_BYTES,
    MAX_GRACE_S,
    MAX_JOB_GPUS,
    MAX_QUEUE_NAME,
    MAX_SCRIPT_BYTES,
)
from railyard.client.values import MAX_ARRAY_TASKS, array_task_count
from railyard.control.containerschema import ContainerIn
from railyard.control.jobspec import Shape, check_env
from railyard.control.schemas import Request
from railyard.control.store.limits import (
    Arg,
    Count,
    EnvName,
    Flavor,
    Name,
    OutputPath,
    Script,
    Seconds,
    Text,
    Workdir,
    utf8_len,
)
from railyard.control.submitfields import (
    ArrayAsked,
    ConstraintAsked,
    DependencyAsked,
    HostNames,
    MemMiB,
    PriorityAsked,
    SignalAsked,
    TopologyAsked,
    WalltimeS,
)

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

    # Validated, the Slurm-style fields hold their parsed values (``mem`` in MiB, ``time`` in
    # seconds: ``submitfields``) and ``shape()`` the GPU shape; the docstring is the API's.

    command: list[Arg] | None = Field(None, min_length=1, max_length=MAX_COMMAND_ARGS)
    script: Script | None = None
    name: Name = ""
    queue: PartitionList = "default"
    gpus: int | None = Field(None, ge=0, le=MAX_JOB_GPUS)
    gpu_type: str | None = Field(None, max_length=64)
    nodes: Count | None = None
    gpus_per_node: Count | None = None
    gres: bool = Field(
        False,
        description="gpus_per_node was asked as sbatch's --gres=gpu[:TYPE]:N, which sets no "
        "SLURM_GPUS_PER_NODE (--gpus-per-node does)",
    )
    workers: Count | None = None
    gpus_per_worker: int | None = Field(None, ge=0, le=MAX_JOB_GPUS)
    ntasks: Count | None = None
    ntasks_per_node: Count | None = None
    cpus_per_task: Count | None = None
    mem: MemMiB = None
    gpus_per_task: Count | None = Field(
        None, description="GPUs each task sees, its own (sbatch --gpus-per-task)"
    )
    mem_per_cpu: MemMiB = Field(
        None, description="memory per CPU (sbatch --mem-per-cpu; a task has 1 CPU unless told)"
    )
    mem_per_gpu: MemMiB = Field(None, description="memory per GPU (sbatch --mem-per-gpu)")
    flavor: Flavor | None = None
    priority: PriorityAsked = Field(
        None, description=f"0..{INT32_MAX}, or low|normal|high|critical"
    )
    nice: int = Field(
        0,
        ge=-INT32_MAX,
        le=INT32_MAX,
        description="lowers the priority by this much (Slurm's --nice; below 0: admins only)",
    )
    time: WalltimeS = None
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
    kill_on_invalid_dep: bool = Field(
        False,
        description="once its dependency can never be met, it is cancelled, not left pending "
        "with reason DependencyNeverSatisfied (sbatch --kill-on-invalid-dep=yes)",
    )
    exclusive: bool = False
    nodelist: HostNames = Field(
        None, description="its nodes are among these (sbatch --nodelist: gpu[01-04],gpu07)"
    )
    exclude: HostNames = Field(None, description="none of these (sbatch --exclude)")
    constraint: ConstraintAsked = Field(
        None, description="node features it needs: ib&nvme, h100|a100 (sbatch -C)"
    )
    array: ArrayAsked = None
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
    dependency: DependencyAsked = None
    topology: TopologyAsked = None
    checkpoint_grace_s: float | None = Field(None, ge=0, le=MAX_GRACE_S)
    min_runtime_s: Seconds = 0.0
    signal: SignalAsked = None
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

    _worked_out: tuple[Shape, int] = PrivateAttr()  # the shape and the stored bytes

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
        shape = self._work_out_shape()  # raises on a contradictory shape
        workers, per_worker, _, _ = shape
        if workers * per_worker > MAX_JOB_GPUS:
            raise ValueError(f"{workers * per_worker} GPUs: a job has at most {MAX_JOB_GPUS}")
        self._worked_out = (shape, self._check_sizes())
        return self

    def _check_sizes(self) -> int:
        """What ``execve`` must take: each argument, all of them, the environment; and what
        one job row stores of them (:attr:`stored_bytes`)."""
        args = [utf8_len(a) for a in self.command or ()]
        if any(n > MAX_ARG_BYTES for n in args):
            raise ValueError(f"command: an argument is over {MAX_ARG_BYTES} bytes")
        if sum(args) + len(args) > MAX_COMMAND_BYTES:
            raise ValueError(f"command: arguments total over {MAX_COMMAND_BYTES} bytes")
        env_bytes = sum(utf8_len(k) + utf8_len(v) + 2 for k, v in self.env.items())
        if env_bytes > MAX_ENV_BYTES:
            raise ValueError(f"env: entries total over {MAX_ENV_BYTES} bytes")
        script_bytes = utf8_len(self.script) if self.script is not None else 0
        if script_bytes > MAX_SCRIPT_BYTES:
            raise ValueError(f"script: over {MAX_SCRIPT_BYTES} bytes")
        return sum(args) + len(args) + env_bytes + script_bytes

    @property
    def stored_bytes(self) -> int:
        """Bytes one job row of this submission stores for its command, env and script."""
        return self._worked_out[1]

    def shape(self) -> Shape:
        """Chunks and tasks, as validation worked them out."""
        return self._worked_out[0]

    def _work_out_shape(self) -> Shape:
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


MAX_BATCH_JOBS = 1000
MAX_BATCH_TASKS = MAX_ARRAY_TASKS
"""The most tasks one batch stores, its arrays' tasks counted one by one: as many as one array
may hold. 1,000 arrays of 10,000 tasks each were 10 million rows from a 60 KB body, one
27-second write that locked every other user out (and as many ints while parsing)."""


class JobBatch(Request):
    """Many submissions in one request and one transaction: all are stored, or none."""

    jobs: list[JobSubmit] = Field(min_length=1, max_length=MAX_BATCH_JOBS)

    @model_validator(mode="before")
    @classmethod
    def _few_enough_tasks(cls, data: Any) -> Any:
        """Counted from the raw specs, before any array is expanded."""
        jobs = data.get("jobs") if isinstance(data, dict) else None
        if isinstance(jobs, list) and len(jobs) <= MAX_BATCH_JOBS:
            total = sum(array_task_count(j.get("array")) if isinstance(j, dict) else 1
                        for j in jobs)  # fmt: skip
            if total > MAX_BATCH_TASKS:
                raise ValueError(
                    f"jobs: {total} tasks in one batch, over {MAX_BATCH_TASKS} (hint: send "
                    "them in several requests)"
                )
        return data
