"""Where the control plane keeps things on disk: one place, so no two modules disagree.

Two roots, because they are read by different people:

- the **state directory** (mode 0700: the server's alone): ``railyard.db`` (the embedded
  store, 0600) and ``client.json`` (the admin's CLI credentials, 0600). It is
  ``$RAILYARD_HOME`` or ``~/.railyard``.
- the **spool directory** (mode 0711: every job user may pass through, nobody may list it),
  like Slurm's ``SlurmdSpoolDir``: one directory per job, ``<spool>/<id>/`` (0711, the
  server's), holding ``logs/`` (0711, the server's: handle and exit records, task files, and
  the spool log of each process, owned by the job's user, 0600), ``checkpoints/`` and
  ``steps/`` (0700, the user's), and ``script.sh`` (the batch script, the user's, 0700).
  Job files cannot live in the state directory: its 0700 keeps other accounts out.

The spool defaults to ``/var/spool/railyard`` when the server runs as root (multi-user mode)
and to ``<state_dir>/jobs`` otherwise (single-user mode: every job runs as the server's own
account, so nobody else needs to reach it). ``railyard up --spool-dir`` moves it; a spool
serves one state directory (:func:`spool_owner_path`).

Each attempt's start markers and exit records live apart from the job's files, in
``<state_dir>/attempts/<id>/`` (the server's; the wrapper that writes them keeps the server's
account): losing a job directory must never make a job run twice.
"""

from __future__ import annotations

import os
from pathlib import Path

from railyard.control.errors import Unavailable

STATE_DIR_MODE = 0o700
SECRET_FILE_MODE = 0o600
SPOOL_DIR_MODE = 0o711
ROOT_SPOOL_DIR = Path("/var/spool/railyard")


def default_spool_dir(state_dir: Path, *, multi_user: bool) -> Path:
    return ROOT_SPOOL_DIR if multi_user else state_dir / "jobs"


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


def spool_owner_path(spool_dir: Path) -> Path:
    """Names the state directory a spool serves; job ids restart with a new store, so two
    stores must never share a spool (a new job 1 would find the old job 1's records)."""
    return spool_dir / ".railyard-state-dir"


def job_dir(spool_dir: Path, job_id: str) -> Path:
    return spool_dir / job_id


def logs_dir(spool_dir: Path, job_id: str) -> Path:
    return job_dir(spool_dir, job_id) / "logs"


def checkpoint_dir(spool_dir: Path, job_id: str) -> Path:
    return job_dir(spool_dir, job_id) / "checkpoints"


def steps_dir(spool_dir: Path, job_id: str) -> Path:
    """Where a batch script's ``srun`` numbers its steps."""
    return job_dir(spool_dir, job_id) / "steps"


def log_path(spool_dir: Path, job_id: str, rank: int) -> Path:
    """The spool log of process ``rank`` (``LaunchSpec.log_dir`` is :func:`logs_dir`)."""
    return logs_dir(spool_dir, job_id) / f"rank-{rank}.log"


def script_path(spool_dir: Path, job_id: str) -> Path:
    """Where the executor writes ``JobRow.script`` before it starts the job."""
    return job_dir(spool_dir, job_id) / "script.sh"


def default_output(array: bool) -> str:
    """sbatch's default ``--output`` for a batch script, in its working directory."""
    return "slurm-%A_%a.out" if array else "slurm-%j.out"


def attempts_dir(state_dir: Path, job_id: str) -> Path:
    """``LaunchSpec.records_dir``: what makes each start of the job happen at most once."""
    return state_dir / "attempts" / job_id
