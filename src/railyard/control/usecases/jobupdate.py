"""``scontrol update`` of a pending job: its time limit, priority, dependency, nice or name;
of a running job: its time limit; of an array: its throttle (``ArrayTaskThrottle``).

Slurm lets a user lower a job's time limit but not raise it, running or not (an admin
extends a running job: ``TimeLimit=+1:00:00``), and set a priority only as an admin (users
lower theirs with ``nice``); railyard keeps its submit rule for priorities (a plain member
asks at most the queue's ``max_priority``, ``use-cases/priority.py``), so an update can never
give a job what its submit could not. Each change is a compare-and-set on the states read
(``pending``, or also ``starting``/``running`` for a time limit alone): a job that moved
since it was read is left alone and answered 409. The stamp (``updated_t_s``) moves, so the
loop's next world read converts the row again (a running job's end, its backfill
reservation). An array's id changes its tasks by one statement, checked by queries that read
none of them but the first and the one an error names, and answers with its first task (up
to 10,000 tasks; the store's write lock is held from the update to the commit, and another
user's submit waits that long). No size (tasks, CPUs, memory, GPUs, nodes, array tasks) can
be updated: what ``sizebounds`` bounds at submit stays bounded (``JobUpdate`` refuses any
other field, 422).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, case, or_, select
from sqlalchemy.orm import Session

from railyard.client.bounds import INT32_MAX, MAX_WALLTIME_S
from railyard.client.values import parse_time_change, priority_label
from railyard.control.errors import Conflict, Forbidden, Invalid
from railyard.control.schemas import JobUpdate
from railyard.control.store.effects import record_many, request_wake
from railyard.control.store.tables import JobRow, JobState, User
from railyard.control.store.transitions import transition_where
from railyard.control.submission import JobSubmit
from railyard.control.usecases.admission import check_dependency
from railyard.control.usecases.joblookup import get_job
from railyard.control.usecases.queuerules import check_nice, job_priority
from railyard.sched.dependencies import job_ids, parse_dependency

TIME_STATES = [JobState.PENDING, JobState.STARTING, JobState.RUNNING]  # a time limit's


def update_job(
    session: Session, actor: User, job_id: str, change: JobUpdate, now_t_s: float
) -> list[tuple[JobRow, str]]:
    """Apply ``change`` to the pending job ``job_id`` (an array's id: its pending tasks), or
    a time limit alone to the running one too; returns them as they are now. 403 past a
    bound, 409 for a job in no state the change applies to, 422 for a change that names
    nothing or a job that does not exist."""
    asked = (change.time, change.priority, change.dependency, change.nice, change.name)
    if change.array_throttle is not None:
        if any(value is not None for value in asked):
            raise Invalid("array_throttle", "an array's throttle is updated alone",
                          "one update for ArrayTaskThrottle, another for the rest")  # fmt: skip
        return _throttle(session, actor, job_id, change.array_throttle, now_t_s)
    if all(value is None for value in asked):
        raise Invalid(None, "nothing to update", "give --time, --priority, --nice or --dependency")
    only_time = all(v is None for v in asked[1:])
    states = TIME_STATES if only_time else [JobState.PENDING]
    where, first = _targets(session, actor, job_id, states)
    if first[0].state not in {s.value for s in states}:
        what = "a pending or running job" if only_time else "a pending job"
        hint = "" if only_time else " (a running job's time limit can)"
        raise Conflict(f"job {job_id} is {first[0].state}: only {what} can be updated{hint}")
    where = [*where, JobRow.state.in_([s.value for s in states])]
    values: dict[str, Any] = {"updated_t_s": now_t_s}
    said: list[str] = []
    if change.time is not None:
        values["walltime_s"] = _time_limit(session, actor, where, first[0], change.time)
        said.append(f"time limit {change.time}")
    if change.nice is not None:
        check_nice(actor, change.nice)
        values["nice"] = change.nice
        # the class asked stays; the nice it is lowered by changes (stored after nice)
        moved = JobRow.priority + JobRow.nice - change.nice
        values["priority"] = case((moved < 0, 0), (moved > INT32_MAX, INT32_MAX), else_=moved)
        said.append(f"nice {change.nice}")
    if change.priority is not None:
        values["priority"] = _priority(session, actor, first[0], change.priority, change.nice)
        said.append(f"priority {priority_label(values['priority'])}")
    if change.name is not None:
        values["name"] = change.name
        said.append(f"name {change.name!r}")
    if change.dependency is not None:
        _not_on_itself(session, job_id, where, first[0], change.dependency)
        if change.dependency:
            check_dependency(
                session, actor, frozenset(job_ids(parse_dependency(change.dependency)[0]))
            )
        values["dependency"] = change.dependency or None
        said.append(f"dependency {change.dependency or 'none'}")
        if not change.dependency:  # free to run from now: it waits from now, as when the
            # loop finds one met; per row, from what the row holds as the update lands
            # (`sched.model.begins_again_t_s` in SQL): a task without a dependency, or with
            # its own later --begin, keeps its begin time
            values["begin_t_s"] = case(
                (JobRow.dependency.is_(None), JobRow.begin_t_s),
                (JobRow.begin_t_s > now_t_s, JobRow.begin_t_s),
                else_=now_t_s,
            )
    changed = transition_where(session, where, states, values, retry_conflicts=True)
    if not changed:
        raise Conflict(f"job {job_id} moved on meanwhile: it was not updated")
    return _answer(session, actor, changed, f"{actor.name}: {', '.join(said)}", now_t_s)


def _targets(
    session: Session, actor: User, job_id: str, states: list[JobState]
) -> tuple[list[ColumnElement[bool]], tuple[JobRow, str]]:
    """What ``job_id`` names, as a condition on rows (the job, or every task of the array
    whose id it is), and the first of them, in ``states`` where one is: an array's tasks
    are never all read (up to 10,000, and the store's write lock is held from the update
    on). 404 for another user's job or array, as a single read gives."""
    if session.get(JobRow, job_id) is None:  # an array's id, or a task's own number
        mine = [JobRow.array_parent == job_id]
        if not actor.is_admin:
            mine.append(JobRow.user_id == actor.id)
        stmt = select(JobRow, User.name).join(User, JobRow.user_id == User.id).where(*mine)
        stmt = stmt.order_by(JobRow.array_index).limit(1)
        first = session.execute(stmt.where(JobRow.state.in_([s.value for s in states]))).first()
        first = first or session.execute(stmt).first()
        if first is not None:
            return mine, (first[0], first[1])
    row, name = get_job(session, actor, job_id)
    return [JobRow.id == row.id], (row, name)


def _first(session: Session, where: list[ColumnElement[bool]]) -> JobRow | None:
    """The first row (in task order) matching ``where``: the one an error names."""
    stmt = select(JobRow).where(*where).order_by(JobRow.array_index, JobRow.id).limit(1)
    return session.scalars(stmt).first()


def _throttle(
    session: Session, actor: User, job_id: str, limit: int, now_t_s: float
) -> list[tuple[JobRow, str]]:
    """``ArrayTaskThrottle=N`` on an array's id: at most N of its tasks run at once from now
    (0: no limit), its tasks not yet ended told so (pending ones are what the loop holds back,
    reason ``JobArrayTaskLimit``); the spec they show (``0-9%2``) says the new limit. One
    statement for all of them, no task read but the first (an array holds up to 10,000, and
    the store's write lock is held meanwhile); answers with one task as it is now."""
    mine = [JobRow.array_parent == job_id]
    if not actor.is_admin:
        mine.append(JobRow.user_id == actor.id)
    first = session.scalars(select(JobRow).where(*mine).order_by(JobRow.array_index)).first()
    if first is None:
        get_job(session, actor, job_id)  # another user's or nothing: 404, ids don't leak
        raise Invalid("array_throttle", f"job {job_id} is no array",
                      "give the array's own id, 12 for 12_3")  # fmt: skip
    spec = (first.array_spec or "").partition("%")[0]
    values: dict[str, Any] = {
        "array_max_running": limit or None,
        "array_spec": f"{spec}%{limit}" if limit and spec else spec or None,
        "updated_t_s": now_t_s,
    }
    changed = transition_where(session, mine, TIME_STATES, values, retry_conflicts=True)
    if not changed:
        raise Conflict(f"array {job_id} has no task left to throttle")
    return _answer(
        session, actor, changed, f"{actor.name}: array throttle {limit or 'none'}", now_t_s
    )


def _task_order(task_id: str) -> tuple[int, str]:
    """An array task's id in index order (``12_9`` before ``12_10``)."""
    index = task_id.rpartition("_")[2]
    return (int(index), task_id) if index.isdigit() else (0, task_id)


def _answer(
    session: Session, actor: User, changed: list[str], message: str, now_t_s: float
) -> list[tuple[JobRow, str]]:
    """Record the update on each of ``changed``, wake the loop, and answer with the first (in
    task order) as the update left it: one job answers for an array, as scontrol says nothing
    per task (the list of its tasks shows them all)."""
    record_many(session, now_t_s, [("update", message, one) for one in changed])
    request_wake(session)
    row, name = get_job(session, actor, min(changed, key=_task_order))
    session.refresh(row)
    return [(row, name)]


def _not_on_itself(
    session: Session,
    job_id: str,
    where: list[ColumnElement[bool]],
    first: JobRow,
    dependency: str,
) -> None:
    """A job that waits for itself (or its own array) would wait forever; Slurm refuses it as
    a "Job dependency problem"."""
    if not dependency:
        return
    named = job_ids(parse_dependency(dependency)[0])
    own = {job_id, first.id} | ({first.array_parent} if first.array_parent else set())
    if own & named or _first(session, [*where, JobRow.id.in_(sorted(named))]) is not None:
        raise Invalid(
            "dependency",
            f"job {job_id} cannot wait for itself",
            "name other jobs (railyard queue)",
        )


def _time_limit(
    session: Session,
    actor: User,
    where: list[ColumnElement[bool]],
    first: JobRow,
    time: str | int,
) -> float | ColumnElement[float | None] | None:
    """The new limit; a plain user may only lower one (Slurm: "users can only decrease").
    ``+T``/``-T`` changes each job's own limit by T (an SQL expression of the row's). The
    checks are queries over ``where``, naming the first job that fails one."""
    sign, change_s = parse_time_change(time)
    if sign:
        assert change_s is not None  # parse_time_change refuses a change of nothing
        _check_change(session, where, time, sign * change_s)
        if sign > 0 and not actor.is_admin:
            raise Forbidden(
                f"time limit {time} raises job {first.id}'s: only an admin may raise it",
                hint="give a shorter limit, or ask an admin",
            )
        return JobRow.walltime_s + sign * change_s
    if actor.is_admin:
        return change_s
    above: list[ColumnElement[bool]] = [JobRow.walltime_s.is_not(None)]
    if change_s is not None:
        above.append(JobRow.walltime_s < change_s)
    row = _first(session, [*where, *above])
    if row is not None:
        raise Forbidden(
            f"time limit {time} is above job {row.id}'s {row.walltime_s:g} s: "
            "only an admin may raise it",
            hint="give a shorter limit, or ask an admin",
        )
    return change_s


def _check_change(
    session: Session, where: list[ColumnElement[bool]], time: str | int, delta_s: float
) -> None:
    """A change needs a limit to change, and must leave one between a second and the most
    a job may ask."""
    row = _first(session, [*where, JobRow.walltime_s.is_(None)])
    if row is not None:
        raise Invalid(
            "time",
            f"job {row.id} has no time limit of its own to change by {time}",
            "give a whole limit, e.g. TimeLimit=2:00:00",
        )
    new_s = JobRow.walltime_s + delta_s
    row = _first(session, [*where, or_(new_s <= 0, new_s > MAX_WALLTIME_S)])
    if row is not None:
        assert row.walltime_s is not None  # the first query found none without one
        raise Invalid(
            "time",
            f"{time} would leave job {row.id} a limit of {row.walltime_s + delta_s:g} s",
            f"keep it between 1 s and {MAX_WALLTIME_S / 86400:.0f} days",
        )


def _priority(
    session: Session,
    actor: User,
    row: JobRow,
    priority: str | int,
    nice: int | None = None,
) -> int:
    """The priority the submit rule gives ``priority`` in the job's queue, after its nice (the
    new one, when given; 403 past the queue's bound); an array's tasks share both."""
    spec = JobSubmit.model_validate(
        {"command": ["-"], "queue": row.queue, "priority": priority,
         "nice": row.nice if nice is None else nice}
    )  # fmt: skip
    return job_priority(session, actor, spec)
