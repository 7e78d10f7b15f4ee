"""The JSON the REST API answers, as its client reads it: typed dicts, no pydantic.

The server's response models (:mod:`railyard.control.schemas`) define these shapes; the client
keeps them as the plain dicts that ``json.loads`` gives, so a ``railyard`` call imports neither
pydantic nor the scheduler, and ``--json`` prints exactly what the server said. Fields a newer
server adds pass through untouched. ``tests/control/test_wire.py`` checks that every required
key named here is a field of the matching response model. (No ``from __future__ import
annotations`` here: TypedDict reads ``NotRequired`` from evaluated annotations.)
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


class UsageLine(TypedDict):
    start_t_s: float
    end_t_s: float
    user: str | None
    queue: str | None
    account: str | None
    gpu_hours: float
    share: float


class Report(TypedDict):
    start_t_s: float
    end_t_s: float
    period: str
    by: list[str]
    cluster_gpus: int
    lines: list[UsageLine]


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
