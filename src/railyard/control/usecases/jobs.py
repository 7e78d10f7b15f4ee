"""Job use-cases: submit (with every check a job must pass before it is stored), list, show,
cancel, hold and release. Plain functions on a Session and the acting User; the API routes
call them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from itertools import accumulate
from pathlib import Path
from typing import Any

from sqlalchemy import and_, func, or_, select, text, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from railyard.client.bounds import JOB_ID_PATTERN
from railyard.control.errors import Conflict, Forbidden, Invalid, NotFound, ServiceError
from railyard.control.store.bulk import (
    JobView,
    cancel_array,
    cancelled,
    insert_jobs,
    submitted_events,
)
from railyard.control.store.effects import record, request_wake
from railyard.control.store.paths import script_path
from railyard.control.store.tables import (
    ACTIVE_STATES,
    HOLD_REASONS,
    Counter,
    JobRow,
    JobState,
    User,
)
from railyard.control.store.transitions import transition_many
from railyard.control.submission import JobSubmit
from railyard.control.usecases.accounts import RunAs
from railyard.control.usecases.admission import Admitted, admit
from railyard.control.usecases.joblookup import check_id, get_job
from railyard.control.usecases.sizebounds import DEFAULT_LIMITS, SiteLimits
from railyard.sched import StopCause
from railyard.sched.model import begins_again_t_s

JOB_COUNTER = "job"
_JOB_ID = re.compile(JOB_ID_PATTERN)


def _next_number(session: Session, count: int = 1) -> int:
    """Reserve ``count`` job numbers atomically in this transaction; return the first.

    ``UPDATE ... RETURNING`` holds the row lock until commit (PostgreSQL) or takes the
    database write lock (SQLite), so two submitters never get the same number. On PostgreSQL
    a big reservation (an array, a batch) commits in a short transaction of its own: the
    10,000 rows that follow took 0.7 s, and every single submit waited that long for the
    counter's lock (p99 0.35-0.53 s under an array). A submit that then fails leaves its
    numbers unused, as Slurm's job ids have gaps.
    """
    connection = session.connection()
    params = {"count": count, "name": JOB_COUNTER}
    if count >= RESERVE_APART_MIN and connection.dialect.name == "postgresql":
        with connection.engine.begin() as apart:  # committed now: the row lock goes with it
            value = apart.execute(_BUMP, params).scalar_one_or_none()
        if value is not None:
            return int(value) - count + 1
    value = connection.execute(_BUMP, params).scalar_one_or_none()
    if value is None:
        try:
            with session.begin_nested():
                session.add(Counter(name=JOB_COUNTER, value=count))
            return 1
        except IntegrityError:  # someone created it first
            value = connection.execute(_BUMP, params).scalar_one()
    return int(value) - count + 1


ALIKE_COPY_MIN = 16  # alike jobs: fewer go in as one executemany
RESERVE_APART_MIN = 100  # numbers: fewer are reserved inside the submit's own transaction
_BUMP = text("UPDATE counters SET value = value + :count WHERE name = :name RETURNING value")
"""Built once: building the ``UPDATE`` per submit was a fifth of a group commit's CPU."""


def _task_numbers(number: int, count: int) -> list[int]:
    """Each array task its own numeric id, as Slurm: the array's number goes to the last task,
    the others take the numbers reserved after it (``3_0..3_3`` -> 4, 5, 6, 3)."""
    return [number + i + 1 for i in range(count - 1)] + [number]


def submit(
    session: Session,
    user: User,
    spec: JobSubmit,
    now_t_s: float,
    *,
    spool_dir: Path,
    known_flavors: set[str] | None = None,
    run_as: RunAs | None = None,
    limits: SiteLimits = DEFAULT_LIMITS,
) -> Sequence[JobView]:
    """Validate and store one job, or one row per array task (ids ``<n>_<i>``), in one
    multi-row ``INSERT`` (:mod:`railyard.control.store.bulk`); returns the stored rows' views.

    ``run_as`` None skips the Unix-account check (an embedded API with no executor)."""
    admitted = admit(session, user, spec, now_t_s, known_flavors=known_flavors, run_as=run_as,
                     limits=limits)  # fmt: skip
    return store_admitted(session, user, [admitted], now_t_s, spool_dir)[0]


