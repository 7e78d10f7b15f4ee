"""Finding one job for an actor: what every job use-case (jobs, apps, views) starts from, kept
apart from submission so that admission's helpers can use it without an import circle."""

from __future__ import annotations

import re

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from railyard.client.bounds import JOB_ID_PATTERN
from railyard.control.errors import NotFound
from railyard.control.store.tables import JobRow, User

_JOB_ID = re.compile(JOB_ID_PATTERN)


def check_id(job_id: str) -> None:
    """Only what could be a job id reaches the store (``12`` or ``12_3``)."""
    if not _JOB_ID.fullmatch(job_id):
        raise NotFound(f"no job {job_id[:64]!r}")


def get_job(session: Session, actor: User, job_id: str) -> tuple[JobRow, str]:
    """A job the actor may see. Another user's job is NotFound, not Forbidden: ids don't leak.
    An array task is also found by its own number (its ``SLURM_JOB_ID``)."""
    check_id(job_id)
    row = session.get(JobRow, job_id)
    if row is None and job_id.isdigit():  # an array task's own number (not the array's)
        row = session.scalars(
            select(JobRow).where(JobRow.task_number == int(job_id), JobRow.number != int(job_id))
        ).first()
    if row is None or (not actor.is_admin and row.user_id != actor.id):
        raise NotFound(f"no job {job_id!r}", hint=array_hint(session, actor, job_id))
    user = session.get(User, row.user_id)
    return row, user.name if user else "?"


def array_hint(session: Session, actor: User, job_id: str) -> str | None:
    """When ``job_id`` is an array the actor may see: which ids its tasks have."""
    stmt = select(func.min(JobRow.array_index), func.max(JobRow.array_index), func.count())
    stmt = stmt.where(JobRow.array_parent == job_id)
    if not actor.is_admin:
        stmt = stmt.where(JobRow.user_id == actor.id)
    low, high, count = session.execute(stmt).one()
    if not count:
        return None
    return f"{job_id} is an array of {count} tasks, {job_id}_{low} to {job_id}_{high}: name one"
