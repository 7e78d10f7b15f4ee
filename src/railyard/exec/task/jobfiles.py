"""The files and directories of one job on a node, with the owners and modes multi-tenancy needs.

The executor runs as root on a shared machine (or as the one user in single-user mode). What
it keeps for itself lives in ``log_dir`` (mode 0711, its own): handle and exit records, task
files (0600: they hold the user's environment), and spool logs, each created there by the
executor and then given to the user (0600), so the user can read and write their log but can
neither replace it nor plant a symlink the executor would follow. ``checkpoint_dir`` and
``steps_dir`` belong to the user (0700). The batch script is written into an executor-owned
directory and given to the user (0700). Directories the executor creates on the way are 0711:
others may pass through, never list. Nothing here opens a path a user controls; the user's
own output files are opened by the wrapper after it switched to the user.
"""

from __future__ import annotations

import os
import shlex
import sys
from datetime import UTC, datetime
from pathlib import Path

from railyard.client.filenames import expand_pattern
from railyard.client.printable import printable
from railyard.exec.protocol import LaunchSpec
from railyard.exec.task.identity import Account
from railyard.exec.task.launch import RankSlot

TRAVERSE_MODE = 0o711
PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600
SHIMS = (
    ("srun", "railyard.exec.task.srun", "launches the tasks of this job's allocation"),
    ("scontrol", "railyard.exec.task.scontrol", "show hostnames and show hostlist only"),
)  # (command, module it runs, what it does): what a batch script finds first on its PATH


def make_dirs(path: Path, mode: int = TRAVERSE_MODE) -> None:
    """Create ``path`` and its missing parents, each with ``mode`` (not the umask's)."""
    missing: list[Path] = []
    for level in (path, *path.parents):
        if level.exists():
            break
        missing.append(level)
    for level in reversed(missing):
        try:
            level.mkdir(mode=mode)
        except FileExistsError:
            continue
        os.chmod(level, mode)


def user_dir(path: Path, account: Account) -> None:
    """A directory that belongs to the job's user alone."""
    make_dirs(path.parent)
    path.mkdir(mode=PRIVATE_DIR_MODE, exist_ok=True)
    if not account.is_self:
        os.chown(path, account.uid, account.gid, follow_symlinks=False)
    os.chmod(path, PRIVATE_DIR_MODE, follow_symlinks=False)


def prepare(spec: LaunchSpec, account: Account) -> None:
    """Every directory of the job, and its batch script, before any process starts."""
    make_dirs(spec.log_dir)
    os.chmod(spec.log_dir, TRAVERSE_MODE)
    user_dir(spec.checkpoint_dir, account)
    if spec.steps_dir is not None:
        user_dir(spec.steps_dir, account)
    if spec.app_dir is not None:
        user_dir(spec.app_dir, account)
    if spec.script is not None and spec.script_path is not None:
        # Written aside, then renamed over: a relaunch of the same attempt must not truncate a
        # script that a batch shell of the first launch is still reading (bash reads by offset).
        make_dirs(spec.script_path.parent)
        tmp = spec.script_path.with_name(f".{spec.script_path.name}.tmp")
        fd = _create(tmp, account, PRIVATE_DIR_MODE, truncate=True)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(spec.script)
        os.replace(tmp, spec.script_path)


def _create(path: Path, account: Account, mode: int, *, truncate: bool) -> int:
    """Create (or reopen) a file in an executor-owned directory and give it to the user."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    flags |= os.O_TRUNC if truncate else os.O_APPEND
    fd = os.open(path, flags, mode)
    if not account.is_self:
        os.fchown(fd, account.uid, account.gid)
    os.fchmod(fd, mode)
    return fd


def open_spool_log(path: Path, account: Account) -> int:
    """The process's spool log, appended across restarts, readable by the user alone."""
    return _create(path, account, PRIVATE_FILE_MODE, truncate=False)


def install_shims(bin_dir: Path) -> Path:
    """A tiny ``srun`` and ``scontrol`` for a batch script's PATH; each runs its module
    (:mod:`railyard.exec.task.srun`, :mod:`railyard.exec.task.scontrol`) with this interpreter,
    which the job's user must be able to execute: install railyard where job users can read
    it. Returns ``bin_dir``."""
    make_dirs(bin_dir)
    for name, module, what in SHIMS:
        _install_shim(bin_dir, name, module, what)
    return bin_dir


def _install_shim(bin_dir: Path, name: str, module: str, what: str) -> None:
    """``bin_dir/name``: a /bin/sh wrapper that execs ``python -I -m module``, replaced whole."""
    python = shlex.quote(sys.executable)
    text = (
        "#!/bin/sh\n"
        f"# railyard's {name}: {what}\n"
        f"if [ ! -x {python} ]; then\n"
        f"  echo \"{name}: railyard's Python {python} cannot be run by $(id -un)"
        ' (hint: install railyard where job users can read it)" >&2\n'
        "  exit 2\n"
        "fi\n"
        f'exec {python} -I -m {module} "$@"\n'
    )
    path = bin_dir / name
    tmp = bin_dir / f".{name}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o755)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(tmp, 0o755)
    os.replace(tmp, path)


def output_paths(
    spec: LaunchSpec, slot: RankSlot, node_index: int
) -> tuple[str | None, str | None]:
    """The ``--output``/``--error`` files of one process, patterns expanded."""
    out = spec.output
    step = "batch" if spec.batch else "0"

    def expand(pattern: str | None) -> str | None:
        if pattern is None:
            return None
        return expand_pattern(
            pattern, out.fields, node=slot.node, node_index=node_index, task=slot.rank, step=step
        )

    return expand(out.stdout), expand(out.stderr)


def header(
    spec: LaunchSpec,
    slot: RankSlot,
    account: Account,
    env: dict[str, str],
    *,
    processes: int,
    port: int,
    limits: str,
    devices: str = "",
) -> str:
    """The lines each process's log starts with: who, where, which GPUs, which limits, and
    whether the GPUs are confined."""
    stamp = datetime.now(UTC).isoformat(timespec="seconds")
    what = "batch script" if spec.batch else f"rank {slot.rank}/{processes}"
    wiring = "" if spec.batch else f" port {port}"  # a batch script's srun picks its own
    return (
        f"==== railyard {stamp} job {spec.job_id} restart {spec.restart_count} {what} "
        f"node {slot.node} gpus [{env.get('CUDA_VISIBLE_DEVICES', '')}]{wiring} "
        f"user {account.name}: {printable(shlex.join(spec.command))}\n"
        f"==== {limits}\n" + (f"==== {devices}\n" if devices else "")
    )