def store_admitted(
    session: Session, user: User, admitted: Sequence[Admitted], now_t_s: float, spool_dir: Path
) -> list[Sequence[JobView]]:
    """Store a user's admitted jobs (a batch's, or one): their numbers reserved in one
    ``UPDATE``, their rows in one multi-row ``INSERT`` and their events in one ``INSERT ...
    SELECT``, whatever their count; returns each job's stored rows, in order."""
    first = number = _next_number(session, sum(a.count for a in admitted))
    per_job: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []
    stored: list[Sequence[JobView]]
    for job in admitted:
        count, indices = job.count, job.indices
        numbers = _task_numbers(number, count)
        # expand_array's naming (Slurm's): task ``<number>_<index>``
        ids = [f"{number}_{i}" for i in indices] if indices is not None else [str(number)]
        shared = {**job.common, "number": number,
                  "array_parent": str(number) if indices is not None else None}  # fmt: skip
        command = job.spec.command
        tasks = [
            {
                "id": job_id,
                "task_number": numbers[i],
                "command": list(command or [str(script_path(spool_dir, job_id))]),
                "array_index": indices[i] if indices is not None else None,
            }
            for i, job_id in enumerate(ids)
        ]
        per_job.append((shared, tasks))
        number += count
    if len(per_job) == 1:  # the shared columns once, not once per task
        stored = [insert_jobs(session, *per_job[0])]
    elif len(admitted) >= ALIKE_COPY_MIN and all(
        job is admitted[0] and job.indices is None for job in admitted
    ):  # a batch of alike jobs: one row sent, the rest copied by the store (as an array's)
        common = {**per_job[0][0], "array_parent": None}
        del common["number"]
        rows = [{**tasks[0], "number": shared["number"]} for shared, tasks in per_job]
        views = insert_jobs(session, common, rows)
        stored = [views.single(i) for i in range(len(rows))]
    else:
        merged = insert_jobs(session, {}, [{**c, **t} for c, tasks in per_job for t in tasks])
        ends = list(accumulate(len(tasks) for _, tasks in per_job))
        stored = [merged[end - len(t) : end] for end, (_, t) in zip(ends, per_job, strict=True)]
    submitted_events(session, user.name, first, number, now_t_s)
    request_wake(session)
    return stored


def list_jobs(
    session: Session,
    actor: User,
    *,
    states: list[str] | None = None,
    queue: str | None = None,
    user: str | None = None,
    array: str | None = None,
    finished_within_s: float | None = None,
    since_t_s: float | None = None,
    until_t_s: float | None = None,
    now_t_s: float = 0.0,
    limit: int | None = None,
    offset: int = 0,
    newest_first: bool = False,
    after: tuple[int, int] | None = None,
) -> list[tuple[JobRow, str]]:
    """Jobs with their user's name, oldest first (or newest first); a non-admin sees only
    their own.

    ``finished_within_s``: finished jobs only if they ended that recently before ``now_t_s``
    (squeue's MinJobAge). ``since_t_s``/``until_t_s``: jobs waiting or running at some moment
    of that window, i.e. eligible by its end (submitted, past its ``--begin``) and not ended
    before its start (sacct's ``--starttime``/``--endtime``). ``after``: (number, array index
    or -1) of the last job of the previous page, oldest first: the next page walks the number
    index from there (an OFFSET reads and drops every row before it).
    """
    known = [st.value for st in JobState]
    for st in states or []:
        if st not in known:
            raise Invalid("state", f"unknown state {st!r}", f"one of {', '.join(known)}")
    stmt = select(JobRow, User.name).join(User, JobRow.user_id == User.id)
    if not actor.is_admin:
        stmt = stmt.where(JobRow.user_id == actor.id)
    if states:
        stmt = stmt.where(JobRow.state.in_(states))
    if queue is not None:
        stmt = stmt.where(JobRow.queue == queue)
    if user is not None:
        stmt = stmt.where(User.name == user)
    if array is not None:
        stmt = stmt.where(JobRow.array_parent == array)
    if finished_within_s is not None:
        recent = JobRow.end_t_s >= now_t_s - finished_within_s
        stmt = stmt.where(or_(JobRow.state.in_(ACTIVE_STATES), recent))
    if until_t_s is not None:  # eligible by then: submitted, and past its --begin (sacct)
        stmt = stmt.where(JobRow.submit_t_s <= until_t_s)
        stmt = stmt.where(or_(JobRow.begin_t_s.is_(None), JobRow.begin_t_s <= until_t_s))
    if since_t_s is not None:
        stmt = stmt.where(or_(JobRow.end_t_s.is_(None), JobRow.end_t_s >= since_t_s))
    if after is not None:
        number, index = after
        stmt = stmt.where(or_(JobRow.number > number, and_(
            JobRow.number == number, func.coalesce(JobRow.array_index, -1) > index)))  # fmt: skip
    if newest_first:
        stmt = stmt.order_by(JobRow.number.desc(), JobRow.array_index.desc())
    else:
        stmt = stmt.order_by(JobRow.number, JobRow.array_index)
    stmt = stmt.limit(limit).offset(offset or None)
    return list(session.execute(stmt))


