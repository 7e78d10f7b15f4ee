"""Job dependencies, Slurm's `--dependency`: when may a job start, given how others went?

`after:ID` (ID has started, or ended; `after:ID+MIN`: MIN minutes after that), `afterok:ID`
(ID completed), `afternotok:ID` (ID
failed, timed out, lost its node or was cancelled), `afterany:ID` (ID ended), `aftercorr:ID`
(an array task after the task of array ID with the same index completed; none there: it
holds) and `singleton` (no other job of the same name and user runs or was submitted before
it).
Dependencies joined by `,` must all hold; by `?`, any one (sbatch(1), "--dependency").
A dependency that can no longer hold (`afterok` on a failed job) keeps the job pending with
reason `DependencyNeverSatisfied`, as Slurm does unless told to kill it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import replace
from enum import Enum

from railyard.sched.model import Dependency, DependencyKind, Job, RunningJob, begins_again_t_s


class Verdict(Enum):
    HOLDS = "holds"
    WAITS = "waits"
    NEVER = "never"


PENDING, RUNNING = "pending", "running"
_ENDED_BADLY = frozenset({"failed", "timeout", "node_fail", "cancelled", "deadline"})
_PART = re.compile(r"^(after|afterok|afternotok|afterany|aftercorr):([0-9_+]+(?::[0-9_+]+)*)$")
_ID = re.compile(r"^([0-9_]+)(?:\+([0-9]{1,6}))?$")
HINT = "e.g. afterok:12, afterany:12:13, afterok:12?afterok:13, after:12+5, aftercorr:12, singleton"


def parse_dependency(text: str) -> tuple[tuple[Dependency, ...], bool]:
    """(dependencies, any_of) from Slurm's spelling; ValueError with a hint otherwise."""
    text = text.strip()
    if "," in text and "?" in text:
        raise ValueError(f"dependency {text!r} mixes ',' and '?' (hint: {HINT})")
    any_of = "?" in text
    out = []
    for part in filter(None, text.split("?" if any_of else ",")):
        if part == "singleton":
            out.append(Dependency(DependencyKind.SINGLETON))
            continue
        match = _PART.match(part)
        if match is None:
            raise ValueError(f"bad dependency {part!r} (hint: {HINT})")
        kind, ids = match.groups()
        terms = [_ID.match(i) for i in ids.split(":")]
        if any(t is None or (t.group(2) is not None and kind != "after") for t in terms):
            raise ValueError(f"bad dependency {part!r}: +MINUTES goes with after: (hint: {HINT})")
        named = tuple(t.group(1) for t in terms if t is not None)
        waits = tuple(60.0 * int(t.group(2) or 0) for t in terms if t is not None)
        delays = waits if any(waits) else ()
        out.append(Dependency(DependencyKind(kind), named, delays))
    if not out:
        raise ValueError(f"empty dependency (hint: {HINT})")
    return tuple(out), any_of


def job_ids(dependencies: Iterable[Dependency]) -> set[str]:
    return {i for d in dependencies for i in d.job_ids}


def named_ids(job: Job) -> set[str]:
    """The ids whose states `verdict` reads for `job`: those it names, and for `aftercorr`
    the task of each named array with its own index."""
    out = job_ids(job.dependencies)
    if job.array_index is not None:
        for d in job.dependencies:
            if d.kind is DependencyKind.AFTER_CORR:
                out.update(f"{i}_{job.array_index}" for i in d.job_ids)
    return out


def verdict(
    job: Job,
    states: Mapping[str, str],
    singletons: Mapping[tuple[str, str], tuple[float, str]],
    times: Mapping[str, float] | None = None,
    now_t_s: float = math.inf,
) -> Verdict:
    """Does `job` wait on its dependencies? `states` maps each job id it names to "pending",
    "running" or an end state; `singletons` maps (user, name) to the (submit time, id) of the
    earliest job of that user and name that is running or pending; `times` each named job's
    start (or its end, if it ended unstarted), which `after:ID+MIN` counts from."""
    if not job.dependencies:
        return Verdict.HOLDS
    verdicts = [_one(d, job, states, singletons, times or {}, now_t_s) for d in job.dependencies]
    if job.dependency_any:
        if Verdict.HOLDS in verdicts:
            return Verdict.HOLDS
        return Verdict.NEVER if all(v is Verdict.NEVER for v in verdicts) else Verdict.WAITS
    if Verdict.NEVER in verdicts:
        return Verdict.NEVER
    return Verdict.WAITS if Verdict.WAITS in verdicts else Verdict.HOLDS


