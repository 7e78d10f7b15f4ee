"""Loaders for public GPU-cluster traces and railyard's own CSV, all into a `Workload`.

Formats (from their published schemas; users bring the files, nothing is downloaded):

- ``helios``: Helios / AcmeTrace job logs (S-Lab & InternLM), CSV with header; job_id, user,
  vc, gpu_num, node_num, state, submit_time, start_time, end_time, duration. Times are
  ``YYYY-MM-DD HH:MM:SS`` or seconds.
- ``philly``: Microsoft Philly ``cluster_job_log`` (msr-fiddle/philly-traces), a JSON list of
  {jobid, user, vc, status, submitted_time, attempts: [{start_time, end_time,
  detail: [{ip, gpus}]}]}. Run time is first attempt start to last attempt end.
- ``pai``: Alibaba PAI 2020 ``pai_job_table`` + ``pai_task_table`` CSVs (alibaba/clusterdata,
  headerless as released, or with a header). GPUs = ceil(sum of inst_num x plan_gpu / 100):
  fractional-GPU tasks take whole GPUs here.
- ``gavel``: the trace files of Gavel (Narayanan et al., OSDI 2020): the seven-field
  Philly-derived per-VC traces or the ten-field layout, run times from Gavel's published V100
  throughput table (`railyard.sim.gavel`, which says where it assumes).
- ``railyard``: id, submit_s, gpus, runtime_s[, queue, user, priority, walltime_s,
  preemptible, state, cpus, mem_gb, interactive, active_s, pool, image, deadline_s] (cpus
  and mem_gb for the whole job; ``interactive`` true for a session, a shell or a notebook,
  whose user works in it for ``active_s`` and then leaves it open until ``runtime_s``, unless
  its queue's idle limit ends it first; ``pool`` the blueprint's node pool it runs on;
  ``image`` the container image it runs in, pulled at a cold start, see ``sim.images``;
  ``deadline_s`` sbatch's ``--deadline`` in the trace's seconds: a job that could no longer
  end by then leaves the queue unrun, state ``deadline``).

Jobs that never ran, never ended or use no GPU are skipped and counted by reason; anything
malformed raises `TraceError` naming file, line and field, with a hint.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from railyard.sim import gavel
from railyard.sim.workload import FinalState, TraceJob, Workload

FORMATS = ("gavel", "helios", "philly", "pai", "railyard")

PAI_JOB_COLUMNS = ("job_name", "inst_id", "user", "status", "start_time", "end_time")
PAI_TASK_COLUMNS = (
    "job_name", "task_name", "inst_num", "status", "start_time", "end_time",
    "plan_cpu", "plan_mem", "plan_gpu", "gpu_type",
)  # fmt: skip

_HELIOS_STATES = {
    "COMPLETED": FinalState.COMPLETED,
    "CANCELLED": FinalState.CANCELLED,
    "FAILED": FinalState.FAILED,
    "TIMEOUT": FinalState.FAILED,
    "NODE_FAIL": FinalState.FAILED,
    "OUT_OF_MEMORY": FinalState.FAILED,
}
_PHILLY_STATES = {"Pass": FinalState.COMPLETED, "Killed": FinalState.CANCELLED}
_PAI_STATES = {"Terminated": FinalState.COMPLETED, "Failed": FinalState.FAILED}


class TraceError(ValueError):
    """Bad trace input: ``file:line: field: problem (hint: ...)``."""

    def __init__(self, file: str | Path, line: int, field: str, problem: str, hint: str) -> None:
        self.file, self.line, self.field = str(file), line, field
        super().__init__(f"{file}:{line}: {field}: {problem} (hint: {hint})")


def load_trace(path: str | Path, fmt: str) -> Workload:
    """Load `path` in format `fmt` (one of `FORMATS`)."""
    loaders: dict[str, Callable[[Path], Workload]] = {
        "gavel": load_gavel,
        "helios": load_helios,
        "philly": load_philly,
        "pai": load_pai,
        "railyard": load_railyard,
    }
    if fmt not in loaders:
        raise TraceError(path, 0, "format", f"unknown format {fmt!r}", f"use one of {FORMATS}")
    p = Path(path)
    if not p.exists():
        raise TraceError(p, 0, "file", "no such file", "check the path")
    return loaders[fmt](p)


# -- parsing helpers -------------------------------------------------------------------------


class _Row:
    """One CSV row with its file and line, so every conversion error can say where it is."""

    def __init__(self, file: Path, line: int, data: dict[str, str]) -> None:
        self.file, self.line, self.data = file, line, data

    def raw(self, name: str) -> str:
        return (self.data.get(name) or "").strip()

    def fail(self, name: str, problem: str, hint: str) -> TraceError:
        return TraceError(self.file, self.line, name, problem, hint)

    def number(self, name: str, *, default: float | None = None) -> float:
        text = self.raw(name)
        if not text:
            if default is not None:
                return default
            raise self.fail(name, "missing value", "every row needs it")
        try:
            value = float(text)
        except ValueError:
            raise self.fail(name, f"not a number: {text!r}", "use digits, e.g. 3600") from None
        if not math.isfinite(value) or value < 0:
            raise self.fail(name, f"must be a finite number >= 0, got {text!r}", "fix the row")
        return value

    def time_s(self, name: str) -> float | None:
        """Seconds, from a number or a ``YYYY-MM-DD HH:MM:SS`` timestamp; None if empty."""
        return _time_s(self.raw(name), lambda p, h: self.fail(name, p, h))


def _time_s(text: str, fail: Callable[[str, str], TraceError]) -> float | None:
    if text in ("", "None", "null", "nan", "NaN"):
        return None
    try:
        return float(text)
    except ValueError:
        pass
    try:
        stamp = datetime.fromisoformat(text)
        return (stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)).timestamp()
    except ValueError:
        raise fail(f"not a time: {text!r}", "use seconds or YYYY-MM-DD HH:MM:SS") from None


def _csv_rows(
    path: Path, required: tuple[str, ...], columns: tuple[str, ...] = ()
) -> Iterator[_Row]:
    """Rows of a CSV with a header; headerless files are read with `columns` if given."""
    with path.open(newline="", encoding="utf-8") as fh:
        reader = csv.reader(fh)
        try:
            first = next(reader)
        except StopIteration:
            return
        header = [c.strip() for c in first]
        if columns and not set(required) <= set(header):
            header = list(columns)
            yield from _rows_from(path, reader, header, first_row=first)
            return
        missing = [c for c in required if c not in header]
        if missing:
            raise TraceError(
                path, 1, missing[0], "missing column", f"the header needs {', '.join(required)}"
            )
        yield from _rows_from(path, reader, header, first_row=None)


def _rows_from(
    path: Path, reader: Any, header: list[str], first_row: list[str] | None
) -> Iterator[_Row]:
    if first_row is not None:
        yield _checked(path, 1, header, first_row)
    for values in reader:
        if values:
            yield _checked(path, reader.line_num, header, values)


def _checked(path: Path, line: int, header: list[str], values: list[str]) -> _Row:
    if len(values) != len(header):
        raise TraceError(
            path, line, "row", f"{len(values)} fields, header has {len(header)}", "check commas"
        )
    return _Row(path, line, dict(zip(header, values, strict=True)))


def _skip(skipped: dict[str, int], why: str) -> None:
    skipped[why] = skipped.get(why, 0) + 1


# -- the formats -----------------------------------------------------------------------------


def load_railyard(path: Path) -> Workload:
    jobs: list[TraceJob] = []
    seen: set[str] = set()
    for row in _csv_rows(path, ("id", "submit_s", "gpus", "runtime_s")):
        job_id = row.raw("id")
        if not job_id:
            raise row.fail("id", "missing value", "every job needs an id")
        if job_id in seen:
            raise row.fail("id", f"duplicate id {job_id!r}", "ids must be unique")
        seen.add(job_id)
        gpus = row.number("gpus")
        if gpus < 1 or gpus != int(gpus):
            raise row.fail(
                "gpus", f"must be a whole number >= 1, got {row.raw('gpus')!r}", "e.g. 8"
            )
        wall = row.raw("walltime_s")
        preempt = row.raw("preemptible").lower()
        if preempt not in _BOOLEANS:
            raise row.fail("preemptible", f"not a boolean: {preempt!r}", "use true or false")
        interactive = row.raw("interactive").lower()
        if interactive not in _BOOLEANS:
            raise row.fail("interactive", f"not a boolean: {interactive!r}", "use true or false")
        active = row.raw("active_s")
        active_s = row.number("active_s") if active else None
        if active_s is not None and not 0 <= active_s < math.inf:
            raise row.fail("active_s", f"must be seconds >= 0, got {active!r}", "e.g. 1800")
        if active_s is not None and interactive not in ("true", "1", "yes"):
            raise row.fail("active_s", "only a session has one", "set interactive to true")
        state = row.raw("state").lower() or "completed"
        if state not in {s.value for s in FinalState}:
            raise row.fail("state", f"unknown state {state!r}", "completed, failed or cancelled")
        priority = row.number("priority", default=0.0)
        cpus = row.number("cpus", default=0.0)
        if cpus != int(cpus):
            raise row.fail("cpus", f"must be a whole number, got {row.raw('cpus')!r}", "e.g. 16")
        mem_gb = row.number("mem_gb", default=0.0)
        deadline = row.raw("deadline_s")
        deadline_s = row.number("deadline_s") if deadline else None
        if deadline_s is not None and not row.number("submit_s") < deadline_s < math.inf:
            raise row.fail("deadline_s", f"must be after submit_s, got {deadline!r}",
                           "seconds from the trace's start, as submit_s")  # fmt: skip
        jobs.append(
            TraceJob(
                id=job_id,
                submit_s=row.number("submit_s"),
                gpus=int(gpus),
                runtime_s=row.number("runtime_s"),
                queue=row.raw("queue") or "default",
                user=row.raw("user") or "default",
                priority=int(priority),
                walltime_s=row.number("walltime_s") if wall else None,
                preemptible=preempt in ("true", "1", "yes"),
                state=FinalState(state),
                cpus=int(cpus),
                mem_gb=mem_gb,
                interactive=interactive in ("true", "1", "yes"),
                active_s=active_s,
                pool=row.raw("pool") or None,
                image=row.raw("image") or None,
                deadline_s=deadline_s,
            )
        )
    return Workload.of(path.stem, jobs)


_BOOLEANS = frozenset(("", "true", "false", "1", "0", "yes", "no"))


def load_helios(path: Path) -> Workload:
    jobs: list[TraceJob] = []
    skipped: dict[str, int] = {}
    for row in _csv_rows(path, ("gpu_num", "state", "submit_time")):
        gpus = row.number("gpu_num")
        if gpus == 0:
            _skip(skipped, "no GPU")
            continue
        state = _HELIOS_STATES.get(row.raw("state").upper())
        if state is None:
            _skip(skipped, "not finished")
            continue
        submit = row.time_s("submit_time")
        if submit is None:
            raise row.fail("submit_time", "missing value", "every job needs a submit time")
        if row.raw("duration"):
            runtime = row.number("duration")
        else:
            start, end = row.time_s("start_time"), row.time_s("end_time")
            if start is None or end is None:
                _skip(skipped, "never ran")
                continue
            runtime = max(0.0, end - start)
        jobs.append(
            TraceJob(
                id=row.raw("job_id") or f"line{row.line}",
                submit_s=submit,
                gpus=math.ceil(gpus),
                runtime_s=runtime,
                queue=row.raw("vc") or "default",
                user=row.raw("user") or "default",
                state=state,
            )
        )
    return Workload.of(path.stem, jobs, skipped)


def load_philly(path: Path) -> Workload:
    text = path.read_text(encoding="utf-8")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TraceError(
            path, exc.lineno, "json", exc.msg, "the file must be a JSON list"
        ) from None
    if not isinstance(data, list):
        raise TraceError(path, 1, "json", "top level is not a list", "a list of job objects")
    jobs: list[TraceJob] = []
    skipped: dict[str, int] = {}
    for k, entry in enumerate(data):
        job_id = str(entry.get("jobid", "")) if isinstance(entry, dict) else ""
        line = text.count("\n", 0, max(0, text.find(job_id))) + 1 if job_id else 1

        def fail(field: str, problem: str, hint: str, line: int = line) -> TraceError:
            return TraceError(path, line, field, problem, hint)

        if not isinstance(entry, dict) or not job_id:
            raise fail("jobid", f"job #{k} has no jobid", "each entry needs one")
        status = entry.get("status")
        if status == "Failed":
            state = FinalState.FAILED
        elif status in _PHILLY_STATES:
            state = _PHILLY_STATES[status]
        else:
            _skip(skipped, "not finished")
            continue
        attempts = entry.get("attempts")
        if not isinstance(attempts, list):
            raise fail("attempts", f"job {job_id}: not a list", "use [] for no attempts")
        spans: list[tuple[float, float]] = []
        gpus = 0
        for a in attempts:
            start = _time_s(str(a.get("start_time")), lambda p, h: fail("start_time", p, h))
            end = _time_s(str(a.get("end_time")), lambda p, h: fail("end_time", p, h))
            detail = a.get("detail") or []
            try:
                gpus = max(gpus, sum(len(d["gpus"]) for d in detail))
            except (KeyError, TypeError):
                raise fail(
                    "detail", f"job {job_id}: bad detail", '[{"ip": ..., "gpus": [...]}]'
                ) from None
            if start is not None and end is not None:
                spans.append((start, end))
        submit = _time_s(
            str(entry.get("submitted_time")), lambda p, h: fail("submitted_time", p, h)
        )
        if submit is None:
            raise fail("submitted_time", f"job {job_id}: missing", "every job needs one")
        if not spans or gpus == 0:
            _skip(skipped, "never ran" if not spans else "no GPU")
            continue
        jobs.append(
            TraceJob(
                id=job_id,
                submit_s=submit,
                gpus=gpus,
                runtime_s=max(0.0, spans[-1][1] - spans[0][0]),
                queue=str(entry.get("vc") or "default"),
                user=str(entry.get("user") or "default"),
                state=state,
            )
        )
    return Workload.of(path.stem, jobs, skipped)


def load_pai(path: Path) -> Workload:
    """`path` is the folder holding both tables, or the job table with the task table beside it."""
    job_path = path / "pai_job_table.csv" if path.is_dir() else path
    task_path = job_path.with_name("pai_task_table.csv")
    for p in (job_path, task_path):
        if not p.exists():
            raise TraceError(
                p, 0, "file", "no such file", "PAI needs pai_job_table.csv and pai_task_table.csv"
            )
    gpus: dict[str, float] = {}
    spans: dict[str, tuple[float, float]] = {}
    for row in _csv_rows(task_path, PAI_TASK_COLUMNS, PAI_TASK_COLUMNS):
        name = row.raw("job_name")
        plan = row.number("plan_gpu", default=0.0)
        if plan <= 0:
            continue
        gpus[name] = gpus.get(name, 0.0) + row.number("inst_num") * plan / 100.0
        start, end = row.time_s("start_time"), row.time_s("end_time")
        if start is not None and end is not None:
            lo, hi = spans.get(name, (start, end))
            spans[name] = (min(lo, start), max(hi, end))
    jobs: list[TraceJob] = []
    skipped: dict[str, int] = {}
    for row in _csv_rows(job_path, PAI_JOB_COLUMNS, PAI_JOB_COLUMNS):
        name = row.raw("job_name")
        state = _PAI_STATES.get(row.raw("status"))
        if state is None:
            _skip(skipped, "not finished")
            continue
        if gpus.get(name, 0.0) <= 0:
            _skip(skipped, "no GPU")
            continue
        submit = row.time_s("start_time")
        end = row.time_s("end_time")
        if submit is None or end is None:
            _skip(skipped, "never ran")
            continue
        lo, hi = spans.get(name, (submit, end))
        jobs.append(
            TraceJob(
                id=name,
                submit_s=submit,
                gpus=math.ceil(gpus[name] - 1e-9),
                runtime_s=max(0.0, hi - lo),
                user=row.raw("user") or "default",
                state=state,
            )
        )
    return Workload.of(job_path.stem, jobs, skipped)


def load_gavel(path: Path) -> Workload:
    """Gavel's tab-separated trace, either layout (`railyard.sim.gavel`)."""

    def fail(line: int, field: str, problem: str, hint: str) -> TraceError:
        return TraceError(path, line, field, problem, hint)

    return gavel.load_gavel(path, fail)