def job_targets(session: Session, actor: User, job_id: str) -> list[tuple[JobRow, str]]:
    """The job ``job_id``, or every task of the array whose parent id it is, or the array task
    whose own number it is."""
    if session.get(JobRow, job_id) is not None:
        return [get_job(session, actor, job_id)]
    stmt = select(JobRow, User.name).join(User, JobRow.user_id == User.id)
    stmt = stmt.where(JobRow.array_parent == job_id).order_by(JobRow.array_index)
    if not actor.is_admin:
        stmt = stmt.where(JobRow.user_id == actor.id)
    targets = [(row, name) for row, name in session.execute(stmt)]
    if not targets:  # an array task's own number (its SLURM_JOB_ID), or nothing
        return [get_job(session, actor, job_id)]
    return targets


def _cancel_values(actor: User, now_t_s: float) -> tuple[dict[str, Any], dict[str, Any]]:
    """What a cancel writes to a pending job (it ends) and to a started one (it stops)."""
    reason = f"cancelled by {actor.name}"[:256]
    ended = {"state": JobState.CANCELLED.value, "end_t_s": now_t_s, "reason": reason,
             "updated_t_s": now_t_s}  # fmt: skip
    stopping = {"state": JobState.CANCELLING.value, "reason": reason,
                "stop_cause": StopCause.CANCELLED.value, "updated_t_s": now_t_s}  # fmt: skip
    return ended, stopping


def _cancel_rows(
    session: Session, actor: User, targets: list[tuple[Any, str]], now_t_s: float
) -> None:
    """The compare-and-sets of a cancel of ``targets``, two statements for all of them (a
    job the loop finished or started since we read it is never overwritten), and their
    events."""
    ended_values, stopping_values = _cancel_values(actor, now_t_s)
    ids = [row.id for row, _ in targets]
    ended = transition_many(session, ids, [JobState.PENDING], ended_values, retry_conflicts=True)
    stopping = transition_many(
        session, ids, CANCELLABLE_STARTED, stopping_values, retry_conflicts=True
    )
    cancelled(session, actor, now_t_s, ended, stopping)


def cancel_job(session: Session, actor: User, job_id: str, now_t_s: float) -> list[tuple[Any, str]]:
    """Pending jobs end at once; started ones become CANCELLING and the loop stops them.

    An array's parent id (``12`` for ``12_0..12_9``) cancels every task, in two bulk
    statements (:func:`bulk.cancel_array`), answered as the array's record and its tasks still
    active. Cancelling a finished job changes nothing (like a
    repeated ``scancel``). Each change is a compare-and-set from the states a cancel may leave
    (:mod:`railyard.control.store.transitions`): a job the loop finished or started since we read it
    is never overwritten with a stale state. Returns each job as it is now, with its user.
    """
    check_id(job_id)
    if session.get(JobRow, job_id) is None and job_id.isdigit():
        ended_values, stopping_values = _cancel_values(actor, now_t_s)
        try:
            return cancel_array(
                session, actor, job_id, now_t_s, ended_values, stopping_values, CANCELLABLE_STARTED
            )
        except NotFound:  # no array: maybe an array task's own number (`scancel $SLURM_JOB_ID`)
            pass
    targets = [get_job(session, actor, job_id)]
    _cancel_rows(session, actor, targets, now_t_s)
    return targets


