"""Where the control plane keeps things on disk: one place, so no two modules disagree.

``<state_dir>/railyard.db`` (the embedded store), ``<state_dir>/client.json`` (the admin's
CLI credentials), ``<state_dir>/jobs/<id>/`` (a job's script, ``logs/`` and
``checkpoints/``) and ``<state_dir>/attempts/<id>/`` (each attempt's start markers and exit
records: apart from the job's files, so that losing those never makes a job run twice). The
state directory is ``$RAILYARD_HOME`` or ``~/.railyard``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from railyard.control.errors import Unavailable


def default_state_dir(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    return Path(env.get("RAILYARD_HOME") or Path.home() / ".railyard")


def ensure_state_dir(state_dir: Path) -> None:
    """Create the state directory and prove it writable, or refuse in one line: the server
    must not start (and fail later, on every write) where it cannot keep its state."""
    try:
        state_dir.mkdir(parents=True, exist_ok=True)
        probe = state_dir / f".railyard-write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
        raise Unavailable(
            f"state directory {state_dir}: {why}",
            hint="give a writable directory with --state-dir or RAILYARD_HOME",
        ) from None


def database_path(state_dir: Path) -> Path:
    return state_dir / "railyard.db"


def client_config_path(state_dir: Path) -> Path:
    return state_dir / "client.json"


def job_dir(state_dir: Path, job_id: str) -> Path:
    return state_dir / "jobs" / job_id


def logs_dir(state_dir: Path, job_id: str) -> Path:
    return job_dir(state_dir, job_id) / "logs"


def checkpoint_dir(state_dir: Path, job_id: str) -> Path:
    return job_dir(state_dir, job_id) / "checkpoints"


def log_path(state_dir: Path, job_id: str, rank: int) -> Path:
    """Where the executor writes rank ``rank`` (``LaunchSpec.log_dir`` is :func:`logs_dir`)."""
    return logs_dir(state_dir, job_id) / f"rank-{rank}.log"


def attempts_dir(state_dir: Path, job_id: str) -> Path:
    """``LaunchSpec.records_dir``: what makes each start of the job happen at most once."""
    return state_dir / "attempts" / job_id


def script_path(state_dir: Path, job_id: str) -> Path:
    """Where the loop writes ``JobRow.script`` before it starts the job."""
    return job_dir(state_dir, job_id) / "script.sh"
