"""Slurm-style values shared by the API, batch-script directives and CLI flags: walltime,
signal, array, priority, topology, memory and dependencies, so all three accept exactly the
same spellings.

Standard library only: the ``railyard`` command checks flags with these before it sends
anything, and must not pay for pydantic or the scheduler to do so (importing ``railyard.sched``
costs more than the rest of a CLI call). So the scheduler's names are spelled here too;
``tests/control/test_scripts.py`` checks they are the scheduler's.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from railyard.client.bounds import (
    INT32_MAX,
    MAX_ARRAY_SPEC,
    MAX_GRACE_S,
    MAX_SHORT,
    MAX_WALLTIME_S,
)

MAX_ARRAY_TASKS = 10_000
MAX_HOSTLIST = 4096  # names one --nodelist/--exclude may expand to
MAX_HOSTLIST_TEXT = 4096
DEFAULT_SIGNAL_GRACE_S = 60.0  # Slurm's default sig_time for --signal
TIME_FORMATS = "MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS (e.g. 90, 2:00:00, 1-12)"

# railyard.sched.model: PriorityClass (name -> value), Level labels below the fabric, TopologyMode
PRIORITY_CLASSES = {"low": 100, "normal": 500, "high": 1000, "critical": 10_000}
TOPOLOGY_LEVELS = ("node", "leaf-group", "scalable-unit")
TOPOLOGY_MODES = ("required", "preferred")  # the first is the default

_TIME_RE = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$")
_SIGNAL_RE = re.compile(r"^(?:([RB]):)?([A-Za-z0-9]+)(?:@(\d+))?$")
_ARRAY_PART_RE = re.compile(r"^(\d+)(?:-(\d+)(?::(\d+))?)?$")
_MEM_RE = re.compile(r"^(\d+)([KMGT]?)B?$", re.IGNORECASE)
_MEM_MIB = {"K": 1 / 1024, "": 1, "M": 1, "G": 1024, "T": 1024 * 1024}
DEPENDENCY_TYPES = ("after", "afterany", "afternotok", "afterok", "aftercorr")  # sched's
_DEP_ID_RE = re.compile(r"^\d+(?:_\d+)?$")


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


def parse_time_change(value: str | int) -> tuple[int, float | None]:
    """``scontrol update TimeLimit=``: a limit (sign 0), or ``+T``/``-T`` to add to or take
    from the limit a job has (sign 1 or -1, with T's seconds)."""
    text = str(value).strip()
    sign = {"+": 1, "-": -1}.get(text[:1], 0)
    seconds = parse_walltime(text[1:] if sign else text)
    if sign and seconds is None:
        raise ValueError(f"bad time change {text!r} (hint: +MM or -HH:MM:SS, e.g. +30)")
    return sign, seconds


def whole_minutes(value: str) -> str:
    """sbatch's ``--time`` as Slurm keeps it: whole minutes, a spelling with seconds rounded
    up (``1:30`` is 2 minutes, ``0:02:00``). Returns ``[D-]H:MM:00``, or ``UNLIMITED``/``0``
    as given; a change (``+90``) keeps its sign. The CLI sends this; the API takes any
    spelling to the second."""
    text = value.strip()
    if text.startswith(("+", "-")):  # scontrol's change of a limit: its amount so rounded
        parse_time_change(text)  # a change of nothing is refused
        return text[0] + whole_minutes(text[1:])
    seconds = parse_walltime(text)
    if seconds is None:
        return text
    days, minutes = divmod(-(-int(seconds) // 60), 1440)
    clock = f"{minutes // 60}:{minutes % 60:02}:00"
    return f"{days}-{minutes // 60:02}:{minutes % 60:02}:00" if days else clock


def parse_signal(value: str) -> tuple[str, float]:
    """``[B:]USR1@60`` (Slurm ``--signal``) to ``("SIGUSR1", 60.0)``; ``B:``/``R:`` are
    accepted: railyard always signals every rank's process group."""
    match = _SIGNAL_RE.match(value.strip()) if len(value) <= MAX_SHORT else None
    if not match:
        raise ValueError(f"bad signal {value!r} (hint: use [B:]NAME[@SECONDS], e.g. USR1@60)")
    import signal as signals  # its enums cost every `railyard submit`; only --signal pays

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


_ARRAY_HINT = "(hint: e.g. 0-9, 1,3,5, 0-15:4 or 0-9%2)"


def _array_ranges(value: str) -> Iterator[tuple[int, int, int]]:
    """Each part of an ``--array`` spec (the ``%N`` left out) as (first, last, step), in
    turn; a ValueError naming the spec for a part that is no range."""
    for part in value.strip().partition("%")[0].split(","):
        match = _ARRAY_PART_RE.match(part.strip())
        if not match:
            raise ValueError(f"bad array {value!r} {_ARRAY_HINT}")
        first, last, step = (int(g) if g is not None else None for g in match.groups())
        assert first is not None
        last = first if last is None else last
        if max(first, last, step or 0) > INT32_MAX:
            raise ValueError(f"array index {part!r} is over {INT32_MAX}")
        if last < first or step == 0:
            raise ValueError(f"bad array range {part!r} {_ARRAY_HINT}")
        yield first, last, step or 1


def parse_array(value: str) -> tuple[list[int], int | None]:
    """Slurm ``--array``: ``0-9``, ``1,3,5``, ``0-15:4``, each with an optional ``%N`` limit
    on tasks running at once."""
    limit = value.strip().partition("%")[2]
    if len(value) > MAX_ARRAY_SPEC:
        raise ValueError(f"array spec is over {MAX_ARRAY_SPEC} characters {_ARRAY_HINT}")
    indices: set[int] = set()
    for first, last, step in _array_ranges(value):
        if last - first >= MAX_ARRAY_TASKS * step:
            raise ValueError(f"array {value!r} has more than {MAX_ARRAY_TASKS} tasks")
        indices.update(range(first, last + 1, step))
    if len(indices) > MAX_ARRAY_TASKS:
        raise ValueError(f"array {value!r} has more than {MAX_ARRAY_TASKS} tasks")
    if limit and (not limit.isdigit() or not 1 <= int(limit) <= INT32_MAX):
        raise ValueError(f"bad array limit %{limit} {_ARRAY_HINT}")
    return sorted(indices), int(limit) if limit else None


def array_task_count(value: object) -> int:
    """How many tasks an ``--array`` spec asks for, counted without listing them (each part's
    range; parts that overlap count twice), 1 for no array or one ``parse_array`` will refuse:
    a bound on a whole request checks it before any spec is expanded."""
    if not isinstance(value, str) or len(value) > MAX_ARRAY_SPEC:
        return 1
    try:
        return sum((last - first) // step + 1 for first, last, step in _array_ranges(value))
    except ValueError:
        return 1


def array_stats(value: str) -> tuple[int, int, int, int]:
    """(count, min, max, step) of an ``--array`` spec, as sbatch sets SLURM_ARRAY_TASK_*:
    the step of a single ``first-last:step`` range, else 1."""
    indices, _ = parse_array(value)
    parts = value.partition("%")[0].split(",")
    step = 1
    if len(parts) == 1:
        match = _ARRAY_PART_RE.match(parts[0].strip())
        if match and match.group(3):
            step = int(match.group(3))
    return len(indices), min(indices), max(indices), step


def parse_priority(value: int | str) -> int:
    """An int, or a class name (low|normal|high|critical), as Slurm QOS names are used."""
    if isinstance(value, int):
        if not 0 <= value <= INT32_MAX:
            raise ValueError(f"priority must be 0..{INT32_MAX}")
        return value
    text = value.strip()
    if text.isdigit():
        return parse_priority(int(text))
    if text.lower() not in PRIORITY_CLASSES:
        names = "|".join(PRIORITY_CLASSES)
        raise ValueError(f"unknown priority {value!r} (hint: an integer or {names})")
    return PRIORITY_CLASSES[text.lower()]


def qos_of(priority: int | None, nice: int | None = 0) -> str:
    """The QOS a stored priority (its class less the job's ``nice``) is shown as
    (``SLURM_JOB_QOS``, squeue's ``%q``, sacct's QOS): --qos names a priority class here; a
    job of another priority is Slurm's "normal"."""
    given = (priority or 0) + (nice or 0)  # a row not yet flushed has neither
    return next((n for n, v in PRIORITY_CLASSES.items() if v == given), "normal")


def priority_label(value: int) -> str:
    """How a priority is named in a refusal: ``'normal' (500)`` for a class, else the number."""
    names = [n for n, v in PRIORITY_CLASSES.items() if v == value]
    return f"'{names[0]}' ({value})" if names else str(value)


def parse_nice(value: int | str) -> int:
    """Slurm's ``--nice`` adjustment: an integer, negative only for admins (checked at submit)."""
    text = str(value).strip()
    try:
        out = int(text)
    except ValueError:
        raise ValueError(f"bad nice {text[:MAX_SHORT]!r} (hint: an integer, e.g. 100)") from None
    if not -INT32_MAX <= out <= INT32_MAX:
        raise ValueError(f"nice must be -{INT32_MAX}..{INT32_MAX}")
    return out


def parse_topology(value: str) -> tuple[str, str]:
    """``leaf-group`` (required), ``required:leaf-group`` or ``preferred:scalable-unit``."""
    mode, _, level = value.strip().rpartition(":")
    mode = mode or TOPOLOGY_MODES[0]
    hint = f"(hint: [required:|preferred:]{'|'.join(TOPOLOGY_LEVELS)})"
    if mode not in TOPOLOGY_MODES:
        raise ValueError(f"unknown topology mode {mode!r} {hint}")
    if level not in TOPOLOGY_LEVELS:
        raise ValueError(f"unknown topology level {level!r} {hint}")
    return level, mode


def parse_mem(value: str | int) -> int:
    """Slurm ``--mem`` to MiB: a number with an optional unit K, M (the default), G or T."""
    match = _MEM_RE.match(str(value).strip())
    if not match:
        raise ValueError(f"bad memory size {value!r} (hint: e.g. 16G, 512M, 64000)")
    number, unit = int(match.group(1)), match.group(2).upper()
    return max(1, round(number * _MEM_MIB[unit])) if number else 0


def parse_dependency(value: str) -> str:
    """Slurm ``--dependency``: ``TYPE:ID[:ID...]`` terms joined by ``,`` (all) or ``?`` (any),
    or ``singleton``. Returns the value, checked with the scheduler's own rules (the client
    checks the spelling; `railyard.sched.dependencies` holds what each type means)."""
    text = value.strip()
    hint = "(hint: e.g. afterok:12, afterany:12:13, afternotok:12_3, aftercorr:12, singleton)"
    if "," in text and "?" in text:
        raise ValueError(f"bad dependency {value!r}: use ',' (all) or '?' (any), not both {hint}")
    for term in re.split(r"[,?]", text):
        kind, _, ids = term.partition(":")
        if kind == "singleton" and not ids:
            continue
        if kind == "afterburstbuffer":
            raise ValueError(f"dependency type {kind!r} is not supported {hint}")
        if kind not in DEPENDENCY_TYPES:
            raise ValueError(f"unknown dependency type {kind!r} in {value!r} {hint}")
        parts = ids.split(":") if ids else []
        if kind == "after":  # after:ID+MINUTES: that long after ID started (or was cancelled)
            parts = [p.partition("+")[0] if p.partition("+")[2].isdigit() else p for p in parts]
        elif any("+" in p for p in parts):
            raise ValueError(f"'+MINUTES' goes with after: only, in {value!r} {hint}")
        if not parts or not all(_DEP_ID_RE.match(p) for p in parts):
            raise ValueError(f"bad job ids {ids!r} in dependency {value!r} {hint}")
    return text


_HOST_NAME_RE = re.compile(r"[A-Za-z0-9_.-]+")


def parse_hostlist(value: str) -> list[str]:
    """Slurm's hostlist (``--nodelist``, ``--exclude``): names and ranges joined by commas,
    ``gpu[01-04,07],login1``; zero padding as written (``client.hostlists``, the one parser,
    ``SLURM_JOB_NODELIST``'s too). Returns the names, each once, in order. ValueError: one
    line with a hint."""
    from railyard.client.hostlists import expand_hostlist  # only where a list is given

    text = value.strip()
    hint = "(hint: e.g. gpu[01-04,07],login1)"
    if not text or len(text) > MAX_HOSTLIST_TEXT:
        raise ValueError(f"bad node list {text[:MAX_SHORT]!r} {hint}")
    try:
        names = list(dict.fromkeys(expand_hostlist(text, MAX_HOSTLIST)))
    except ValueError as exc:
        raise ValueError(f"{exc} {hint}") from None
    bad = next((name for name in names if not _HOST_NAME_RE.fullmatch(name)), None)
    if bad is not None:
        raise ValueError(f"bad node name {bad[:MAX_SHORT]!r} in {text[:MAX_SHORT]!r} {hint}")
    return names


_FEATURE_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


def parse_constraint(value: str) -> list[frozenset[str]]:
    """sbatch's ``--constraint``: node features joined by ``&`` (or ``,``: all of them) and
    ``|`` (any side), ``&`` first: ``ib&nvme|a100``. Returns the alternatives, each the set a
    node must have. Slurm's brackets and counts (``[a|b]``, ``a*2``) are refused with a hint."""
    text = value.strip()
    hint = "(hint: features joined by & and |, e.g. ib&nvme or h100|a100)"
    if any(c in text for c in "[]()*!") or len(text) > MAX_HOSTLIST_TEXT:
        raise ValueError(f"constraint {text[:MAX_SHORT]!r}: only & and | are supported {hint}")
    out = []
    for alternative in text.split("|"):
        names = re.split(r"[&,]", alternative)
        bad = [n for n in names if not _FEATURE_RE.match(n.strip())]
        if bad:
            raise ValueError(f"bad feature {bad[0].strip()!r} in {text[:MAX_SHORT]!r} {hint}")
        out.append(frozenset(n.strip() for n in names))
    return out