def cancel_jobs(
    session: Session, actor: User, job_ids: list[str], now_t_s: float
) -> tuple[list[tuple[Any, str]], list[tuple[str, ServiceError]]]:
    """:func:`cancel_job` for each id, all in the caller's one transaction: the loop sees every
    cancel or none. The jobs found by their own id are read in one query and changed in two
    statements together (an admin's ``cancel -u`` of 1,000 jobs held the store's write lock
    for seconds, one job at a time); arrays, task numbers and refusals take the one-id way. A
    refusal is collected with its id and the others go on. A repeated id is cancelled once."""
    wanted = list(dict.fromkeys(job_ids))
    plain = [i for i in wanted if _JOB_ID.fullmatch(i)]
    rows = {r.id: r for r in session.scalars(select(JobRow).where(JobRow.id.in_(plain)))}
    owners = {r.user_id for r in rows.values()}
    names = dict(session.execute(select(User.id, User.name).where(User.id.in_(owners))).all())
    together: list[tuple[Any, str]] = []
    done: list[tuple[Any, str]] = []
    refused: list[tuple[str, ServiceError]] = []
    for job_id in wanted:
        row = rows.get(job_id)
        if row is not None and (actor.is_admin or row.user_id == actor.id):
            together.append((row, names.get(row.user_id, "?")))
            continue
        try:
            done += cancel_job(session, actor, job_id, now_t_s)
        except (NotFound, Forbidden, Invalid) as exc:
            refused.append((job_id, exc))
    if together:
        _cancel_rows(session, actor, together, now_t_s)
    return together + done, refused


CANCELLABLE_STARTED = (JobState.STARTING, JobState.RUNNING, JobState.PREEMPTING)


def hold_job(
    session: Session, actor: User, job_id: str, now_t_s: float
) -> list[tuple[JobRow, str]]:
    """Keep a pending job from starting (``scontrol hold``); an array id holds its pending
    tasks. A job that has started cannot be held (409). Returns the jobs now held.

    Compare-and-set on ``pending``: a job the loop started since we read it stays unheld."""
    check_id(job_id)
    targets = job_targets(session, actor, job_id)
    kinds: dict[str, list[str]] = {"user": [], "admin": []}
    for row, _ in targets:
        kind = "admin" if actor.is_admin and row.user_id != actor.id else "user"
        if row.state == JobState.PENDING.value and not (row.hold == "admin" and kind == "user"):
            kinds[kind].append(row.id)  # an admin's hold stays one
    held: set[str] = set()
    for kind, ids in kinds.items():
        values = {"hold": kind, "reason": HOLD_REASONS[kind], "updated_t_s": now_t_s}
        for changed in transition_many(
            session, ids, [JobState.PENDING], values, retry_conflicts=True
        ):
            held.add(changed)
            record(session, now_t_s, "hold", f"{actor.name}: {HOLD_REASONS[kind]}", changed)
    done = [(r, n) for r, n in targets if r.id in held or (r.hold and r.state == "pending")]
    if not done:
        state = targets[0][0].state if len(targets) == 1 else "past pending"
        raise Conflict(f"job {job_id} is {state}: only a pending job can be held")
    request_wake(session)
    return done


def release_job(
    session: Session, actor: User, job_id: str, now_t_s: float
) -> list[tuple[JobRow, str]]:
    """Let held jobs start again (``scontrol release``); releasing a pending job that is not
    held changes nothing, one that no longer pends is refused (409, as scontrol's "Job is no
    longer pending execution"). Only an admin releases an admin's hold (403). A pending job's
    begin time moves to the release, as Slurm's EligibleTime does: a held job has not been
    waiting, and aged from its submission it would be starving the moment it is let go
    (`sched.model.waiting_since_t_s`).

    Compare-and-set on the hold it read: a hold placed meanwhile is not released unseen."""
    check_id(job_id)
    targets = job_targets(session, actor, job_id)
    held = [(r, n) for r, n in targets if r.hold is not None]
    if not held and all(r.state != JobState.PENDING.value for r, _ in targets):
        state = targets[0][0].state if len(targets) == 1 else "past pending"
        raise Conflict(f"job {job_id} is {state}: only a pending job can be released")
    for row, _ in held:
        if row.hold == "admin" and not actor.is_admin:
            raise Forbidden(f"job {row.id} was held by an admin: only an admin can release it")
    released = []
    for row, name in held:
        pending = row.state == JobState.PENDING.value
        stmt = update(JobRow).where(JobRow.id == row.id, JobRow.hold == row.hold)
        values: dict[str, object] = {"hold": None, "updated_t_s": now_t_s}
        if pending:
            values |= {"reason": "", "begin_t_s": begins_again_t_s(row.begin_t_s, now_t_s)}
        stmt = stmt.where(JobRow.state == row.state).values(**values).returning(JobRow.id)
        if session.scalars(stmt.execution_options(synchronize_session=False)).first():
            session.expire(row)
            record(session, now_t_s, "release", f"{actor.name}: released", row.id)
            released.append((row, name))
    request_wake(session)
    return released
