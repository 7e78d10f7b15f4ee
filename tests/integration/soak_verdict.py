"""The soak's verdict: every job settled exactly once, judged from three witnesses that do not
share a failure: the jobs' own mark files, the store's rows and events, and ``/proc``.

Each run of a rank leaves ``<job>.<attempt>.<rank>.<world>.<pid>.start`` when it begins and
the same name with ``.end`` when its command finished; two runs of one rank of one attempt
leave two files (their pids differ), so a double start cannot hide behind an overwrite.
Every check returns readable lines, one per violation: empty lists are a clean soak.
"""

from __future__ import annotations

import os
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, text

FINISHED = frozenset({"completed", "failed", "cancelled", "timeout", "node_fail"})
TRANSIENT = frozenset({"starting", "cancelling", "preempting"})
SHOWN = 8  # ids named in one violation line; the count is exact
DRAIN_GRACE_S = 5.0  # events carry the clock a request began at, not when it committed


def mark_command(marks_dir: Path, sleep_s: float) -> list[str]:
    """A job's command: a start mark, ``sleep_s`` of sleep, an end mark."""
    name = f"{marks_dir}/$RAILYARD_JOB_ID.$RAILYARD_RESTART_COUNT.$RANK.$WORLD_SIZE.$$"
    return ["sh", "-c", f': > "{name}.start"; sleep {sleep_s:.2f}; : > "{name}.end"']


@dataclass(frozen=True)
class Run:
    """One run of one rank of one attempt, read back from its marks."""

    job_id: str
    attempt: int
    rank: int
    world: int
    pid: int
    ended: bool


def read_marks(marks_dir: Path) -> list[Run]:
    names = {p.name for p in marks_dir.iterdir()} if marks_dir.exists() else set()
    runs = []
    for name in sorted(n for n in names if n.endswith(".start")):
        job_id, attempt, rank, world, pid = name.removesuffix(".start").split(".")
        ended = f"{name.removesuffix('.start')}.end" in names
        runs.append(Run(job_id, int(attempt), int(rank), int(world), int(pid), ended))
    return runs


def tagged_processes(tag: str) -> dict[int, str]:
    """pid -> job id of every live process whose environment carries ``SOAK_RUN=<tag>``."""
    needle = f"SOAK_RUN={tag}".encode()
    found: dict[int, str] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            environ = Path(entry.path, "environ").read_bytes().split(b"\0")
        except OSError:  # gone meanwhile, or a kernel thread
            continue
        if needle in environ:
            job = next((v for v in environ if v.startswith(b"RAILYARD_JOB_ID=")), b"=?")
            found[int(entry.name)] = job.split(b"=", 1)[1].decode()
    return found


@dataclass(frozen=True)
class StoreRows:
    """What the verdict reads from the store: each job's state, and its audit trail."""

    jobs: dict[str, tuple[str, int, float | None]]  # id -> (state, restart_count, end_t_s)
    events: dict[str, list[tuple[str, str, float]]]  # job id -> [(kind, message, t_s)] in order
    drains: list[tuple[float, bool]]  # (t_s, the node takes no new work from then)
    integrity: list[str]  # the store's own check: empty when clean


def read_store(database_url: str) -> StoreRows:
    engine = create_engine(database_url)
    try:
        with engine.connect() as conn:
            jobs = {
                i: (state, int(restarts), end)
                for i, state, restarts, end in conn.execute(
                    text("SELECT id, state, restart_count, end_t_s FROM jobs")
                )
            }
            events: dict[str, list[tuple[str, str, float]]] = defaultdict(list)
            for job_id, kind, message, t_s in conn.execute(text(
                "SELECT job_id, kind, message, t_s FROM events WHERE job_id IS NOT NULL "
                "ORDER BY id")):  # fmt: skip
                events[job_id].append((kind, message, t_s))
            drains = [(t_s, kind != "ready") for t_s, kind in conn.execute(text(
                "SELECT t_s, kind FROM events WHERE job_id IS NULL AND kind IN "
                "('draining', 'drained', 'ready') ORDER BY id"))]  # fmt: skip
            integrity: list[str] = []
            if engine.dialect.name == "sqlite":
                [[verdict]] = conn.execute(text("PRAGMA integrity_check")).all()
                if verdict != "ok":
                    integrity.append(f"integrity_check: {verdict}")
                integrity += [f"foreign key: {row}" for row in conn.execute(
                    text("PRAGMA foreign_key_check"))]  # fmt: skip
            else:  # what PostgreSQL's constraints do not say: rows pointing at nothing
                orphans = conn.execute(text(
                    "SELECT count(*) FROM jobs j LEFT JOIN users u ON u.id = j.user_id "
                    "WHERE u.id IS NULL")).scalar_one()  # fmt: skip
                if orphans:
                    integrity.append(f"{orphans} jobs of no user")
    finally:
        engine.dispose()
    return StoreRows(jobs, dict(events), drains, integrity)


def _terminal_of(kind: str, message: str) -> str | None:
    """The final state an event records, if it records one."""
    if kind in FINISHED:
        return kind
    if kind == "cancel" and message.endswith("-> cancelled"):
        return "cancelled"
    return None


def _line(what: str, ids: Iterable[str]) -> list[str]:
    ids = sorted(ids)
    if not ids:
        return []
    more = ", ..." if len(ids) > SHOWN else ""
    return [f"{len(ids)} {what}: {', '.join(ids[:SHOWN])}{more}"]