def _one(
    d: Dependency,
    job: Job,
    states: Mapping[str, str],
    singletons: Mapping[tuple[str, str], tuple[float, str]],
    times: Mapping[str, float],
    now_t_s: float,
) -> Verdict:
    if d.kind is DependencyKind.SINGLETON:
        first = singletons.get((job.user, job.name))
        return Verdict.HOLDS if first is None or first[1] == job.id else Verdict.WAITS
    out = Verdict.HOLDS
    for i, other in enumerate(d.job_ids):
        state = states.get(other)
        if state is None:
            return Verdict.NEVER  # no such job (or long forgotten)
        kind = d.kind
        if kind is DependencyKind.AFTER_CORR:
            kind = DependencyKind.AFTER_OK
            if job.array_index is not None and "_" not in other:
                state = states.get(f"{other}_{job.array_index}")
                if state is None:
                    continue  # that array has no task of this index: nothing to wait for
        v = _against(kind, state)
        if v is Verdict.HOLDS and d.delays_s and now_t_s < _after_t_s(d, i, other, times):
            v = Verdict.WAITS  # after:ID+MIN: started, but not MIN minutes ago
        if v is Verdict.NEVER:
            return v
        if v is Verdict.WAITS:
            out = v
    return out


def _after_t_s(d: Dependency, i: int, other: str, times: Mapping[str, float]) -> float:
    """When `after:other+MIN` holds: MIN after `other` started (or ended unstarted); at once
    when that time is not known."""
    since = times.get(other)
    return -math.inf if since is None else since + d.delays_s[i]


def next_after_t_s(jobs: Iterable[Job], times: Mapping[str, float], now_t_s: float) -> float:
    """The first moment after now an `after:ID+MIN` of `jobs` comes due: a step then."""
    due = (
        _after_t_s(d, i, other, times)
        for j in jobs
        for d in j.dependencies
        if d.delays_s
        for i, other in enumerate(d.job_ids)
    )
    return min((t for t in due if t > now_t_s), default=math.inf)


def _against(kind: DependencyKind, state: str) -> Verdict:
    ended = state not in (PENDING, RUNNING)
    if kind is DependencyKind.AFTER:
        return Verdict.WAITS if state == PENDING else Verdict.HOLDS
    if not ended:
        return Verdict.WAITS
    if kind is DependencyKind.AFTER_ANY:
        return Verdict.HOLDS
    bad = state in _ENDED_BADLY
    if kind is DependencyKind.AFTER_OK:
        return Verdict.NEVER if bad else Verdict.HOLDS
    return Verdict.HOLDS if bad else Verdict.NEVER  # afternotok


def first_of_name(
    pending: Iterable[Job], running: Iterable[RunningJob]
) -> dict[tuple[str, str], tuple[float, str]]:
    """For `singleton`: per (user, name), the running job, else the earliest pending one."""
    out: dict[tuple[str, str], tuple[float, str]] = {}
    for r in running:
        if r.job.name:
            out[r.job.user, r.job.name] = (float("-inf"), r.id)
    for j in pending:
        key = (j.user, j.name)
        if j.name and (key not in out or (j.submit_t_s, j.id) < out[key]):
            out[key] = (j.submit_t_s, j.id)
    return out


def met_now(eligible: list[Job], now_t_s: float) -> tuple[list[Job], tuple[str, ...]]:
    """The eligible jobs with their met dependencies cleared and their begin time set to now,
    and those jobs' ids. Slurm clears a met dependency and sets the job's EligibleTime: it
    ages from then (`model.waiting_since_t_s`), not from a submission days before it could
    run, which would make it starving the moment its dependency ended."""
    met = tuple(j.id for j in eligible if j.dependencies)
    if not met:
        return eligible, met

    def cleared(j: Job) -> Job:
        begin_t_s = begins_again_t_s(j.begin_t_s, now_t_s)
        return replace(j, dependencies=(), dependency_any=False, begin_t_s=begin_t_s)

    return [cleared(j) if j.dependencies else j for j in eligible], met
