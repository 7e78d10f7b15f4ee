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


def default_state_dir(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    return Path(env.get("RAILYARD_HOME") or Path.home() / ".railyard")


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
