"""Request and response models of the REST API, and the parsers for Slurm-style values.

Requests use ``extra="forbid"`` so a typo (``gpu`` for ``gpus``) is an error, not a silent
default, and every field is bounded (:mod:`railyard.control.limits`): what is accepted can be
stored on both stores and launched. Responses ignore unknown fields so an older client keeps
working against a newer server. The value parsers (walltime, signal, array, priority,
topology) live here so the API, batch-script directives and CLI flags accept exactly the same
spellings.
"""

from __future__ import annotations

import difflib
import re
import signal as signals
from typing import TYPE_CHECKING, Annotated, Any, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from railyard.control.limits import (
    INT32_MAX,
    MAX_ARG_BYTES,
    MAX_ARRAY_SPEC,
    MAX_COMMAND_ARGS,
    MAX_COMMAND_BYTES,
    MAX_ENV_BYTES,
    MAX_ENV_ENTRIES,
    MAX_GRACE_S,
    MAX_JOB_GPUS,
    MAX_SCRIPT_BYTES,
    MAX_SHORT,
    MAX_TOKEN_LIFETIME_S,
    MAX_WALLTIME_S,
    Arg,
    ArraySpec,
    Count,
    EnvName,
    Flavor,
    Label,
    Name,
    QueueName,
    Quota,
    Script,
    Seconds,
    Short,
    Text,
    UserName,
    Weight,
    Workdir,
    utf8_len,
)
from railyard.control.tables import JobState
from railyard.sched.model import Level, NodeState, PriorityClass, TopologyMode

if TYPE_CHECKING:
    from railyard.control.tables import JobRow

MAX_ARRAY_TASKS = 10_000
DEFAULT_SIGNAL_GRACE_S = 60.0  # Slurm's default sig_time for --signal
TIME_FORMATS = "MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS (e.g. 90, 2:00:00, 1-12)"

_TIME_RE = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$")
_SIGNAL_RE = re.compile(r"^(?:([RB]):)?([A-Za-z0-9]+)(?:@(\d+))?$")
_ARRAY_PART_RE = re.compile(r"^(\d+)(?:-(\d+)(?::(\d+))?)?$")


def parse_walltime(value: str | int) -> float | None:
    """Slurm ``--time`` spellings to seconds; ``0``/``UNLIMITED`` mean no limit (None)."""
    text = str(value).strip()
    if text.lower() in ("unlimited", "infinite"):
        return None
    match = _TIME_RE.match(text) if len(text) <= MAX_SHORT else None
    if not match:
        raise ValueError(f"bad time {text[:MAX_SHORT]!r} (hint: use {TIME_FORMATS})")
    days, a, b, c = (int(g) if g is not None else None for g in match.groups())
    if days is not None:  # D-HH[:MM[:SS]]
        seconds = days * 86400 + (a or 0) * 3600 + (b or 0) * 60 + (c or 0)
    elif c is not None:  # HH:MM:SS
        seconds = (a or 0) * 3600 + (b or 0) * 60 + c
    elif b is not None:  # MM:SS
        seconds = (a or 0) * 60 + b
    else:  # MM
        seconds = (a or 0) * 60
    if seconds > MAX_WALLTIME_S:
        raise ValueError(f"time {text!r} is over {MAX_WALLTIME_S / 86400:.0f} days")
    return float(seconds) if seconds else None


def parse_signal(value: str) -> tuple[str, float]:
    """``[B:]USR1@60`` (Slurm ``--signal``) to ``("SIGUSR1", 60.0)``; ``B:``/``R:`` are
    accepted: railyard always signals every rank's process group."""
    match = _SIGNAL_RE.match(value.strip()) if len(value) <= MAX_SHORT else None
    if not match:
        raise ValueError(f"bad signal {value!r} (hint: use [B:]NAME[@SECONDS], e.g. USR1@60)")
    _, sig, at = match.groups()
    if at is not None and int(at) > MAX_GRACE_S:
        raise ValueError(f"signal time @{at} is over {MAX_GRACE_S:.0f} seconds")
    if sig.isdigit():
        try:
            name = signals.Signals(int(sig)).name
        except (ValueError, OverflowError):
            raise ValueError(f"unknown signal number {sig}") from None
    else:
        name = sig.upper() if sig.upper().startswith("SIG") else f"SIG{sig.upper()}"
        if name not in signals.Signals.__members__:
            raise ValueError(f"unknown signal {sig!r} (hint: e.g. USR1, USR2, TERM, INT)")
    return name, float(at) if at is not None else DEFAULT_SIGNAL_GRACE_S