@dataclass
class Verdict:
    """The violations found; ``clean`` when there are none."""

    violations: list[str] = field(default_factory=list)
    ranks_run: int = 0
    attempts_rerun: int = 0

    @property
    def clean(self) -> bool:
        return not self.violations


def judge_store(rows: StoreRows) -> list[str]:
    """Every job settled, with an end time, and an audit trail that agrees with its state."""
    out = list(rows.integrity)
    unsettled = [f"{i} ({s})" for i, (s, _, _) in rows.jobs.items() if s not in FINISHED]
    out += _line("jobs not settled", unsettled)
    out += _line("settled jobs with no end time", [
        i for i, (s, _, end) in rows.jobs.items() if s in FINISHED and end is None])  # fmt: skip
    out += _line("events of jobs the store does not have", set(rows.events) - set(rows.jobs))
    submitted, disagree = [], []
    for job_id, (state, _, _) in rows.jobs.items():
        trail = rows.events.get(job_id, [])
        if sum(kind == "submitted" for kind, _, _ in trail) != 1:
            submitted.append(job_id)
        ends = [t for t in (_terminal_of(k, m) for k, m, _ in trail) if t is not None]
        if state in FINISHED and ends != [state]:
            disagree.append(f"{job_id} ({state}; events {ends})")
    out += _line("jobs without exactly one 'submitted' event", submitted)
    out += _line("jobs whose events disagree with their state", disagree)
    out += _line("jobs started while held", [j for j, t in rows.events.items() if _held_start(t)])
    late = [j for j, t in rows.events.items() if _drained_start(t, rows.drains)]
    out += _line(f"jobs started over {DRAIN_GRACE_S:.0f} s into a drain", late)
    return out


def _held_start(trail: list[tuple[str, str, float]]) -> bool:
    """A start between a hold and its release (the trail is in commit order per job: the
    hold's and the start's writes to the row are serialized)."""
    held = False
    for kind, _, _ in trail:
        if kind == "start" and held:
            return True
        held = kind == "hold" or (held and kind != "release")
    return False


def _drained_start(trail: list[tuple[str, str, float]], drains: list[tuple[float, bool]]) -> bool:
    """A start decided well after the node stopped taking work (a step that read the node
    before the drain may still start there: that race lasts one step, not seconds)."""
    for kind, _, t_s in trail:
        if kind != "start":
            continue
        closed_since = None  # when the node's current closed period began, if closed
        for d_t_s, closed in sorted(drains):  # clock order: a request's clock, not its commit
            if d_t_s > t_s:
                break
            closed_since = (closed_since or d_t_s) if closed else None
        if closed_since is not None and t_s - closed_since > DRAIN_GRACE_S:
            return True
    return False


def judge_runs(
    rows: StoreRows, runs: list[Run], expected_world: dict[str, int], verdict: Verdict
) -> None:
    """Each rank of each attempt ran at most once; a completed job ran every rank of its last
    attempt to the end; nothing ran that the store does not know or never started."""
    verdict.ranks_run = len(runs)
    per_rank = Counter((r.job_id, r.attempt, r.rank) for r in runs)
    twice = [f"{j} attempt {a} rank {r} x{n}" for (j, a, r), n in per_rank.items() if n > 1]
    verdict.violations += _line("ranks run twice in one attempt", twice)
    by_job: dict[str, list[Run]] = defaultdict(list)
    for run in runs:
        by_job[run.job_id].append(run)
    verdict.violations += _line(
        "jobs that ran but the store does not know", set(by_job) - set(rows.jobs)
    )
    late, unstarted, world, missing = [], [], [], []
    for job_id, (state, restarts, _) in rows.jobs.items():
        mine = by_job.get(job_id, [])
        starts = sum(kind == "start" for kind, _, _ in rows.events.get(job_id, []))
        attempts = {r.attempt for r in mine}
        verdict.attempts_rerun += max(0, len(attempts) - 1)
        if any(a > restarts for a in attempts):
            late.append(f"{job_id} (attempts {sorted(attempts)}, restart_count {restarts})")
        if len(attempts) > starts:
            unstarted.append(f"{job_id} ({len(attempts)} attempts ran, {starts} start events)")
        want = expected_world.get(job_id)
        if want is not None and any(r.world != want for r in mine):
            world.append(f"{job_id} (asked {want}, ran {sorted({r.world for r in mine})})")
        if state == "completed":
            last = [r for r in mine if r.attempt == restarts and r.ended]
            size = want if want is not None else max((r.world for r in last), default=1)
            if sorted(r.rank for r in last) != list(range(size)):
                missing.append(f"{job_id} (ranks ended {sorted(r.rank for r in last)} of {size})")
    verdict.violations += _line("jobs that ran an attempt past their restart count", late)
    verdict.violations += _line("jobs that ran more attempts than they were started", unstarted)
    verdict.violations += _line("jobs that ran a different number of ranks", world)
    verdict.violations += _line("completed jobs whose ranks did not all run to the end", missing)


def evidence(rows: StoreRows, violations: list[str], per_line: int = 3) -> dict[str, Any]:
    """The audit trail of the first jobs each violation names, and the node's drains: what a
    reader needs to tell a defect from a wrong check without the store (a soak's PostgreSQL
    database is dropped after it)."""
    trails: dict[str, list[tuple[str, str, float]]] = {}
    for line in violations:
        _, _, named = line.partition(": ")
        for item in named.split(", ")[:per_line]:
            job_id = item.split(" ")[0]
            if job_id in rows.jobs:
                trails[job_id] = rows.events.get(job_id, [])
    return {"trails": trails, "drains": rows.drains if trails else []}
