"""Web apps as jobs (``railyard jupyter``): where an app listens, and whose it is.

An app job (``terminal = "app"``) gets a directory of its user's own (0700) in its job's spool
directory, which root owns, and is told in ``RAILYARD_APP_SOCKET`` to listen on a Unix socket
there (JupyterLab's ``--ServerApp.sock``); an app that can only listen on TCP gets a loopback
port in ``RAILYARD_APP_PORT``. ``RAILYARD_APP_BASE`` is the path the dashboard serves it under
(``/ui/jobs/N/app/``). The dashboard's proxy (`web.appproxy`) reaches it for the job's owner
alone and first checks that whoever listens there is the job's own account
(`exec.terminals.appsocket`),
so a symlink the user plants, or another user's process on the port, is refused; on the
machine the app runs on, wherever that is (`exec.terminals.jobsocket`).
"""

from __future__ import annotations

import socket
from pathlib import Path

from sqlalchemy.orm import Session

from railyard.control.errors import Conflict, NotFound
from railyard.control.store.paths import job_dir
from railyard.control.store.tables import JobState, User
from railyard.control.usecases.joblookup import get_job
from railyard.control.usecases.logs import node_of
from railyard.exec.terminals.jobsocket import JobSocket

SOCKET_VAR = "RAILYARD_APP_SOCKET"
PORT_VAR = "RAILYARD_APP_PORT"
BASE_VAR = "RAILYARD_APP_BASE"
APP = "app"  # the job's ``terminal`` value


def app_dir(spool_dir: Path, job_id: str) -> Path:
    return job_dir(spool_dir, job_id) / "app"


def base_path(job_id: str) -> str:
    return f"/ui/jobs/{job_id}/app/"


def app_env() -> dict[str, str]:
    """Stored with the job at submit: a loopback port free on this machine now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return {PORT_VAR: str(s.getsockname()[1])}


def app_launch_env(spool_dir: Path, job_id: str) -> dict[str, str]:
    """Given to the app when it starts: where to listen, and the path it is served under."""
    return {SOCKET_VAR: str(app_dir(spool_dir, job_id) / "app.sock"), BASE_VAR: base_path(job_id)}


def app_target(session: Session, actor: User, job_id: str, spool_dir: Path) -> JobSocket:
    """Where the owner's running app listens, and the account that must listen there (the
    job's; none: this server's own, which runs every job as itself); NotFound for anyone
    else's (an admin's too), Conflict (saying why) for a job that is no app or not running."""
    row, _ = get_job(session, actor, job_id)
    if row.user_id != actor.id:
        raise NotFound(f"no job {job_id!r}")
    if row.terminal != APP:
        raise Conflict(f"job {row.id} is not a web app", hint="railyard jupyter starts one")
    if row.state != JobState.RUNNING.value:
        raise Conflict(f"job {row.id} is {row.state}: its app is not running")
    port = row.env.get(PORT_VAR, "")
    where = app_dir(spool_dir, row.id) / "app.sock"
    return JobSocket(
        row.id, row.restart_count, node_of(row, 0), APP, str(where),
        port=int(port) if port.isdigit() else None, user=row.unix_user or "",
    )  # fmt: skip