def parse_array(value: str) -> tuple[list[int], int | None]:
    """Slurm ``--array``: ``0-9``, ``1,3,5``, ``0-15:4``, each with an optional ``%N`` limit
    on tasks running at once."""
    text, _, limit = value.strip().partition("%")
    hint = "(hint: e.g. 0-9, 1,3,5, 0-15:4 or 0-9%2)"
    if len(value) > MAX_ARRAY_SPEC:
        raise ValueError(f"array spec is over {MAX_ARRAY_SPEC} characters {hint}")
    indices: set[int] = set()
    for part in text.split(","):
        match = _ARRAY_PART_RE.match(part.strip())
        if not match:
            raise ValueError(f"bad array {value!r} {hint}")
        first, last, step = (int(g) if g is not None else None for g in match.groups())
        assert first is not None
        last = first if last is None else last
        if max(first, last, step or 0) > INT32_MAX:
            raise ValueError(f"array index {part!r} is over {INT32_MAX}")
        if last < first or step == 0:
            raise ValueError(f"bad array range {part!r} {hint}")
        if last - first >= MAX_ARRAY_TASKS * (step or 1):
            raise ValueError(f"array {value!r} has more than {MAX_ARRAY_TASKS} tasks")
        indices.update(range(first, last + 1, step or 1))
    if len(indices) > MAX_ARRAY_TASKS:
        raise ValueError(f"array {value!r} has more than {MAX_ARRAY_TASKS} tasks")
    if limit and (not limit.isdigit() or not 1 <= int(limit) <= INT32_MAX):
        raise ValueError(f"bad array limit %{limit} {hint}")
    return sorted(indices), int(limit) if limit else None


def parse_priority(value: int | str) -> int:
    """An int, or a class name (low|normal|high|critical), as Slurm QOS names are used."""
    if isinstance(value, int):
        if not 0 <= value <= INT32_MAX:
            raise ValueError(f"priority must be 0..{INT32_MAX}")
        return value
    text = value.strip()
    if text.isdigit():
        return parse_priority(int(text))
    try:
        return PriorityClass[text.upper()].value
    except KeyError:
        names = "|".join(c.name.lower() for c in PriorityClass)
        raise ValueError(f"unknown priority {value!r} (hint: an integer or {names})") from None


def parse_topology(value: str) -> tuple[str, str]:
    """``leaf-group`` (required), ``required:leaf-group`` or ``preferred:scalable-unit``."""
    mode, _, level = value.strip().rpartition(":")
    mode = mode or TopologyMode.REQUIRED.value
    levels = [lv.label for lv in Level if lv is not Level.FABRIC]
    hint = f"(hint: [required:|preferred:]{'|'.join(levels)})"
    if mode not in [m.value for m in TopologyMode]:
        raise ValueError(f"unknown topology mode {mode!r} {hint}")
    if level not in levels:
        raise ValueError(f"unknown topology level {level!r} {hint}")
    return level, mode


