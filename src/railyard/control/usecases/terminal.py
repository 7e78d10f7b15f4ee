"""Whose terminal a WebSocket may reach: an interactive job's owner, while it runs; and whose
running job ``railyard attach`` may open a shell in (its owner's).

The socket lives in the job's records directory, which no user can reach; the control plane
connects there for the owner only (an admin cannot type into another user's shell either),
so the bearer token of the WebSocket is the whole of the access check. Each answer names the
machine the socket is on (the rank's node in the job's handle), where `exec.terminals.jobsocket`
reaches
it, here or through the backend (a Ray node's agent)."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy.orm import Session

from railyard.control.errors import Conflict, Invalid, NotFound
from railyard.control.store.paths import logs_dir
from railyard.control.store.tables import JobRow, JobState, User
from railyard.control.usecases.joblookup import get_job
from railyard.control.usecases.logs import node_of, records_of
from railyard.exec.task.taskfile import rank_task_path
from railyard.exec.terminals import terminal
from railyard.exec.terminals.jobsocket import JobSocket

WAITING = frozenset((JobState.PENDING.value, JobState.STARTING.value))
LIVE = frozenset(s.value for s in (JobState.RUNNING, JobState.PREEMPTING, JobState.CANCELLING))


def attach_target(
    session: Session,
    actor: User,
    job_id: str,
    rank: int,
    dirs: tuple[Path, Path],
    *,
    pty: bool = True,
    ssh: bool = False,
) -> JobSocket:
    """For ``railyard attach`` (and ``ssh job-N``): a new shell in rank ``rank`` of the
    owner's running job (any job, batch or interactive), from its task file and the attempt's
    records directory (``dirs``: the state and spool directories); NotFound for another
    user's."""
    state_dir, spool_dir = dirs
    row = _started(session, actor, job_id)
    if row.state != JobState.RUNNING.value:
        raise Conflict(f"job {row.id} is {row.state}: there is nothing to attach to")
    if not 0 <= rank < 1 << 20:
        raise Invalid("rank", f"{rank} is not a rank")
    task = rank_task_path(logs_dir(spool_dir, row.id), rank, row.restart_count)
    return JobSocket(
        row.id, row.restart_count, node_of(row, rank), "attach", str(task),
        records=str(records_of(row, rank, state_dir)), rank=rank, pty=pty, ssh=ssh,
    )  # fmt: skip


def terminal_socket(session: Session, actor: User, job_id: str, state_dir: Path) -> JobSocket:
    """The socket of ``job_id``'s running task; NotFound for another user's job, Conflict
    (with why) for a batch job, one not started yet or one that ended."""
    row = _started(session, actor, job_id)
    if not row.terminal:
        raise Conflict(f"job {row.id} is a batch job: it has no terminal",
                       hint="railyard logs -f shows its output")  # fmt: skip
    if row.terminal == "app":
        raise Conflict(f"job {row.id} is a web app: it has no terminal",
                       hint=f"open /ui/jobs/{row.id}/app/ in the dashboard")  # fmt: skip
    if row.state not in LIVE:
        raise Conflict(f"job {row.id} is {row.state}: its terminal is gone")
    path = terminal.socket_path(records_of(row, 0, state_dir), row.restart_count)
    return JobSocket(row.id, row.restart_count, node_of(row, 0), "terminal", str(path))


def _started(session: Session, actor: User, job_id: str) -> JobRow:
    """The actor's own job once it started; NotFound for another user's (an admin's too)."""
    row, _ = get_job(session, actor, job_id)
    if row.user_id != actor.id:
        raise NotFound(f"no job {job_id!r}")
    if row.state in WAITING:
        raise Conflict(f"job {row.id} has not started yet ({row.state})", hint="wait for it")
    return row
