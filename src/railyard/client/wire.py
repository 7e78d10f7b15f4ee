"""The JSON the REST API answers, as typed dicts: the one spelling of each response's shape.

The client reads them as the plain dicts that ``json.loads`` gives, so a ``railyard`` call
imports neither pydantic nor the scheduler, and ``--json`` prints exactly what the server
said. The server makes its response models from them (``control.api.wiremodels``) and its use
cases build them; the models still written beside them (``control.schemas``) are held to them
field by field and type by type against ``/openapi.json`` (``tests/control/test_wire.py``).
A key older servers lack is ``NotRequired``. (No ``from __future__ import annotations`` here:
TypedDict reads ``NotRequired`` from evaluated annotations.)
"""

from typing import NotRequired, TypedDict


class Event(TypedDict):
    t_s: float
    kind: str
    message: str


class Job(TypedDict):
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
    hold: str | None  # "user" or "admin" while held (Slurm's JobHeldUser / JobHeldAdmin)
    signal: NotRequired[str | None]  # the signal that ended it, from servers that record it
    exit_signal: NotRequired[str | None]  # the same, as the API names it
    array: NotRequired[str | None]  # an array task's array as submitted (0-9%2)
    batch: NotRequired[bool]  # a batch script (sacct's .batch step), from servers that say
    interactive: NotRequired[str | None]  # pipes or pty: railyard run or alloc
    # What newer servers add, the submission's options as stored (``railyard show`` prints them)
    unix_user: NotRequired[str]
    submit_dir: NotRequired[str]
    nice: NotRequired[int]
    requeue: NotRequired[bool]
    dependency: NotRequired[str | None]
    begin_t_s: NotRequired[float | None]
    deadline_t_s: NotRequired[float | None]
    output: NotRequired[str | None]
    error: NotRequired[str | None]
    export: NotRequired[str]
    env_vars: NotRequired[int]  # how many variables the job carries, not their values
    limits: NotRequired[str | None]
    container_image: NotRequired[str | None]
    cpus_per_task: NotRequired[int]
    mem_per_node_mb: NotRequired[int]
    ntasks_per_node: NotRequired[int | None]
    distinct_nodes: NotRequired[bool]
    only_nodes: NotRequired[list[str] | None]
    never_nodes: NotRequired[list[str] | None]
    task_number: NotRequired[int | None]
    fair_share: NotRequired[str | None]
    active_t_s: NotRequired[float | None]
    run_t_s: NotRequired[float | None]


class LogChunk(TypedDict):
    job_id: str
    rank: int
    text: str
    offset: int
    state: str
    finished: bool


class Node(TypedDict):
    features: NotRequired[list[str]]  # from servers that keep them
    cpus: NotRequired[int]  # CPU cores, 0 unknown (from servers that say)
    memory_mb: NotRequired[int]  # 0 unknown
    name: str
    flavor: str
    gpus: int
    gpus_used: int
    state: str
    reason: str
    path: list[str]
    health: str | None
    health_t_s: float | None


class HealthResult(TypedDict):
    check: str
    status: str
    fatal: bool
    measured: float | None
    expected: float | None
    unit: str
    ratio: float | None
    fail_below: float | None
    warn_below: float | None
    source: str
    detail: str


class HealthRun(TypedDict):
    run_id: str
    node: str
    t_s: float
    verdict: str | None
    reporter: str
    results: list[HealthResult]


class HealthReport(TypedDict):
    run: HealthRun
    state: str
    reason: str
    action: str


class AcrossTest(TypedDict):
    group: list[str]
    busbw_gbps: float | None
    expected_gbps: float | None
    source: str
    ok: bool
    detail: str


class Across(TypedDict):
    active: bool
    nodes: list[str]
    group: list[str]
    running: bool
    tests: list[AcrossTest]
    detail: str


class Queue(TypedDict):
    name: str
    parent: str | None
    nominal_gpus: dict[str, int]
    borrowing_limit_gpus: dict[str, int]
    lending_limit_gpus: dict[str, int]
    weight: float
    max_time_s: float | None
    is_default: NotRequired[bool]  # from servers with partitions
    pool: NotRequired[str | None]  # its jobs run on this node pool only (None: unpooled nodes)
    default_time_s: NotRequired[float | None]
    idle_limit_s: NotRequired[float | None]
    max_checkpoint_grace_s: NotRequired[float | None]
    max_min_runtime_s: NotRequired[float | None]
    priority_preemption: NotRequired[bool]
    container_mounts: NotRequired[list[str] | None]
    max_priority: int
    members: list[str]
    used_gpus: dict[str, int]
    borrowed_gpus: dict[str, int]
    usage_gpu_s: float
    pending_jobs: int
    running_jobs: int


class User(TypedDict):
    id: int
    name: str
    is_admin: bool
    unix_user: str
    created_t_s: float
    queues: list[str]


class Token(TypedDict):
    id: int
    user: str
    label: str
    created_t_s: float
    expires_t_s: float | None
    revoked: bool


class TokenCreated(Token):
    token: str


class Health(TypedDict):
    status: str
    version: str
    reason: NotRequired[str | None]
    last_step_t_s: NotRequired[float | None]
    failing_steps: NotRequired[int]
    last_failed_t_s: NotRequired[float | None]
    behind_s: NotRequired[float | None]
    held_jobs: NotRequired[int]
    held: NotRequired[list[str]]
    stuck_jobs: NotRequired[int]
    stuck: NotRequired[list[str]]


class UsageLine(TypedDict):
    """One group's usage in one period; a group key not asked for is None."""

    start_t_s: float
    end_t_s: float
    user: str | None
    queue: str | None
    account: str | None
    gpu_hours: float
    share: float  # of the cluster's GPU-hours in the period (0 with no GPUs)


class Report(TypedDict):
    start_t_s: float
    end_t_s: float
    period: str
    by: list[str]
    cluster_gpus: int
    lines: list[UsageLine]
    periods: list[list[float]]  # [start, end] of each period of the window, with usage or not


class SamplePoint(TypedDict):
    t_s: float
    gpu_util_pct: float | None
    gpu_mem_used_bytes: float | None
    gpu_power_w: float | None
    gpu_temp_c_max: float | None
    cpu_pct: float | None
    host_mem_bytes: float | None
    gpus: dict[str, float]


class Samples(TypedDict):
    job_id: str
    bucket_s: float
    readings: int
    partial: bool
    gpus: list[str]
    points: list[SamplePoint]


class JobPriority(TypedDict):
    id: str
    queue: str
    user: str
    order: int | None  # its place among the pending jobs (1 first); None while held
    starving: bool
    priority: int
    nice: int
    fair_share: list[float]  # usage share / weight share per level, root first, the user's last
    age_s: float


class Priorities(TypedDict):
    ordering: str
    keys: list[str]  # the factors in the order the ordering compares them
    starvation_limit_s: float | None  # None: no job starves
    jobs: list[JobPriority]


class Share(TypedDict):
    queue: str
    user: str  # empty on a queue's line
    depth: int
    raw_shares: float
    norm_shares: float
    raw_usage_gpu_s: float
    effective_usage: float
    level_fs: float | None  # None: no usage (sshare's inf)
    fair_share: float | None  # a user's line only
