"""What a use-case leaves behind besides rows: an audit event, a wake-up for the loop, and word
that who a token is has changed.

Use-cases flush but never commit; the caller's ``Store.session()`` commits once. A change the
loop must see marks the session (:func:`request_wake`); the API wakes the loop after commit. A
change to a user or a token marks it too (:func:`request_auth_reload`): after commit the API
forgets the tokens it has recently seen (``usecases.auth.TokenCache``).
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import insert
from sqlalchemy.orm import Session

from railyard.control.store.tables import EventRow


def request_wake(session: Session) -> None:
    session.info["wake"] = True


def request_auth_reload(session: Session) -> None:
    session.info["auth"] = True


def wants_auth_reload(session: Session) -> bool:
    """True once after a change to users or tokens; the caller forgets cached tokens after
    commit."""
    return bool(session.info.pop("auth", False))


def wants_wake(session: Session) -> bool:
    """True once after a change the loop must see; the caller wakes it after commit."""
    return bool(session.info.pop("wake", False))


def record(session: Session, now_t_s: float, kind: str, message: str, job: str | None) -> None:
    """Append to the audit trail (``events`` table)."""
    session.add(EventRow(t_s=now_t_s, job_id=job, kind=kind, message=message))


def record_many(session: Session, now_t_s: float, events: Sequence[tuple[str, str, str]]) -> None:
    """Append (kind, message, job) events in one statement: a step that starts a thousand
    jobs wrote them one ORM object at a time (a third of a second of its write on PostgreSQL)."""
    if events:
        rows = [{"t_s": now_t_s, "kind": k, "message": m, "job_id": j} for k, m, j in events]
        session.execute(insert(EventRow), rows)