class Request(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class Response(BaseModel):
    model_config = ConfigDict(extra="ignore")


class JobSubmit(Request):
    """One submission. GPU shape: ``gpus`` (one worker per GPU, torchrun-style), or ``nodes``
    with ``gpus_per_node``, or explicit ``workers`` and ``gpus_per_worker``; default 1 GPU."""

    command: list[Arg] | None = Field(None, min_length=1, max_length=MAX_COMMAND_ARGS)
    script: Script | None = None
    name: Name = ""
    queue: QueueName = "default"
    gpus: Count | None = None
    nodes: Count | None = None
    gpus_per_node: Count | None = None
    workers: Count | None = None
    gpus_per_worker: Count | None = None
    flavor: Flavor | None = None
    priority: int | Short | None = Field(
        None, description=f"0..{INT32_MAX}, or low|normal|high|critical"
    )
    time: Short | int | None = None
    preemptible: bool = False
    array: ArraySpec | None = None
    env: dict[EnvName, Text] = Field(default_factory=dict, max_length=MAX_ENV_ENTRIES)
    workdir: Workdir = Field(
        "", description="an existing absolute directory on the node ('' for the default)"
    )
    topology: Short | None = None
    checkpoint_grace_s: float | None = Field(None, ge=0, le=MAX_GRACE_S)
    min_runtime_s: Seconds = 0.0
    signal: Short | None = None
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
        workers, per_worker = self.shape()  # raises on a contradictory shape
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
    state: JobState
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
    exit_signal: str | None = Field(None, description="the signal that ended it (Slurm's 0:9)")
    outcome: str | None

    @classmethod
    def from_row(cls, row: JobRow, user: str, now_t_s: float) -> JobOut:
        topology = f"{row.topology_mode}:{row.topology_level}" if row.topology_level else None
        elapsed = None if row.start_t_s is None else (row.end_t_s or now_t_s) - row.start_t_s
        return cls(
            id=row.id,
            name=row.name,
            state=JobState(row.state),
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
            exit_signal=row.exit_signal,
            outcome=row.outcome,
        )


class LogChunk(Response):
    job_id: str
    rank: int
    text: str
    offset: int
    state: JobState
    finished: bool


class NodeOut(Response):
    name: str
    flavor: str
    gpus: int
    gpus_used: int
    state: NodeState
    reason: str
    path: list[str]


class NodeAction(Request):
    reason: Name = ""


class QueueCreate(Request):
    """A queue; quotas are whole GPUs per flavor (>= 0), ``weight`` its fair-share weight."""

    name: QueueName
    parent: QueueName | None = None
    nominal_gpus: Quota = Field(default_factory=dict)
    borrowing_limit_gpus: Quota = Field(default_factory=dict)
    lending_limit_gpus: Quota = Field(default_factory=dict)
    weight: Weight = 1.0


class QueueUpdate(Request):
    """Fields left out keep their value; ``"parent": null`` makes the queue a root. The same
    bounds as :class:`QueueCreate`."""

    parent: QueueName | None = None
    nominal_gpus: Quota | None = None
    borrowing_limit_gpus: Quota | None = None
    lending_limit_gpus: Quota | None = None
    weight: Weight | None = None


class QueueOut(Response):
    name: str
    parent: str | None
    nominal_gpus: dict[str, int]
    borrowing_limit_gpus: dict[str, int]
    lending_limit_gpus: dict[str, int]
    weight: float
    members: list[str]
    used_gpus: dict[str, int]
    borrowed_gpus: dict[str, int]
    usage_gpu_s: float
    pending_jobs: int
    running_jobs: int


class MemberChange(Request):
    user: UserName


class UserCreate(Request):
    name: UserName
    is_admin: bool = False


class UserOut(Response):
    id: int
    name: str
    is_admin: bool
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


class Health(Response):
    """``ok``, or ``failing`` (503) with the reason: the scheduler loop's last steps failed,
    or the store does not answer."""

    status: str = Field(json_schema_extra={"enum": ["ok", "failing"]})
    version: str
    reason: str | None = None
    last_step_t_s: Annotated[float | None, Field(description="end of the last good step")] = None
    failing_steps: int = 0


class ErrorOut(Response):
    """Every refusal: a one-line ``detail`` (the field, what is wrong, a hint) plus the field
    and the hint alone, when there are any."""

    detail: str
    field: str | None = None
    hint: str | None = None


_REQUEST_FIELDS = sorted(
    {f for m in Request.__subclasses__() for f in m.model_fields} | {"user", "token"}
)


def validation_line(errors: list[Any]) -> tuple[str, str | None]:
    """The first pydantic error as ``field: message (hint: ...)``, plus the field name."""
    if not errors:
        return "invalid request", None
    first = errors[0]
    where = first.get("loc", ())
    loc = [str(p) for p in where if p not in ("body", "query", "path")]
    if where and where[0] == "query":  # state=a&state=b: name the parameter, not its index
        loc = [p for p in loc if not p.isdigit()]
    field = ".".join(loc) or None
    msg = str(first.get("msg", "invalid")).removeprefix("Value error, ")
    kind = first.get("type")
    if kind == "enum" and loc:
        expected = str(first.get("ctx", {}).get("expected", "")).replace("'", "")
        msg = f"unknown {loc[-1]} {first.get('input')!r} (hint: one of {expected})"
    elif kind == "missing" and tuple(where) == ("body",):
        field, msg = None, "request body is missing (hint: send a JSON object)"
    elif kind == "extra_forbidden":
        close = difflib.get_close_matches(loc[-1] if loc else "", _REQUEST_FIELDS, n=1)
        msg = "unknown field" + (f" (hint: did you mean {close[0]!r}?)" if close else "")
    elif first.get("type") == "json_invalid":
        field, msg = None, "request body is not valid JSON"
    more = f" [+{len(errors) - 1} more]" if len(errors) > 1 else ""
    return (f"{field}: {msg}" if field else msg) + more, field
